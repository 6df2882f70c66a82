#include "model/weight_loader.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/numeric.h"
#include "kernels/parallel.h"

namespace mlaserve::model {

namespace {
constexpr int64_t kBlock = 128;    // FP8 block edge, DeepSeek-V3's weight_block_size
constexpr int64_t kFp4Group = 32;  // values per scale of an MXFP4 tensor
}  // namespace

const TensorInfo& WeightLoader::checked(const std::string& name, std::vector<int64_t> shape) const {
  const TensorInfo& t = checkpoint_.get(name);
  if (t.shape != shape) {
    fail("{}: tensor '{}' has shape [{}], the config implies [{}]", t.file, name,
         fmt::join(t.shape, ", "), fmt::join(shape, ", "));
  }
  return t;
}

// A [rows, cols] weight tensor: as is, or FP4 codes two per I8 byte ([rows, cols / 2]).
const TensorInfo& WeightLoader::checked_matrix(const std::string& name, int64_t rows,
                                               int64_t cols) const {
  const TensorInfo& t = checkpoint_.get(name);
  if (t.type != StorageType::I8) return checked(name, {rows, cols});
  if (cols % kFp4Group != 0 || t.shape != std::vector<int64_t>{rows, cols / 2}) {
    fail(
        "{}: FP4 tensor '{}' has shape [{}], the config implies [{}, {}] (two codes per byte, "
        "a multiple of {} columns)",
        t.file, name, fmt::join(t.shape, ", "), rows, cols / 2, kFp4Group);
  }
  return t;
}

const char* quantization_name(Quantization q) {
  switch (q) {
    case Quantization::Auto:
      return "auto";
    case Quantization::None:
      return "none";
    case Quantization::Fp8:
      return "fp8";
    case Quantization::Int8:
      return "int8";
    case Quantization::Int4:
      return "int4";
    case Quantization::Mxfp4:
      return "mxfp4";
  }
  return "?";
}

namespace {

// An E8M0 scale byte 255 is NaN, which a checkpoint must not hold.
void check_e8m0(const TensorInfo& scale) {
  for (size_t i = 0; i < scale.nbytes; ++i) {
    if (scale.data[i] == 0xff)
      fail("{}: scale tensor '{}' holds the E8M0 NaN code 0xff at element {}", scale.file,
           scale.name, i);
  }
}

}  // namespace

// The scales of a quantized tensor: DeepSeek-V3's `<name>_scale_inv` (F32/BF16, despite the name
// a multiplier) or DeepSeek-V4's `<module>.scale` (E8M0 powers of two, or F32/BF16).
const TensorInfo& WeightLoader::scale_tensor(const TensorInfo& t,
                                             const std::vector<int64_t>& shape) const {
  const std::string own = checkpoint_.own_name(t);
  const std::string v3_name = own + "_scale_inv", v4_name = module_name(own) + ".scale";
  if (!checkpoint_.contains(v3_name) && !checkpoint_.contains(v4_name)) {
    fail("{}: missing tensor '{}' (or '{}'): the scales of {} tensor '{}'", t.file, v3_name,
         v4_name, storage_type_name(t.type), t.name);
  }
  const TensorInfo& scale = checkpoint_.get(checkpoint_.contains(v3_name) ? v3_name : v4_name);
  if (scale.shape != shape || (scale.type != StorageType::F32 && scale.type != StorageType::BF16 &&
                               scale.type != StorageType::F8_E8M0)) {
    fail("{}: block scale '{}' must be F32/BF16/F8_E8M0 [{}] for '{}', got {} [{}]", scale.file,
         scale.name, fmt::join(shape, ", "), t.name, storage_type_name(scale.type),
         fmt::join(scale.shape, ", "));
  }
  return scale;
}

// A quantized tensor's E8M0 scales hold no NaN byte: checked once per tensor copied, not on each
// lookup of its scales (read_row looks them up per row).
void WeightLoader::check_stored_scales(const TensorInfo& t) const {
  if (t.type != StorageType::F8_E4M3 && t.type != StorageType::I8) return;
  const TensorInfo& scale = t.type == StorageType::I8 ? fp4_scales(t) : block_scales(t);
  if (scale.type == StorageType::F8_E8M0) check_e8m0(scale);
}

// The 128x128 block scales of an FP8 tensor, exactly as DeepSeek-V3 checkpoints define them.
const TensorInfo& WeightLoader::block_scales(const TensorInfo& t) const {
  const int64_t rows = t.shape[0], width = t.shape.size() == 2 ? t.shape[1] : 1;
  return scale_tensor(t, {(rows + kBlock - 1) / kBlock, (width + kBlock - 1) / kBlock});
}

// An FP4 tensor's scales: one per 32 values of a row (DeepSeek-V4's MXFP4 experts).
const TensorInfo& WeightLoader::fp4_scales(const TensorInfo& t) const {
  return scale_tensor(t, {t.shape[0], t.shape[1] * 2 / kFp4Group});
}

namespace {

// Values in a row of a 2-D weight tensor: a packed int4 one (I32) holds 8 per element, an FP4
// one (I8) 2.
int64_t values_per_row(const TensorInfo& t) {
  if (t.type == StorageType::I32) return t.shape[1] * 8;
  return t.type == StorageType::I8 ? t.shape[1] * 2 : t.shape[1];
}

float scale_at(const TensorInfo& scale, int64_t block_row, int64_t block_col) {
  const size_t i = static_cast<size_t>(block_row * scale.shape[1] + block_col);
  if (scale.type == StorageType::F8_E8M0) return e8m0_to_f32(scale.data[i]);
  if (scale.type == StorageType::BF16)
    return bf16_to_f32(reinterpret_cast<const bf16*>(scale.data)[i]);
  float v;
  std::memcpy(&v, scale.data + i * 4, 4);
  return v;
}

// Symmetric int8 in sign-magnitude (kernels::WeightType::INT8): bit 7 the sign, bits 0-6 |q|.
uint8_t int8_code(float v, float scale) {
  const float q = std::min(127.0f, std::nearbyint(std::fabs(v) / scale));
  return static_cast<uint8_t>((std::signbit(v) && q > 0.0f ? 0x80 : 0) | static_cast<int>(q));
}

}  // namespace

// One row segment as float32; FP8 values times their block scale.
void WeightLoader::read_row(const TensorInfo& t, int64_t row, int64_t col_begin, int64_t cols,
                            float* out) const {
  const int64_t width = t.shape.size() == 2 ? t.shape[1] : t.shape[0];
  const size_t first = static_cast<size_t>(row * width + col_begin);
  switch (t.type) {
    case StorageType::F32:
      std::memcpy(out, t.data + first * 4, static_cast<size_t>(cols) * 4);
      return;
    case StorageType::BF16: {
      const auto* src = reinterpret_cast<const bf16*>(t.data) + first;
      for (int64_t c = 0; c < cols; ++c) out[c] = bf16_to_f32(src[c]);
      return;
    }
    case StorageType::F8_E4M3: {
      const TensorInfo& scale = block_scales(t);
      for (int64_t c = 0; c < cols; ++c) {
        const float block_scale = scale_at(scale, row / kBlock, (col_begin + c) / kBlock);
        out[c] = fp8_e4m3_to_f32(t.data[first + static_cast<size_t>(c)]) * block_scale;
      }
      return;
    }
    case StorageType::I32: {  // packed int4 (checked_packed): code q + 8, 8 per int32
      const TensorInfo& scale = packed_scales(t);
      const uint8_t* codes = t.data + static_cast<size_t>(row * t.shape[1] * 4);
      for (int64_t c = col_begin; c < col_begin + cols; ++c) {
        const float value =
            kernels::code_value(kernels::WeightType::INT4, kernels::nibble(codes, c));
        out[c - col_begin] = value * scale_at(scale, row, c / int4_group_);
      }
      return;
    }
    case StorageType::I8: {  // FP4 e2m1 codes, two per byte, a scale per 32 values
      const TensorInfo& scale = fp4_scales(t);
      const uint8_t* codes = t.data + static_cast<size_t>(row * t.shape[1]);
      for (int64_t c = col_begin; c < col_begin + cols; ++c) {
        const float value =
            kernels::code_value(kernels::WeightType::MXFP4, kernels::nibble(codes, c));
        out[c - col_begin] = value * scale_at(scale, row, c / kFp4Group);
      }
      return;
    }
    case StorageType::F8_E8M0:
    case StorageType::I64:
      break;
  }
  fail("{}: tensor '{}' of dtype {} holds no weight values", t.file, t.name,
       storage_type_name(t.type));
}

std::string module_name(const std::string& tensor) {
  constexpr std::string_view kSuffix = ".weight";
  return tensor.ends_with(kSuffix) ? tensor.substr(0, tensor.size() - kSuffix.size()) : tensor;
}

WeightFormat resolve_weight_format(WeightFormat format, const ModelConfig& cfg) {
  if (cfg.int4_group_size > 0 && format.quantization == Quantization::Auto) {
    format.quantization = Quantization::Int4;
    format.group_size = cfg.int4_group_size;
  }
  return resolve_weight_format(format, cfg.fp8_block_quantized);
}

WeightFormat resolve_weight_format(WeightFormat format, bool fp8_checkpoint) {
  if (format.quantization == Quantization::Auto)
    format.quantization = fp8_checkpoint ? Quantization::Fp8 : Quantization::None;
  if (format.quantize_lm_head && format.quantization == Quantization::None) {
    fail(
        "--quantize-lm-head quantizes lm_head like the model's layers, but they are not "
        "quantized: add --quantization fp8, int8, int4 or mxfp4 (an FP8 checkpoint is fp8 by "
        "default)");
  }
  if (format.quantization == Quantization::Mxfp4 && format.group_size != 32)
    fail(
        "--quantization mxfp4 has a scale per 32 values; --quantization-group-size {} applies "
        "to int4 only",
        format.group_size);
  // The 4-bit kernels take groups of 32, 64 or a multiple of 128 columns.
  const int64_t g = format.group_size;
  if (g <= 0 || g % 32 != 0 || (g > 64 && g % 128 != 0))
    fail("--quantization-group-size must be 32, 64 or 128, got {}", g);
  return format;
}

kernels::WeightType held_type(const WeightFormat& format, WeightKind kind,
                              bool quantized_checkpoint, bool stored_quantized) {
  const bool quantized = kind == WeightKind::LmHead
                             ? format.quantize_lm_head
                             : quantizable(kind) && (!quantized_checkpoint || stored_quantized);
  if (!quantized) return format.dtype;
  switch (format.quantization) {
    case Quantization::Fp8:
      return kernels::WeightType::FP8;
    case Quantization::Int8:
      return kernels::WeightType::INT8;
    case Quantization::Int4:
      return kernels::WeightType::INT4;
    case Quantization::Mxfp4:
      return kernels::WeightType::MXFP4;
    case Quantization::Auto:
    case Quantization::None:
      break;
  }
  return format.dtype;
}

kernels::WeightType stored_weight_type(const WeightFormat& format, WeightKind kind,
                                       bool quantized_checkpoint, StorageType stored) {
  const bool stored_fp4 = stored == StorageType::I8;
  const bool stored_quantized =
      stored_fp4 || stored == StorageType::I32 || stored == StorageType::F8_E4M3;
  const kernels::WeightType type = held_type(format, kind, quantized_checkpoint, stored_quantized);
  // Already 4-bit: any quantization keeps it (INT4's float scales would grow it by 0.75 bits a
  // weight, INT8 double it, and re-quantizing only loses accuracy).
  const bool quantized = type != kernels::WeightType::F32 && type != kernels::WeightType::BF16;
  return stored_fp4 && quantized ? kernels::WeightType::MXFP4 : type;
}

bool quantizable(WeightKind kind) {
  return kind != WeightKind::LmHead;
}

kernels::Weight WeightLoader::new_weight(const std::string& name, int64_t rows, int64_t cols,
                                         WeightKind kind) const {
  const StorageType stored = packed_int4(name) ? StorageType::I32 : checkpoint_.get(name).type;
  return kernels::Weight(stored_weight_type(format_, kind, quantized_checkpoint_, stored), rows,
                         cols, format_.dtype);
}

void WeightLoader::copy_block(const std::string& name, int64_t rows, int64_t cols, const Block& b,
                              kernels::Weight& dst, int64_t dst_row) const {
  const bool packed = packed_int4(name);
  const TensorInfo& t =
      packed ? checked_packed(name, rows, cols) : checked_matrix(name, rows, cols);
  if (b.row_begin < 0 || b.row_begin + b.rows > rows || b.col_begin < 0 ||
      b.col_begin + b.cols > cols || b.cols != dst.cols() || dst_row + b.rows > dst.rows()) {
    fail("internal: block [{}+{}, {}+{}] of '{}' does not fit", b.row_begin, b.rows, b.col_begin,
         b.cols, name);
  }
  if (b.rows == 0) return;
  check_stored_scales(t);
  switch (dst.type()) {
    case kernels::WeightType::F32:
    case kernels::WeightType::BF16:
      copy_dense(t, b, dst, dst_row);
      break;
    case kernels::WeightType::FP8:
      copy_fp8(t, b, dst, dst_row);
      break;
    case kernels::WeightType::INT8:
      copy_int8(t, b, dst, dst_row);
      break;
    case kernels::WeightType::INT4:
    case kernels::WeightType::MXFP4:
      if (packed && dst.type() == kernels::WeightType::INT4 && format_.group_size == int4_group_) {
        copy_stored_4bit(t, packed_scales(t), int4_group_, b, dst, dst_row);
      } else if (t.type == StorageType::I8 && dst.type() == kernels::WeightType::MXFP4) {
        copy_stored_4bit(t, fp4_scales(t), kFp4Group, b, dst, dst_row);
      } else {
        copy_4bit(t, b, dst, dst_row);
      }
      break;
  }
  release_pages(t);
}

// body(first, last) over the block's rows [0, b.rows), on the kernels' threads for blocks of
// 256K values or more: a load is bound by first-touch page faults and, when it rounds or
// quantizes, by the conversion, and both spread over the cores.
template <typename Body>
void WeightLoader::on_row_ranges(const Block& b, Body body) {
  kernels::for_ranges(b.rows, b.rows * b.cols >= (1 << 18), body);
}

void WeightLoader::copy_dense(const TensorInfo& t, const Block& b, kernels::Weight& dst,
                              int64_t dst_row) const {
  const int64_t cols = t.shape[1];
  on_row_ranges(b, [&](int64_t first, int64_t last) {
    std::vector<float> row(static_cast<size_t>(b.cols));
    for (int64_t r = first; r < last; ++r) {
      const int64_t out_row = dst_row + r;
      if (dst.type() == kernels::WeightType::BF16 && t.type == StorageType::BF16) {  // no rounding
        std::memcpy(dst.b16() + out_row * dst.cols(),
                    t.data + static_cast<size_t>(((b.row_begin + r) * cols + b.col_begin) * 2),
                    static_cast<size_t>(b.cols) * 2);
        continue;
      }
      read_row(t, b.row_begin + r, b.col_begin, b.cols, row.data());
      if (dst.type() == kernels::WeightType::F32) {
        std::memcpy(dst.f32() + out_row * dst.cols(), row.data(), row.size() * 4);
      } else {
        for (int64_t c = 0; c < b.cols; ++c)
          dst.b16()[out_row * dst.cols() + c] = f32_to_bf16(row[static_cast<size_t>(c)]);
      }
    }
  });
}

// FP8 codes and 128x128 block scales, in the checkpoint's blocks (global coordinates, so every
// layout holds the same values): an FP8 tensor's own, or for a dense tensor quantized here
// with scale = the block's largest magnitude / 448 (DeepSeek-V3's recipe).
void WeightLoader::copy_fp8(const TensorInfo& t, const Block& b, kernels::Weight& dst,
                            int64_t dst_row) const {
  kernels::BlockScales& s = dst.scales();
  if (s.col_block == 0) {
    s.col_block = kBlock;
    s.col_phase = b.col_begin % kBlock;
    s.col_blocks = (b.cols + s.col_phase + kBlock - 1) / kBlock;
  } else if (s.col_phase != b.col_begin % kBlock) {
    fail("internal: '{}' stacks blocks that start at different columns", t.name);
  }
  const bool stored_fp8 = t.type == StorageType::F8_E4M3;
  const TensorInfo* stored_scales = stored_fp8 ? &block_scales(t) : nullptr;
  const int64_t first_block_row = b.row_begin / kBlock, first_block_col = b.col_begin / kBlock;
  const int64_t last_block_row = (b.row_begin + b.rows - 1) / kBlock;
  const auto base = static_cast<int32_t>(s.scales.size() / static_cast<size_t>(s.col_blocks));
  for (int64_t br = first_block_row; br <= last_block_row; ++br) {
    for (int64_t j = 0; j < s.col_blocks; ++j) {
      const int64_t bc = first_block_col + j;
      s.scales.push_back(stored_fp8 ? scale_at(*stored_scales, br, bc)
                                    : symmetric_scale(block_max(t, br, bc), kFp8E4m3Max));
    }
  }
  on_row_ranges(b, [&](int64_t first, int64_t last) {
    std::vector<float> row(static_cast<size_t>(b.cols));
    for (int64_t r = first; r < last; ++r) {
      const int64_t global_row = b.row_begin + r, out_row = dst_row + r;
      s.row_block[static_cast<size_t>(out_row)] =
          base + static_cast<int32_t>(global_row / kBlock - first_block_row);
      uint8_t* codes = dst.codes() + out_row * dst.cols();
      if (stored_fp8) {
        std::memcpy(codes, t.data + static_cast<size_t>(global_row * t.shape[1] + b.col_begin),
                    static_cast<size_t>(b.cols));
        continue;
      }
      read_row(t, global_row, b.col_begin, b.cols, row.data());
      const float* scales = s.row_scales(out_row);
      for (int64_t c = 0; c < b.cols; ++c) {
        const float scale = scales[(c + s.col_phase) / kBlock];
        codes[c] = f32_to_fp8_e4m3(row[static_cast<size_t>(c)] / scale);
      }
    }
  });
}

// Largest magnitude of block (br, bc) of t.
float WeightLoader::block_max(const TensorInfo& t, int64_t br, int64_t bc) const {
  const int64_t rows = t.shape[0], cols = values_per_row(t);
  const int64_t col_begin = bc * kBlock, width = std::min(kBlock, cols - col_begin);
  std::vector<float> row(static_cast<size_t>(width));
  float largest = 0.0f;
  for (int64_t r = br * kBlock; r < std::min(rows, (br + 1) * kBlock); ++r) {
    read_row(t, r, col_begin, width, row.data());
    for (float v : row) largest = std::max(largest, std::fabs(v));
  }
  return largest;
}

// Symmetric int8 with one scale per output row: the row's largest magnitude over all its
// columns (not only this rank's, so every layout holds the same values) / 127.
void WeightLoader::copy_int8(const TensorInfo& t, const Block& b, kernels::Weight& dst,
                             int64_t dst_row) const {
  kernels::BlockScales& s = dst.scales();
  s.col_block = dst.cols();
  s.col_phase = 0;
  s.col_blocks = 1;
  const int64_t cols = values_per_row(t);
  // Each row's scale takes the next slot; the rows then fill in parallel.
  const size_t first_scale = s.scales.size();
  s.scales.resize(first_scale + static_cast<size_t>(b.rows));
  on_row_ranges(b, [&](int64_t first, int64_t last) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = first; r < last; ++r) {
      const int64_t out_row = dst_row + r;
      read_row(t, b.row_begin + r, 0, cols, row.data());
      float largest = 0.0f;
      for (float v : row) largest = std::max(largest, std::fabs(v));
      const float scale = symmetric_scale(largest, 127.0f);
      const size_t slot = first_scale + static_cast<size_t>(r);
      s.row_block[static_cast<size_t>(out_row)] = static_cast<int32_t>(slot);
      s.scales[slot] = scale;
      uint8_t* codes = dst.codes() + out_row * dst.cols();
      for (int64_t c = 0; c < b.cols; ++c)
        codes[c] = int8_code(row[static_cast<size_t>(b.col_begin + c)], scale);
    }
  });
}

