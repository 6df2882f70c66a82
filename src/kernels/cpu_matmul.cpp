// matmul() and prepare(): hand-written AVX-512 GEMV for few rows of x (decode, bound by the
// weight stream), oneDNN on packed weights for many rows (prefill, bound by FMA throughput); FP8
// and INT8 weights the same way, their GEMM on panels dequantized per call, and bf16 weights
// on panels widened to f32 where gemm_path() says f32 is the faster GEMM on this CPU. Under
// deterministic_kernels() the GEMV serves every m, so that a row's sum is one order whatever m.
#include <algorithm>
#include <vector>

#include "core/error.h"
#include "kernels/cpu_isa.h"
#include "kernels/dnnl_matmul.h"
#include "kernels/gemv.h"
#include "kernels/ops.h"
#include "kernels/reference.h"

namespace mlaserve::kernels {
namespace {

// Largest m that goes to the row-major GEMV kernels (float32 weights, and bf16 ones whose packed
// copy packed_copy() does not take). Each oneDNN call starts its OpenMP team (~20-50 µs on this VM)
// and runs one weight at a time: at decode batch 32 a layer's 32 experts see ~6 rows each, and 448
// such calls per step took 64 ms where one GEMV pass over all experts streams them at the memory
// rate. Past the memory-bound m the GEMV is compute-bound (~70 % of the FMA peak, tile sums
// included); at m = 16 it matched oneDNN on every bench-model and DeepSeek-V3 shape (ops_microbench
// BM_CutOver).
constexpr int64_t kMaxGemvRows = 16;
// The same for a weight that has no packed copy: a bf16 one under --weight-packing off, where
// oneDNN on the row-major layout is ~15-20 % slower at m = 32 than on its packed copy
// (ops_microbench BM_MatmulPrefill<BF16, false>) and the GEMV about as fast as packed oneDNN
// (BM_CutOver, m = 32); and FP8/INT8 ones, whose GEMM dequantizes every panel per call: at
// m = 32 the GEMV took 0.55-0.95x its time (BM_CutOver<FP8>: 2048 x 7168 3.7 vs 6.6 ms, the
// bench model's expert and dense shapes 0.3-1.7 ms vs 0.2-1.8).
constexpr int64_t kMaxGemvRowsUnpacked = 32;
// Largest m that runs on a bf16 weight's packed copy in the GEMV pass (gemv_packed_rows). From
// one row on it streams the weight faster than the row-major GEMV (one contiguous run per
// thread on huge pages, no per-output sums: bench-model shapes at m = 1 1.1-1.8x the GEMV's
// rate, batch-1 decode 3-14 % faster), and up to 128 rows it beats oneDNN on the same copy
// (1024 x 1024 / 1024 x 512 experts at m = 32-128: 373-423 vs 244-389 GFLOP/s, both cores
// awake), besides running all of a step's experts in one pass: prefill of 512 tokens 6-8 %
// faster than with oneDNN from m = 17 on, 32-row decode steps ~5 %. At 256-512 rows the two
// are level and oneDNN stays (bench/RESULTS.md, 2026-12-05 fourth session).
constexpr int64_t kMaxPackedRows = 128;

// Whether x is used as bf16 with this weight (BF16, or FP8/INT8 with bf16 activations).
bool rounds_x(const Weight& w) {
  return w.activations() == WeightType::BF16;
}

// Whether m rows of x may multiply a packed bf16 layout by the packed GEMV rather than by
// oneDNN: where the bf16 dot product is the chosen GEMM path for m (up to kMaxGemvRows the
// row-major GEMV would use it anyway), not where oneDNN has AMX tiles, whose bf16 GEMM outruns any
// vdpbf16ps kernel once it is compute-bound, and never in the deterministic mode, whose GEMV keeps
// one summation order per row for every m. A quantized weight's blocks, dequantized into that
// layout per call either way (gemv_dequantized_rows), go there at any such m: packed once and
// used from L2, they keep up with oneDNN on the bench model's 512-row GEMMs (363-428 against
// 385-445 GFLOP/s in bf16, bench/RESULTS.md).
bool vdp_packed_gemv(int64_t m) {
  return cpu_has_avx512_bf16() && !deterministic_kernels() &&
         (m <= kMaxGemvRows || (gemm_path(m) == GemmPath::Bf16Dot && !dnnl_has_amx()));
}

// Where a CPU has AMX tiles, the packed layout's products past 8 rows run on them
// (gemv_packed_panel -> amx_packed_panel) wherever the GEMM is bf16: a quantized weight's
// dequantized blocks at every m (oneDNN's GEMM on the same tiles needed the whole panel
// dequantized to memory first and took about twice the bf16 weight's time), a bf16 weight's
// packed copy up to kMaxPackedRows (1.1-1.9x oneDNN's speed from 32 to 96 rows, level with it at
// 512; bench/RESULTS.md).
bool amx_block_gemm(int64_t m) {
  return cpu_has_amx_bf16() && !deterministic_kernels() && gemm_path(m) == GemmPath::Bf16Dot;
}

// Whether m rows of x multiply the packed bf16 layout in our own kernels (vdpbf16ps or tiles)
// rather than in oneDNN.
bool packed_layout_gemv(int64_t m) {
  return vdp_packed_gemv(m) || amx_block_gemm(m);
}

// A bf16 weight's packed copy is oneDNN's own layout, packed once at load: the GEMV (or the
// tiles) beats oneDNN on it only up to kMaxPackedRows.
bool packed_gemv_rows(int64_t m) {
  return m <= kMaxPackedRows && packed_layout_gemv(m);
}

// Whether a quantized weight's product runs in the GEMV pass on its blocks dequantized into the
// packed layout (more rows of x than its own GEMV tiles serve).
// On AMX tiles wherever the packed layout's products go there (packed_rows_on_amx: from 9 rows):
// the quantized GEMV, compute-bound on vdpbf16ps (on Intel at half the f32 FMA rate), took 3-4x
// the dequantized blocks' time at m = 32 and 1.7x at m = 16.
bool dequantized_blocks(const MatmulJob& job) {
  const Weight& w = *job.w;
  const bool on_tiles = amx_block_gemm(job.m) && packed_rows_on_amx(job.m);
  return w.quantized() && rounds_x(w) && w.cols() > 0 &&
         (on_tiles || (job.m > kMaxGemvRowsUnpacked && packed_layout_gemv(job.m)));
}

// The packed copy a job runs on in the GEMV pass, or null: bf16 weights with a copy in the
// layout gemv_packed_rows reads, at the rows where that kernel is the faster.
const bf16* packed_copy(const MatmulJob& job) {
  const Weight& w = *job.w;
  if (w.type() != WeightType::BF16 || !rounds_x(w) || !packed_gemv_rows(job.m)) return nullptr;
  return dnnl_packed_bf16(w);
}

// Quantized weights with float32 activations (exactness checks) take the dequantizing GEMM path
// at every m: their GEMV would need a second set of kernels for a mode that is not about speed.
// With bf16 activations their GEMV is the AVX-512 BF16/VBMI kernel, or the AVX2 one on a CPU
// without it. `packed`: packed_copy(job).
bool use_gemv(const MatmulJob& job, const bf16* packed) {
  const Weight& w = *job.w;
  if (w.row_major_dropped()) return packed != nullptr;
  const bool quantized_gemv = cpu_has_avx512_vbmi_bf16() || cpu_has_avx2();
  const bool supported = w.type() == WeightType::F32 || w.type() == WeightType::BF16
                             ? cpu_has_avx512() || cpu_has_avx2()
                             : rounds_x(w) && quantized_gemv;
  const int64_t max_rows = (w.type() == WeightType::BF16 && !w.packed) || w.quantized()
                               ? kMaxGemvRowsUnpacked
                               : kMaxGemvRows;
  return supported && w.cols() > 0 &&
         (job.m <= max_rows || deterministic_kernels() || packed != nullptr ||
          dequantized_blocks(job));
}

// oneDNN runs every weight type on every x86-64 CPU: bf16 x bf16 where gemm_path() is Bf16Dot
// (which needs AVX512_BF16), else f32 on panels widened from bf16 (oneDNN 2.6 has no f32 x
// bf16), FP8/INT8 panels dequantized to the same type (oneDNN 2.7 has no FP8 or weight-only int8
// matmul). Its result for a row depends on m (its kernels and blocking change with the shape),
// so the deterministic mode never uses it.
bool use_dnnl() {
  return !reference_kernels_forced() && !deterministic_kernels();
}

GemvJob gemv_job(const MatmulJob& job, const bf16* packed) {
  const Weight& w = *job.w;
  const void* data = w.type() == WeightType::F32    ? static_cast<const void*>(w.f32())
                     : w.type() == WeightType::BF16 ? static_cast<const void*>(w.b16())
                                                    : static_cast<const void*>(w.codes());
  return {job.x,    job.m, data,        w.type(), w.rows(),
          w.cols(), job.y, &w.scales(), packed,   dequantized_blocks(job) ? &w : nullptr};
}

// A job that does not go to the GEMV kernels.
void matmul_other(const MatmulJob& job) {
  const Weight& w = *job.w;
  if (w.row_major_dropped() && !(use_dnnl() && gemm_path(job.m) == GemmPath::Bf16Dot)) {
    // The kernel modes that read row-major values are set before the load, which drops them
    // only where no product needs them.
    fail("matmul: the kernel modes changed after the load dropped a weight's row-major values");
  }
  if (w.cols() == 0) {
    std::fill(job.y, job.y + job.m * w.rows(), 0.0f);
  } else if (use_dnnl()) {
    dnnl_matmul(job.x, job.m, w, job.y);
  } else if (reference_kernels_forced() || !rounds_x(w)) {
    ref::matmul(job.x, job.m, w, job.y);
  } else {
    // The deterministic kernels' bf16 activations on a CPU without AVX512_BF16: x rounded to
    // bf16 as the GEMV rounds it, so that they compute the same bf16 × weight → f32 products on
    // every CPU.
    thread_local std::vector<float> rounded;
    rounded.resize(static_cast<size_t>(job.m * w.cols()));
    for (size_t i = 0; i < rounded.size(); ++i) rounded[i] = bf16_to_f32(f32_to_bf16(job.x[i]));
    ref::matmul(rounded.data(), job.m, w, job.y);
  }
}

}  // namespace

void prepare(Weight& w) {
  // FP8/INT8 stay as they are: their GEMM dequantizes panels per call.
  if (!packs(w.type()) || w.empty() || w.cols() == 0 || !use_dnnl()) return;
  w.packed = dnnl_pack(w);
  w.packed_bytes = dnnl_packed_bytes(w);
}

int64_t packed_copy_bytes(WeightType type, int64_t rows, int64_t cols) {
  if (!packs(type) || rows == 0 || cols == 0) return 0;  // packs(): as prepare() decides
  return static_cast<int64_t>(dnnl_packed_size(type, rows, cols));
}

bool packed_copy_serves_all(WeightType type, int64_t rows, int64_t cols) {
  // packs() is false in the deterministic and reference modes; gemm_choice() is f32 for both
  // classes without AVX512_BF16.
  const GemmChoice choice = gemm_choice();
  return type == WeightType::BF16 && packs(type) && choice.mid == GemmPath::Bf16Dot &&
         choice.large == GemmPath::Bf16Dot && rows > 0 && cols > 0 &&
         dnnl_packs_bf16_blocked(rows, cols);
}

bool drop_row_major_if_unneeded(Weight& w) {
  if (!packed_copy_serves_all(w.type(), w.rows(), w.cols()) || dnnl_packed_bf16(w) == nullptr)
    return false;
  w.drop_row_major();
  return true;
}

void matmul(const float* x, int64_t m, const Weight& w, float* y) {
  const MatmulJob job{x, m, &w, y};
  matmul_batch({&job, 1});
}

void matmul_batch(std::span<const MatmulJob> jobs) {
  thread_local std::vector<GemvJob> gemv_jobs;
  gemv_jobs.clear();
  for (const MatmulJob& job : jobs) {
    if (job.m == 0 || job.w->rows() == 0) continue;
    const bf16* packed = packed_copy(job);
    if (use_gemv(job, packed)) {
      gemv_jobs.push_back(gemv_job(job, packed));
    } else {
      matmul_other(job);
    }
  }
  if (!gemv_jobs.empty()) gemv_batch(gemv_jobs);
}

}  // namespace mlaserve::kernels
