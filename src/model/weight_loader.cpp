#include "model/weight_loader.h"

#include <fmt/ranges.h>

#include <cstring>

#include "core/error.h"
#include "core/numeric.h"

namespace mlaserve::model {

const TensorInfo& WeightLoader::checked(const std::string& name, std::vector<int64_t> shape) const {
  const TensorInfo& t = checkpoint_.get(name);
  if (t.shape != shape) {
    fail("{}: tensor '{}' has shape [{}], the config implies [{}]", t.file, name,
         fmt::join(t.shape, ", "), fmt::join(shape, ", "));
  }
  return t;
}

// One row segment as float32. FP8 values are multiplied by their 128x128 block scale
// (`<name>_scale_inv`, despite the name a multiplier), exactly as DeepSeek-V3 checkpoints define.
void WeightLoader::read_row(const TensorInfo& t, int64_t row, int64_t col_begin, int64_t cols,
                            float* out) const {
  const int64_t width = t.shape.size() == 2 ? t.shape[1] : t.shape[0];
  const size_t first = static_cast<size_t>(row * width + col_begin);
  bytes_read_ += static_cast<size_t>(cols) * storage_type_size(t.type);
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
      const int64_t rows = t.shape[0];
      const std::vector<int64_t> scale_shape = {(rows + 127) / 128, (width + 127) / 128};
      const TensorInfo& scale = checkpoint_.get(t.name + "_scale_inv");
      if (scale.shape != scale_shape ||
          (scale.type != StorageType::F32 && scale.type != StorageType::BF16)) {
        fail("{}: block scale '{}' must be F32/BF16 [{}], got {} [{}]", scale.file, scale.name,
             fmt::join(scale_shape, ", "), storage_type_name(scale.type),
             fmt::join(scale.shape, ", "));
      }
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t col = col_begin + c;
        const size_t s = static_cast<size_t>((row / 128) * scale_shape[1] + col / 128);
        float block_scale;
        if (scale.type == StorageType::F32) {
          std::memcpy(&block_scale, scale.data + s * 4, 4);
        } else {
          block_scale = bf16_to_f32(reinterpret_cast<const bf16*>(scale.data)[s]);
        }
        out[c] = fp8_e4m3_to_f32(t.data[first + static_cast<size_t>(c)]) * block_scale;
      }
      return;
    }
  }
}

void WeightLoader::copy_block(const std::string& name, int64_t rows, int64_t cols, const Block& b,
                              kernels::Weight& dst, int64_t dst_row) const {
  const TensorInfo& t = checked(name, {rows, cols});
  if (b.row_begin < 0 || b.row_begin + b.rows > rows || b.col_begin < 0 ||
      b.col_begin + b.cols > cols || b.cols != dst.cols() || dst_row + b.rows > dst.rows()) {
    fail("internal: block [{}+{}, {}+{}] of '{}' does not fit", b.row_begin, b.rows, b.col_begin,
         b.cols, name);
  }
  std::vector<float> row(static_cast<size_t>(b.cols));
  for (int64_t r = 0; r < b.rows; ++r) {
    const int64_t out_row = dst_row + r;
    if (dst.type() == kernels::WeightType::BF16 && t.type == StorageType::BF16) {  // no rounding
      bytes_read_ += static_cast<size_t>(b.cols) * 2;
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
}

kernels::Weight WeightLoader::matrix(const std::string& name, int64_t rows, int64_t cols) const {
  kernels::Weight w(type_, rows, cols);
  copy_block(name, rows, cols, {0, rows, 0, cols}, w, 0);
  return w;
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
  return v;
}

}  // namespace mlaserve::model
