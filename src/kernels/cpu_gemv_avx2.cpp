// The GEMV on CPUs with AVX2 and FMA but no AVX-512 (AMD Zen 2/3, Intel Haswell to Comet Lake):
// float32 x against float32 or bf16 weights (bf16 widened in registers, so the products are
// exact), four weight rows by up to two x rows per pass in eight-lane registers. Without it
// such a CPU would run each decode step's matmuls through oneDNN on f32 panels widened per call.
#include <immintrin.h>

#include <algorithm>

#include "kernels/avx2_util.h"
#include "kernels/cpu_isa.h"
#include "kernels/gemv.h"

namespace mlaserve::kernels {
namespace {

MLASERVE_AVX2 inline __m256 load8(const float* p) {
  return _mm256_loadu_ps(p);
}
MLASERVE_AVX2 inline __m256 load8(const bf16* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

inline float value(float v) {
  return v;
}
inline float value(bf16 v) {
  return bf16_to_f32(v);
}

// y[i * y_stride + r] = x[i, :k] · w[r, :k] for r < kRows, i < kM (x rows k floats apart). Each
// output is summed in one order whatever kRows and kM, so that a row's result does not depend
// on the batch (the deterministic kernels).
template <typename W, int kRows, int kM>
MLASERVE_AVX2 void tile(const float* x, const W* w, int64_t k, float* y, int64_t y_stride) {
  __m256 acc[kRows][kM];
  for (int r = 0; r < kRows; ++r)
    for (int i = 0; i < kM; ++i) acc[r][i] = _mm256_setzero_ps();
  int64_t c = 0;
  for (; c + 8 <= k; c += 8) {
    __m256 xv[kM];
    for (int i = 0; i < kM; ++i) xv[i] = _mm256_loadu_ps(x + i * k + c);
    for (int r = 0; r < kRows; ++r) {
      const __m256 wv = load8(w + r * k + c);
      for (int i = 0; i < kM; ++i) acc[r][i] = _mm256_fmadd_ps(wv, xv[i], acc[r][i]);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int i = 0; i < kM; ++i) {
      float sum = hsum8(acc[r][i]);
      for (int64_t t = c; t < k; ++t) sum += value(w[r * k + t]) * x[i * k + t];
      y[i * y_stride + r] = sum;
    }
  }
}

template <typename W>
void rows(const GemvJob& job, int64_t first, int64_t last) {
  const W* w = static_cast<const W*>(job.w);
  const int64_t k = job.k, n = job.n;
  for (int64_t row = first; row < last; row += 4) {
    const int64_t count = std::min<int64_t>(4, last - row);
    for (int64_t i = 0; i < job.m;) {
      const float* x = job.x + i * k;
      float* y = job.y + i * n + row;
      if (count == 4 && i + 2 <= job.m) {
        tile<W, 4, 2>(x, w + row * k, k, y, n);
        i += 2;
      } else if (count == 4) {
        tile<W, 4, 1>(x, w + row * k, k, y, n);
        i += 1;
      } else {
        for (int64_t r = 0; r < count; ++r) tile<W, 1, 1>(x, w + (row + r) * k, k, y + r, n);
        i += 1;
      }
    }
  }
}

}  // namespace

void gemv_avx2_rows(const GemvJob& job, int64_t first, int64_t last) {
  if (job.type == WeightType::F32) {
    rows<float>(job, first, last);
  } else {
    rows<bf16>(job, first, last);
  }
}

}  // namespace mlaserve::kernels
