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

// Largest m that goes to the GEMV kernels (measured with ops_bench, see the cut-over there).
constexpr int64_t kMaxGemvRows = 8;

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
  } else if (m <= kMaxGemvRows && gemv_supports(w.type())) {
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
