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
constexpr int64_t kBlock = 128;  // FP8 block edge, DeepSeek-V3's weight_block_size
}  // namespace

const TensorInfo& WeightLoader::checked(const std::string& name, std::vector<int64_t> shape) const {
  const TensorInfo& t = checkpoint_.get(name);
  if (t.shape != shape) {
    fail("{}: tensor '{}' has shape [{}], the config implies [{}]", t.file, name,
         fmt::join(t.shape, ", "), fmt::join(shape, ", "));
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
  }
  return "?";
}

// The 128x128 block scales of an FP8 tensor (`<name>_scale_inv`, despite the name a
// multiplier), exactly as DeepSeek-V3 checkpoints define them.
const TensorInfo& WeightLoader::block_scales(const TensorInfo& t) const {
  const int64_t rows = t.shape[0], width = t.shape.size() == 2 ? t.shape[1] : 1;
  const std::vector<int64_t> scale_shape = {(rows + kBlock - 1) / kBlock,
                                            (width + kBlock - 1) / kBlock};
  const TensorInfo& scale = checkpoint_.get(t.name + "_scale_inv");
  if (scale.shape != scale_shape ||
      (scale.type != StorageType::F32 && scale.type != StorageType::BF16)) {
    fail("{}: block scale '{}' must be F32/BF16 [{}], got {} [{}]", scale.file, scale.name,
         fmt::join(scale_shape, ", "), storage_type_name(scale.type), fmt::join(scale.shape, ", "));
  }
  return scale;
}

namespace {

float scale_at(const TensorInfo& scale, int64_t block_row, int64_t block_col) {
  const size_t i = static_cast<size_t>(block_row * scale.shape[1] + block_col);
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
  }
}

WeightFormat resolve_weight_format(WeightFormat format, bool fp8_checkpoint) {
  if (format.quantization == Quantization::Auto)
    format.quantization = fp8_checkpoint ? Quantization::Fp8 : Quantization::None;
  if (format.quantize_lm_head && format.quantization == Quantization::None) {
    fail(
        "--quantize-lm-head quantizes lm_head like the model's layers, but they are not "
        "quantized: add --quantization fp8 or int8 (an FP8 checkpoint is fp8 by default)");
  }
  return format;
}

kernels::WeightType held_type(const WeightFormat& format, WeightKind kind, bool fp8_checkpoint,
                              bool stored_fp8) {
  const bool quantized = kind == WeightKind::LmHead
                             ? format.quantize_lm_head
                             : quantizable(kind) && (!fp8_checkpoint || stored_fp8);
  if (!quantized) return format.dtype;
  switch (format.quantization) {
    case Quantization::Fp8:
      return kernels::WeightType::FP8;
    case Quantization::Int8:
      return kernels::WeightType::INT8;
    case Quantization::Auto:
    case Quantization::None:
      break;
  }
  return format.dtype;
}

bool quantizable(WeightKind kind) {
  return kind != WeightKind::LmHead;
}

kernels::Weight WeightLoader::new_weight(const std::string& name, int64_t rows, int64_t cols,
                                         WeightKind kind) const {
  const bool stored_fp8 = checkpoint_.get(name).type == StorageType::F8_E4M3;
  const kernels::WeightType type = held_type(format_, kind, fp8_checkpoint_, stored_fp8);
  return kernels::Weight(type, rows, cols, format_.dtype);
}

void WeightLoader::copy_block(const std::string& name, int64_t rows, int64_t cols, const Block& b,
                              kernels::Weight& dst, int64_t dst_row) const {
  const TensorInfo& t = checked(name, {rows, cols});
  if (b.row_begin < 0 || b.row_begin + b.rows > rows || b.col_begin < 0 ||
      b.col_begin + b.cols > cols || b.cols != dst.cols() || dst_row + b.rows > dst.rows()) {
    fail("internal: block [{}+{}, {}+{}] of '{}' does not fit", b.row_begin, b.rows, b.col_begin,
         b.cols, name);
  }
  if (b.rows == 0) return;
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
  const int64_t rows = t.shape[0], cols = t.shape[1];
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
  const int64_t cols = t.shape[1];
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
