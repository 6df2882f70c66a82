// matmul() and prepare(): hand-written AVX-512 GEMV for few rows of x (decode, bound by the
// weight stream), oneDNN on packed weights for many rows (prefill, bound by FMA throughput).
#include <algorithm>

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

bool gemv_supports(WeightType type) {
  return type == WeightType::F32 ? cpu_has_avx512() : cpu_has_avx512_bf16();
}

}  // namespace

void prepare(Weight& w) {
  if (!w.empty() && w.cols() > 0 && dnnl_supports(w.type())) w.packed = dnnl_pack(w);
}

void matmul(const float* x, int64_t m, const Weight& w, float* y) {
  if (m == 0 || w.rows() == 0) return;
  if (w.cols() == 0) {
    std::fill(y, y + m * w.rows(), 0.0f);
  } else if (m <= (w.packed ? kMaxGemvRowsPacked : kMaxGemvRowsUnpacked) &&
             gemv_supports(w.type())) {
    if (w.type() == WeightType::F32) {
      gemv_f32(x, m, w.f32(), w.rows(), w.cols(), y);
    } else {
      gemv_bf16(x, m, w.b16(), w.rows(), w.cols(), y);
    }
  } else if (dnnl_supports(w.type())) {
    dnnl_matmul(x, m, w, y);
  } else {
    ref::matmul(x, m, w, y);  // BF16 on a CPU without AVX512_BF16
  }
}

}  // namespace mlaserve::kernels