namespace {

// A 4-bit weight's scales for block b: groups of `group` columns counted from the tensor's
// column 0 (so every layout holds the same codes), room for b.rows rows of them appended.
// Returns the first new slot. A block that starts inside a group cannot be held so.
size_t add_group_scales(const TensorInfo& t, const Block& b, int64_t group, kernels::Weight& dst) {
  if (b.col_begin % group != 0) {
    fail(
        "{}: '{}' is split at column {}, inside a {}-column quantization group: choose a layout "
        "that splits it at a multiple of {} (or, quantizing at load, a "
        "--quantization-group-size that divides the split)",
        t.file, t.name, b.col_begin, group, group);
  }
  kernels::BlockScales& s = dst.scales();
  s.col_block = group;
  s.col_phase = 0;
  s.col_blocks = (b.cols + group - 1) / group;
  const size_t first_scale = s.blocks();
  s.resize(first_scale + static_cast<size_t>(b.rows * s.col_blocks));
  return first_scale;
}

}  // namespace

bool WeightLoader::packed_int4(const std::string& name) const {
  return int4_group_ > 0 && !checkpoint_.contains(name) &&
         checkpoint_.contains(module_name(name) + ".weight_packed");
}

// <module>.weight_packed: int32 [rows, cols / 8], each holding 8 codes (q + 8 for q in [-8, 7])
// from its lowest 4 bits up, i.e. as little-endian bytes, two codes per byte with the even
// column in the low nibble: our INT4 layout exactly. Its shape, its weight_shape and its
// scales must agree with the config.
const TensorInfo& WeightLoader::checked_packed(const std::string& name, int64_t rows,
                                               int64_t cols) const {
  const std::string module = module_name(name);
  const TensorInfo& packed = checkpoint_.get(module + ".weight_packed");
  if (cols % 8 != 0) {
    fail("{}: '{}' has {} columns, which pack-quantized int4 cannot hold whole (8 per int32)",
         packed.file, packed.name, cols);
  }
  const std::vector<int64_t> packed_shape = {rows, cols / 8};
  if (packed.type != StorageType::I32 || packed.shape != packed_shape) {
    fail("{}: '{}' must be I32 [{}] for the config's [{}, {}], got {} [{}]", packed.file,
         packed.name, fmt::join(packed_shape, ", "), rows, cols, storage_type_name(packed.type),
         fmt::join(packed.shape, ", "));
  }
  const TensorInfo& shape = checkpoint_.get(module + ".weight_shape");
  const bool wide = shape.type == StorageType::I64;
  if ((shape.type != StorageType::I32 && !wide) || shape.shape != std::vector<int64_t>{2})
    fail("{}: '{}' must be I32/I64 [2]", shape.file, shape.name);
  int64_t stored[2];
  for (size_t i = 0; i < 2; ++i) {
    int32_t narrow = 0;
    if (wide) std::memcpy(&stored[i], shape.data + 8 * i, 8);
    if (!wide) std::memcpy(&narrow, shape.data + 4 * i, 4);
    if (!wide) stored[i] = narrow;
  }
  if (stored[0] != rows || stored[1] != cols) {
    fail("{}: '{}' is [{}, {}], the config implies [{}, {}]", shape.file, shape.name, stored[0],
         stored[1], rows, cols);
  }
  packed_scales(packed);
  return packed;
}

