// Hand-written AVX-512 matrix-vector kernels for the decode path (few rows of x), where the
// weight stream from DRAM is the bottleneck. y[m, n] = x[m, k] · W[n, k]ᵀ, W row-major.
#pragma once

#include <cstdint>

#include "core/numeric.h"

namespace mlaserve::kernels {

// F32 weights, fp32 FMA. Needs cpu_has_avx512().
void gemv_f32(const float* x, int64_t m, const float* w, int64_t n, int64_t k, float* y);

// BF16 weights: x is rounded to bf16 once, then vdpbf16ps accumulates in fp32.
// Needs cpu_has_avx512_bf16().
void gemv_bf16(const float* x, int64_t m, const bf16* w, int64_t n, int64_t k, float* y);

// out[r, c] = bf16(x[r, c]) (round to nearest even) for c < cols, and 0 for cols <= c <
// out_stride: rows of out are out_stride >= cols values apart. Needs cpu_has_avx512_bf16().
void round_rows_to_bf16(const float* x, int64_t rows, int64_t cols, int64_t out_stride, bf16* out);

}  // namespace mlaserve::kernels
