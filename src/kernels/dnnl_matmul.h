// oneDNN matmul for the prefill path (many rows of x), where the GEMM is compute-bound and
// oneDNN's brgemm kernels on pre-packed weights reach 85-95 % of the FMA peak.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/ops.h"

namespace mlaserve::kernels {

// A copy of w reordered into the layout oneDNN's matmul prefers; goes into Weight::packed.
std::shared_ptr<void> dnnl_pack(const Weight& w);

// Bytes of w.packed (0 when not packed).
size_t dnnl_packed_bytes(const Weight& w);

// Bytes of the copy dnnl_pack makes of a float32 (F32) or bf16 (BF16) weight of this shape.
size_t dnnl_packed_size(WeightType type, int64_t rows, int64_t cols);

// Whether dnnl_pack gives a bf16 weight of this shape the blocked layout gemv_packed_rows reads.
bool dnnl_packs_bf16_blocked(int64_t rows, int64_t cols);

// Whether oneDNN runs bf16 GEMMs on AMX tiles here (the CPU has them and the OS lets this
// process use them).
bool dnnl_has_amx();

// w's packed copy when it is bf16 in the blocked layout gemv_packed_rows reads (gemv.h), else
// null.
const bf16* dnnl_packed_bf16(const Weight& w);

// y[m, w.rows()] = x[m, w.cols()] · Wᵀ. Uses w.packed when set and the path multiplies in the
// weight's type, else the row-major weight. On the Bf16Dot path x is rounded to bf16 first.
void dnnl_matmul(const float* x, int64_t m, const Weight& w, float* y);

}  // namespace mlaserve::kernels
