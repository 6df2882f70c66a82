// oneDNN matmul for the prefill path (many rows of x), where the GEMM is compute-bound and
// oneDNN's brgemm kernels on pre-packed weights reach 85-95 % of the FMA peak.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/ops.h"

namespace mlaserve::kernels {

// Whether dnnl_matmul() handles this weight on this CPU. F32 always; BF16 (bf16×bf16→f32,
// since oneDNN 2.6 has no f32×bf16) only where the CPU has AVX512_BF16; FP8/INT8 as the type
// of their activations (their panels are dequantized to it: oneDNN 2.7 has no FP8 or
// weight-only int8 matmul).
bool dnnl_supports(const Weight& w);

// A copy of w reordered into the layout oneDNN's matmul prefers; goes into Weight::packed.
std::shared_ptr<void> dnnl_pack(const Weight& w);

// Bytes of w.packed (0 when not packed).
size_t dnnl_packed_bytes(const Weight& w);

// y[m, w.rows()] = x[m, w.cols()] · Wᵀ. Uses w.packed when set, else the row-major weight.
// With BF16 weights (or FP8/INT8 weights with bf16 activations) x is rounded to bf16 first.
void dnnl_matmul(const float* x, int64_t m, const Weight& w, float* y);

}  // namespace mlaserve::kernels
