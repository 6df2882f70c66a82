// Reads checkpoint tensors into kernel weights: checks shapes against the config, dequantizes
// FP8 block-scaled weights, converts to the compute dtype, and copies only this rank's block.
#pragma once

#include <string>
#include <vector>

#include "kernels/ops.h"
#include "model/safetensors.h"

namespace mlaserve::model {

// A rectangular block of a [rows, cols] tensor.
struct Block {
  int64_t row_begin, rows, col_begin, cols;
};

class WeightLoader {
 public:
  WeightLoader(const Checkpoint& checkpoint, kernels::WeightType type)
      : checkpoint_(checkpoint), type_(type) {}

  kernels::WeightType type() const { return type_; }

  // Checks that tensor `name` is [rows, cols], then copies `block` of it into dst starting at
  // row dst_row (dst has block.cols columns).
  void copy_block(const std::string& name, int64_t rows, int64_t cols, const Block& block,
                  kernels::Weight& dst, int64_t dst_row) const;

  // A whole [rows, cols] tensor as a new weight of the given type (or the loader's type).
  kernels::Weight matrix(const std::string& name, int64_t rows, int64_t cols) const;
  kernels::Weight matrix_f32(const std::string& name, int64_t rows, int64_t cols) const;

  // A 1-D tensor of `len` values as float32 (norm weights, router bias).
  std::vector<float> vector(const std::string& name, int64_t len) const;

  // Bytes of checkpoint data this loader has read (resident-weight accounting).
  size_t bytes_read() const { return bytes_read_; }

 private:
  const TensorInfo& checked(const std::string& name, std::vector<int64_t> shape) const;
  void read_row(const TensorInfo& t, int64_t row, int64_t col_begin, int64_t cols,
                float* out) const;

  const Checkpoint& checkpoint_;
  kernels::WeightType type_;
  mutable size_t bytes_read_ = 0;
};

}  // namespace mlaserve::model
