// matmul() and prepare(): hand-written AVX-512 GEMV for few rows of x (decode, bound by the
// weight stream), oneDNN on packed weights for many rows (prefill, bound by FMA throughput); FP8
// and INT8 weights the same way, their GEMM on panels dequantized per call, and bf16 weights
// on panels widened to f32 where gemm_path() says f32 is the faster GEMM on this CPU. Under
// deterministic_kernels() the GEMV serves every m, so that a row's sum is one order whatever m.
#include <algorithm>
#include <vector>

#include "kernels/cpu_isa.h"
#include "kernels/dnnl_matmul.h"
#include "kernels/gemv.h"
#include "kernels/ops.h"
#include "kernels/reference.h"

namespace mlaserve::kernels {
namespace {

// Largest m that goes to the GEMV kernels. Each oneDNN call starts its OpenMP team (~20-50 µs
// on this VM) and runs one weight at a time: at decode batch 32 a layer's 32 experts see ~6 rows
// each, and 448 such calls per step took 64 ms where one GEMV pass over all experts streams them
// at the memory rate. Past the memory-bound m the GEMV is compute-bound (~70 % of the
// vdpbf16ps peak, tile sums included); at m = 16 it matches oneDNN on every bench-model and
// DeepSeek-V3 shape (ops_microbench BM_CutOver), and bench-one-batch's batch-32 decode step took
// 53-54 ms with the cut-over at 16, 53-55 at 32 and 59 at 8 (bench/RESULTS.md). At m = 32
// oneDNN is ~10 % faster on V3's 2048 x 7168, so 16 it is.
constexpr int64_t kMaxGemvRows = 16;
// The same for a weight that has no packed copy: a bf16 one under --weight-packing off, where
// oneDNN on the row-major layout is ~15-20 % slower at m = 32 than on its packed copy
// (ops_microbench BM_MatmulPrefill<BF16, false>) and the GEMV about as fast as packed oneDNN
// (BM_CutOver, m = 32); and FP8/INT8 ones, whose GEMM dequantizes every panel per call: at
// m = 32 the GEMV took 0.55-0.95x its time (BM_CutOver<FP8>: 2048 x 7168 3.7 vs 6.6 ms, the
// bench model's expert and dense shapes 0.3-1.7 ms vs 0.2-1.8).
constexpr int64_t kMaxGemvRowsUnpacked = 32;

// Whether x is used as bf16 with this weight (BF16, or FP8/INT8 with bf16 activations).
bool rounds_x(const Weight& w) {
  return w.activations() == WeightType::BF16;
}

// FP8/INT8 weights with float32 activations (exactness checks) take the dequantizing GEMM path
// at every m: their GEMV would need a second set of kernels for a mode that is not about speed.
// So do they on a CPU without AVX512_BF16 (or VBMI, for the GEMV's decode), where the GEMV
// widens only bf16 weights.
bool use_gemv(const MatmulJob& job) {
  const Weight& w = *job.w;
  const bool supported = w.type() == WeightType::F32 || w.type() == WeightType::BF16
                             ? cpu_has_avx512() || cpu_has_avx2()
                             : rounds_x(w) && cpu_has_avx512_vbmi_bf16();
  const int64_t max_rows = (w.type() == WeightType::BF16 && !w.packed) || w.quantized()
                               ? kMaxGemvRowsUnpacked
                               : kMaxGemvRows;
  return supported && w.cols() > 0 && (job.m <= max_rows || deterministic_kernels());
}

// oneDNN runs every weight type on every x86-64 CPU: bf16 x bf16 where gemm_path() is Bf16Dot
// (which needs AVX512_BF16), else f32 on panels widened from bf16 (oneDNN 2.6 has no f32 x
// bf16), FP8/INT8 panels dequantized to the same type (oneDNN 2.7 has no FP8 or weight-only int8
// matmul). Its result for a row depends on m (its kernels and blocking change with the shape),
// so the deterministic mode never uses it.
bool use_dnnl() {
  return !reference_kernels_forced() && !deterministic_kernels();
}

GemvJob gemv_job(const MatmulJob& job) {
  const Weight& w = *job.w;
  const void* data = w.type() == WeightType::F32    ? static_cast<const void*>(w.f32())
                     : w.type() == WeightType::BF16 ? static_cast<const void*>(w.b16())
                                                    : static_cast<const void*>(w.codes());
  return {job.x, job.m, data, w.type(), w.rows(), w.cols(), job.y, &w.scales()};
}

// A job that does not go to the GEMV kernels.
void matmul_other(const MatmulJob& job) {
  const Weight& w = *job.w;
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

void matmul(const float* x, int64_t m, const Weight& w, float* y) {
  const MatmulJob job{x, m, &w, y};
  matmul_batch({&job, 1});
}

void matmul_batch(std::span<const MatmulJob> jobs) {
  thread_local std::vector<GemvJob> gemv_jobs;
  gemv_jobs.clear();
  for (const MatmulJob& job : jobs) {
    if (job.m == 0 || job.w->rows() == 0) continue;
    if (use_gemv(job)) {
      gemv_jobs.push_back(gemv_job(job));
    } else {
      matmul_other(job);
    }
  }
  if (!gemv_jobs.empty()) gemv_batch(gemv_jobs);
}

}  // namespace mlaserve::kernels