// <module>.weight_scale: BF16/F32 [rows, ceil(cols / group)], one per group of a row.
const TensorInfo& WeightLoader::packed_scales(const TensorInfo& packed) const {
  std::string module = checkpoint_.own_name(packed);
  module.resize(module.size() - std::string("_packed").size());
  const TensorInfo& scale = checkpoint_.get(module + "_scale");
  const int64_t cols = packed.shape[1] * 8;
  const std::vector<int64_t> shape = {packed.shape[0], (cols + int4_group_ - 1) / int4_group_};
  if (scale.shape != shape || (scale.type != StorageType::BF16 && scale.type != StorageType::F32)) {
    fail("{}: '{}' must be BF16/F32 [{}] (group size {}), got {} [{}]", scale.file, scale.name,
         fmt::join(shape, ", "), int4_group_, storage_type_name(scale.type),
         fmt::join(scale.shape, ", "));
  }
  return scale;
}

// A 4-bit block kept as stored (compressed-tensors' packed int4, or an FP4 tensor into MXFP4):
// its codes copied, its scales as the weight holds them (float32, or MXFP4's E8M0 bytes). The block
// must start at a group boundary (as copy_4bit requires of every 4-bit weight).
void WeightLoader::copy_stored_4bit(const TensorInfo& t, const TensorInfo& scale, int64_t group,
                                    const Block& b, kernels::Weight& dst, int64_t dst_row) const {
  const size_t first_scale = add_group_scales(t, b, group, dst);
  kernels::BlockScales& s = dst.scales();
  const int64_t stored_row_bytes = values_per_row(t) / 2;
  // E8M0 bytes into an MXFP4 weight are its scales as they are (NaN refused at check_e8m0).
  const bool same_bytes = s.by_exponent && scale.type == StorageType::F8_E8M0;
  on_row_ranges(b, [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      const int64_t out_row = dst_row + r, row = b.row_begin + r;
      const size_t slot = first_scale + static_cast<size_t>(r * s.col_blocks);
      s.row_block[static_cast<size_t>(out_row)] = static_cast<int32_t>(slot / s.col_blocks);
      if (same_bytes) {
        std::memcpy(s.exponents.data() + slot,
                    scale.data + row * scale.shape[1] + b.col_begin / group,
                    static_cast<size_t>(s.col_blocks));
      } else {
        for (int64_t j = 0; j < s.col_blocks; ++j) {
          const float v = scale_at(scale, row, b.col_begin / group + j);
          int exponent = 0;
          if (s.by_exponent && v != 0.0f && std::frexp(v, &exponent) != 0.5f) {
            fail("{}: '{}' holds {} for a group of FP4 tensor '{}': MXFP4 scales are powers of two",
                 scale.file, scale.name, v, t.name);
          }
          s.set(slot + static_cast<size_t>(j), v);
        }
      }
      std::memcpy(dst.codes() + out_row * dst.code_row_bytes(),
                  t.data + static_cast<size_t>(row * stored_row_bytes + b.col_begin / 2),
                  static_cast<size_t>(b.cols / 2));
    }
  });
}

