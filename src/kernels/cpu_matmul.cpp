// matmul() and prepare(): hand-written AVX-512 GEMV for few rows of x (decode, bound by the
// weight stream), oneDNN on packed weights for many rows (prefill, bound by FMA throughput).
#include <algorithm>
#include <vector>

#include "kernels/cpu_isa.h"
#include "kernels/dnnl_matmul.h"
#include "kernels/gemv.h"
#include "kernels/ops.h"
#include "kernels/reference.h"

namespace mlaserve::kernels {
namespace {

// Largest m that goes to the GEMV kernels. Measured with ops_bench BM_CutOver (2 threads,
// weights from DRAM, V3 and bench-model expert shapes): up to m = 3 the GEMV streams W as fast
// as oneDNN on packed weights or faster (BF16 m = 1: 52 vs 42 GB/s), from m = 4 oneDNN's
// packed layout wins (x is broadcast from L1 there, while the GEMV re-reads x rows from L2).
// Against oneDNN on row-major (unpacked) weights the GEMV stays ahead up to m = 8
// (machine.md §6: plain-layout oneDNN is ~2× slower than packed at small m).
constexpr int64_t kMaxGemvRowsPacked = 3;
constexpr int64_t kMaxGemvRowsUnpacked = 8;

bool use_gemv(const MatmulJob& job) {
  const Weight& w = *job.w;
  const bool supported = w.type() == WeightType::F32 ? cpu_has_avx512() : cpu_has_avx512_bf16();
  return supported && w.cols() > 0 &&
         job.m <= (w.packed ? kMaxGemvRowsPacked : kMaxGemvRowsUnpacked);
}

GemvJob gemv_job(const MatmulJob& job) {
  const Weight& w = *job.w;
  const void* data = w.type() == WeightType::F32 ? static_cast<const void*>(w.f32())
                                                 : static_cast<const void*>(w.b16());
  return {job.x, job.m, data, w.type(), w.rows(), w.cols(), job.y};
}

// A job that does not go to the GEMV kernels.
void matmul_other(const MatmulJob& job) {
  const Weight& w = *job.w;
  if (w.cols() == 0) {
    std::fill(job.y, job.y + job.m * w.rows(), 0.0f);
  } else if (dnnl_supports(w.type())) {
    dnnl_matmul(job.x, job.m, w, job.y);
  } else {
    ref::matmul(job.x, job.m, w, job.y);  // BF16 on a CPU without AVX512_BF16
  }
}

}  // namespace

void prepare(Weight& w) {
  if (!w.empty() && w.cols() > 0 && dnnl_supports(w.type())) w.packed = dnnl_pack(w);
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
