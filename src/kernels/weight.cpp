#include "core/error.h"
#include "kernels/ops.h"

namespace mlaserve::kernels {

Weight::Weight(WeightType type, int64_t rows, int64_t cols)
    : type_(type), rows_(rows), cols_(cols) {
  if (rows < 0 || cols < 0) fail("weight shape [{}, {}] is negative", rows, cols);
  const auto count = static_cast<size_t>(rows * cols);
  if (type == WeightType::F32) {
    f32_.resize(count);
  } else {
    b16_.resize(count);
  }
}

size_t Weight::bytes() const {
  return f32_.size() * sizeof(float) + b16_.size() * sizeof(bf16);
}

float Weight::at(int64_t r, int64_t c) const {
  const size_t i = static_cast<size_t>(r * cols_ + c);
  return type_ == WeightType::F32 ? f32_[i] : bf16_to_f32(b16_[i]);
}

}  // namespace mlaserve::kernels