// A group's scale and codes, round to nearest. INT4 as llama.cpp's Q4_0: the value of largest
// magnitude maps to -8 exactly (scale = it / -8, so the scale may be negative), the others to
// [-8, 7]: all 16 levels used. MXFP4 as the OCP MX spec: scale 2^(floor(log2 amax) - 2) (2 =
// e2m1's largest exponent), values clamped to ±6.
float four_bit_group_scale(kernels::WeightType type, const float* v, int64_t n) {
  float extreme = 0.0f;
  for (int64_t c = 0; c < n; ++c)
    if (std::fabs(v[c]) > std::fabs(extreme)) extreme = v[c];
  if (extreme == 0.0f) return 0.0f;
  if (type == kernels::WeightType::INT4) return extreme / -8.0f;
  return std::exp2(std::floor(std::log2(std::fabs(extreme))) - 2.0f);
}

uint8_t four_bit_code(kernels::WeightType type, float v, float scale) {
  if (scale == 0.0f) return type == kernels::WeightType::INT4 ? 8 : 0;
  const float x = v / scale;
  if (type == kernels::WeightType::INT4)
    return static_cast<uint8_t>(std::clamp(std::nearbyint(x), -8.0f, 7.0f) + 8.0f);
  // The e2m1 magnitude (0, 0.5, 1, 1.5, 2, 3, 4, 6) nearest |x|, found by the midpoints between
  // neighbours; a value on a midpoint goes to the even code.
  constexpr float kMidpoints[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  const float magnitude = std::fabs(x);
  uint8_t code = 0;
  while (code < 7 &&
         (magnitude > kMidpoints[code] || (magnitude == kMidpoints[code] && (code + 1) % 2 == 0))) {
    ++code;
  }
  return static_cast<uint8_t>((std::signbit(x) && code != 0 ? 0x8 : 0) | code);
}

// Groups of group_size columns of each row, counted from the tensor's column 0 (so every
// layout holds the same values; a shard must therefore start at a group boundary), one scale
// per group, codes packed two per byte.
void WeightLoader::copy_4bit(const TensorInfo& t, const Block& b, kernels::Weight& dst,
                             int64_t dst_row) const {
  const int64_t group = dst.type() == kernels::WeightType::MXFP4 ? 32 : format_.group_size;
  const size_t first_scale = add_group_scales(t, b, group, dst);
  kernels::BlockScales& s = dst.scales();
  on_row_ranges(b, [&](int64_t first, int64_t last) {
    std::vector<float> row(static_cast<size_t>(b.cols));
    for (int64_t r = first; r < last; ++r) {
      const int64_t out_row = dst_row + r;
      read_row(t, b.row_begin + r, b.col_begin, b.cols, row.data());
      const size_t slot = first_scale + static_cast<size_t>(r * s.col_blocks);
      s.row_block[static_cast<size_t>(out_row)] = static_cast<int32_t>(slot / s.col_blocks);
      uint8_t* codes = dst.codes() + out_row * dst.code_row_bytes();
      std::fill(codes, codes + dst.code_row_bytes(), uint8_t{0});
      for (int64_t j = 0; j < s.col_blocks; ++j) {
        const int64_t begin = j * group, n = std::min(group, b.cols - begin);
        const float scale = four_bit_group_scale(dst.type(), row.data() + begin, n);
        s.set(slot + static_cast<size_t>(j), scale);
        for (int64_t c = begin; c < begin + n; ++c) {
          const uint8_t code = four_bit_code(dst.type(), row[static_cast<size_t>(c)], scale);
          codes[c / 2] = static_cast<uint8_t>(codes[c / 2] | code << (4 * (c % 2)));
        }
      }
    }
  });
}

kernels::Weight WeightLoader::matrix_f32(const std::string& name, int64_t rows,
                                         int64_t cols) const {
  kernels::Weight w(kernels::WeightType::F32, rows, cols);
  copy_block(name, rows, cols, {0, rows, 0, cols}, w, 0);
  return w;
}

std::vector<float> WeightLoader::vector(const std::string& name, int64_t len) const {
  const TensorInfo& t = checked(name, {len});
  std::vector<float> v(static_cast<size_t>(len));
  read_row(t, 0, 0, len, v.data());
  release_pages(t);
  return v;
}

}  // namespace mlaserve::model
