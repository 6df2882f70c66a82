// Hand-written AVX-512 matrix-vector kernels for the decode path (few rows of x), where the
// weight stream from DRAM is the bottleneck. y[m, n] = x[m, k] · W[n, k]ᵀ, W row-major.
#pragma once

#include <cstdint>
#include <span>

#include "core/numeric.h"
#include "kernels/ops.h"

namespace mlaserve::kernels {

// One product of a batch: W is float (F32), bf16 (BF16: x rounded to bf16 once, then vdpbf16ps
// accumulates in fp32) or quantized codes with their scales (x rounded to bf16 as for BF16).
struct GemvJob {
  const float* x;
  int64_t m;
  const void* w;
  WeightType type;
  int64_t n, k;
  float* y;
  const BlockScales* scales = nullptr;  // quantized types only
  // A BF16 weight's packed copy (dnnl_packed_bf16): when set, the job runs on it, by panels of
  // packed_panel_rows() weight rows (gemv_packed_rows), instead of on w.
  const bf16* packed = nullptr;
  // A quantized weight whose rows go through the packed GEMV in blocks of packed_panel_rows(),
  // each dequantized into the packed bf16 layout as its product runs (gemv_dequantized_rows):
  // more rows of x than the quantized GEMV's tiles serve.
  const Weight* dequantized = nullptr;
};

// Runs every job in one parallel pass: the threads split the concatenated weight rows of all
// jobs by bytes, so a handful of small weights (a step's experts) streams with every core busy
// for the price of one thread start. Needs cpu_has_avx512() (and cpu_has_avx512_bf16() when
// any job is BF16).
void gemv_batch(std::span<const GemvJob> jobs);

// Weight rows [first, last) of a float32 or bf16 job on a CPU with AVX2 but no AVX-512, x as
// it is. Used by gemv_batch.
void gemv_avx2_rows(const GemvJob& job, int64_t first, int64_t last);

// Weight rows [first, last) of an FP8/INT8 job, x already rounded to bf16 (rows k_padded
// apart, zero past k). Needs cpu_has_avx512_vbmi_bf16(). Used by gemv_batch.
void gemv_q8_rows(const GemvJob& job, const bf16* xb, int64_t k_padded, int64_t first,
                  int64_t last);

// The same for an INT4/MXFP4 job (4-bit codes, a scale per group of 32 columns or a multiple
// of 64, groups starting at column 0).
void gemv_q4_rows(const GemvJob& job, const bf16* xb, int64_t k_padded, int64_t first,
                  int64_t last);

// The same on a CPU with AVX2 but not the AVX-512 BF16/VBMI kernel: x (bf16 activations) as
// it is, rounded to bf16 inside. Used by gemv_batch.
void gemv_q4_avx2_rows(const GemvJob& job, int64_t first, int64_t last);
// And the FP8/INT8 form.
void gemv_q8_avx2_rows(const GemvJob& job, int64_t first, int64_t last);

// Weight rows [first, last) (whole panels but the weight's last) of a job with a packed copy,
// x already rounded to bf16 (rows k_padded apart, zero past k). Needs cpu_has_avx512_bf16().
// Used by gemv_batch.
void gemv_packed_rows(const GemvJob& job, const bf16* xb, int64_t k_padded, int64_t first,
                      int64_t last);
// Weight rows per panel of the packed layout.
int64_t packed_panel_rows();
// Weight rows [first, last) (whole panels but the weight's last) of a job on job.dequantized,
// x already rounded to bf16: each 64-row block dequantized into the packed layout in the
// calling thread's scratch, then multiplied there (implemented beside the GEMM's packing, in
// cpu_dnnl.cpp). Needs cpu_has_avx512_bf16().
void gemv_dequantized_rows(const GemvJob& job, const bf16* xb, int64_t k_padded, int64_t first,
                           int64_t last);
// One panel of that layout (up to 64 weight rows, K padded to k_padded) against m rows of x
// (bf16, k_padded apart): y[i * ldy + r] for r < rows, on AMX tiles where packed_rows_on_amx(m).
// Needs cpu_has_avx512_bf16().
void gemv_packed_panel(const bf16* panel, int64_t k_padded, const bf16* xb, int64_t m, float* y,
                       int64_t ldy, int64_t rows);
// Whether gemv_packed_panel multiplies m rows of x on AMX tiles (amx_packed_panel).
bool packed_rows_on_amx(int64_t m);
// The same product on AMX tiles: one 64-row block of the layout at a time (rows <= 64). Needs
// cpu_has_amx_bf16().
void amx_packed_panel(const bf16* block, int64_t k_padded, const bf16* xb, int64_t m, float* y,
                      int64_t ldy, int64_t rows);

// Rows [first, last) of an FP8/INT8 weight as values (code value × scale; rounded once to
// bf16 in the bf16 form), w.cols() apart in out. The bf16 form needs cpu_has_avx512_bf16().
void dequantize_rows_bf16(const Weight& w, int64_t first, int64_t last, bf16* out);
void dequantize_rows_f32(const Weight& w, int64_t first, int64_t last, float* out);
// Their 4-bit forms (INT4/MXFP4), which those two call.
void dequantize_q4_rows_bf16(const Weight& w, int64_t first, int64_t last, bf16* out);
void dequantize_q4_rows_f32(const Weight& w, int64_t first, int64_t last, float* out);
// dequantize_q4_rows_f32's fast path (the same values), on any CPU with AVX2.
void dequantize_q4_rows_f32_avx2(const Weight& w, int64_t first, int64_t last, float* out);

// The calling thread's scratch for x rounded to bf16 (gemv_batch, the oneDNN bf16 GEMM): its
// first `values` elements, grown when too small and kept across calls.
bf16* rounded_x_scratch(int64_t values);
// Scratch values gemv_batch rounds for `rows` rows of k columns (padded to 32 columns).
int64_t gemv_x_values(int64_t rows, int64_t k);

// One-job forms of gemv_batch.
void gemv_f32(const float* x, int64_t m, const float* w, int64_t n, int64_t k, float* y);
void gemv_bf16(const float* x, int64_t m, const bf16* w, int64_t n, int64_t k, float* y);

// out[r, c] = bf16(x[r, c]) (round to nearest even) for c < cols, and 0 for cols <= c <
// out_stride: rows of out are out_stride >= cols values apart. Needs cpu_has_avx512_bf16().
void round_rows_to_bf16(const float* x, int64_t rows, int64_t cols, int64_t out_stride, bf16* out);

}  // namespace mlaserve::kernels
