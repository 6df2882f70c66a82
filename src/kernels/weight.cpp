#include <algorithm>
#include <bit>

#include "core/error.h"
#include "kernels/ops.h"
#include "kernels/parallel.h"

namespace mlaserve::kernels {
namespace {

// buffer = count zeros, written in parallel from 4 MB (see weight_buffer.h).
template <class T>
void zero_on_threads(WeightBuffer<T>& buffer, size_t count) {
  buffer.resize(count);
  T* data = buffer.data();
  for_ranges(static_cast<int64_t>(count), count * sizeof(T) >= (size_t{4} << 20),
             [&](int64_t begin, int64_t end) { std::fill(data + begin, data + end, T{}); });
}

}  // namespace

const char* weight_type_name(WeightType type) {
  switch (type) {
    case WeightType::F32:
      return "float32";
    case WeightType::BF16:
      return "bfloat16";
    case WeightType::FP8:
      return "fp8_e4m3";
    case WeightType::INT8:
      return "int8";
    case WeightType::INT4:
      return "int4";
    case WeightType::MXFP4:
      return "mxfp4";
  }
  return "?";
}

float code_value(WeightType type, uint8_t code) {
  if (type == WeightType::FP8) return fp8_e4m3_to_f32(code);
  if (type == WeightType::INT4) return static_cast<float>((code & 0xf) - 8);
  if (type == WeightType::MXFP4) {
    // e2m1: exponent 0 is subnormal (0 or 0.5), else 2^(e-1) * (1 + m/2).
    constexpr float kMagnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    return (code & 0x8) ? -kMagnitudes[code & 0x7] : kMagnitudes[code & 0x7];
  }
  const auto magnitude = static_cast<float>(code & 0x7f);
  return (code & 0x80) ? -magnitude : magnitude;
}

Weight::Weight(WeightType type, int64_t rows, int64_t cols, WeightType activations)
    : type_(type),
      activations_(type == WeightType::F32 || type == WeightType::BF16 ? type : activations),
      rows_(rows),
      cols_(cols) {
  if (rows < 0 || cols < 0) fail("weight shape [{}, {}] is negative", rows, cols);
  if (activations != WeightType::F32 && activations != WeightType::BF16)
    fail("internal: activations of a weight must be float32 or bfloat16");
  const auto count = static_cast<size_t>(rows * cols);
  switch (type) {
    case WeightType::F32:
      zero_on_threads(f32_, count);
      break;
    case WeightType::BF16:
      zero_on_threads(b16_, count);
      break;
    case WeightType::FP8:
    case WeightType::INT8:
      zero_on_threads(codes_, count);
      scales_.row_block.resize(static_cast<size_t>(rows));
      break;
    case WeightType::INT4:
    case WeightType::MXFP4:
      if (cols % 2 != 0) fail("a 4-bit weight needs an even row length, got [{}, {}]", rows, cols);
      zero_on_threads(codes_, count / 2);
      scales_.row_block.resize(static_cast<size_t>(rows));
      scales_.by_exponent = type == WeightType::MXFP4;
      break;
  }
}

size_t Weight::bytes() const {
  return f32_.size() * sizeof(float) + b16_.size() * sizeof(bf16) + codes_.size() +
         scales_.scales.size() * sizeof(float) + scales_.exponents.size() +
         scales_.row_block.size() * sizeof(int32_t);
}

void BlockScales::resize(size_t blocks) {
  if (by_exponent) {
    exponents.resize(blocks);
  } else {
    scales.resize(blocks);
  }
}

void BlockScales::set(size_t slot, float scale) {
  if (!by_exponent) {
    scales[slot] = scale;
    return;
  }
  // Zero and scales below float32's normal range (groups that are zero to float32) read as 0.
  const auto bits = std::bit_cast<uint32_t>(scale);
  if (std::isnormal(scale) && (bits & 0x807fffffu) != 0)
    fail("internal: an MXFP4 scale must be a positive power of two, got {}", scale);
  exponents[slot] = std::isnormal(scale) ? static_cast<uint8_t>(bits >> 23) : 0;
}

const float* BlockScales::row_values(int64_t row, std::vector<float>& scratch) const {
  if (!by_exponent) return row_scales(row);
  scratch.resize(static_cast<size_t>(col_blocks));
  for (int64_t j = 0; j < col_blocks; ++j) scratch[static_cast<size_t>(j)] = scale(row, j);
  return scratch.data();
}

void Weight::drop_row_major() {
  WeightBuffer<bf16>().swap(b16_);  // frees the buffer (clear() or `= {}` would keep it)
  row_major_dropped_ = true;
}

float Weight::at(int64_t r, int64_t c) const {
  if (row_major_dropped_) fail("Weight::at: the row-major values were dropped after packing");
  const size_t i = static_cast<size_t>(r * cols_ + c);
  switch (type_) {
    case WeightType::F32:
      return f32_[i];
    case WeightType::BF16:
      return bf16_to_f32(b16_[i]);
    case WeightType::FP8:
    case WeightType::INT8:
    case WeightType::INT4:
    case WeightType::MXFP4:
      break;
  }
  const int64_t block = (c + scales_.col_phase) / scales_.col_block;
  const uint8_t code =
      four_bit(type_) ? nibble(codes_.data() + r * code_row_bytes(), c) : codes_[i];
  return code_value(type_, code) * scales_.scale(r, block);
}

}  // namespace mlaserve::kernels
