// Hand-written AVX-512 matrix-vector kernels for the decode path (few rows of x), where the
// weight stream from DRAM is the bottleneck. y[m, n] = x[m, k] · W[n, k]ᵀ, W row-major.
#pragma once

#include <cstdint>
#include <span>

#include "core/numeric.h"
#include "kernels/ops.h"

namespace mlaserve::kernels {

// One product of a batch: W is float (F32) or bf16 (BF16, x rounded to bf16 once, then
// vdpbf16ps accumulates in fp32).
struct GemvJob {
  const float* x;
  int64_t m;
  const void* w;
  WeightType type;
  int64_t n, k;
  float* y;
};

// Runs every job in one parallel pass: the threads split the concatenated weight rows of all
// jobs by bytes, so a handful of small weights (a step's experts) streams with every core busy
// for the price of one thread start. Needs cpu_has_avx512() (and cpu_has_avx512_bf16() when
// any job is BF16).
void gemv_batch(std::span<const GemvJob> jobs);

// One-job forms of gemv_batch.
void gemv_f32(const float* x, int64_t m, const float* w, int64_t n, int64_t k, float* y);
void gemv_bf16(const float* x, int64_t m, const bf16* w, int64_t n, int64_t k, float* y);

// out[r, c] = bf16(x[r, c]) (round to nearest even) for c < cols, and 0 for cols <= c <
// out_stride: rows of out are out_stride >= cols values apart. Needs cpu_has_avx512_bf16().
void round_rows_to_bf16(const float* x, int64_t rows, int64_t cols, int64_t out_stride, bf16* out);

}  // namespace mlaserve::kernels
