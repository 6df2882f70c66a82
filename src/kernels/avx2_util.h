// What the AVX2 kernels (cpu_gemv_avx2.cpp, cpu_gemv_q4_avx2.cpp, cpu_gemv_q8_avx2.cpp) share.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <vector>

#include "core/numeric.h"
#include "core/scratch.h"
#include "kernels/cpu_isa.h"

namespace mlaserve::kernels {

MLASERVE_AVX2 inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The count values of x rounded to bf16 (as the model's bf16 activations are everywhere), in the
// calling thread's scratch (valid until its next call).
inline const float* bf16_rounded(const float* x, int64_t count) {
  thread_local std::vector<float> rounded;
  float* out = take(rounded, count);
  for (int64_t v = 0; v < count; ++v) out[v] = bf16_to_f32(f32_to_bf16(x[v]));
  return out;
}

}  // namespace mlaserve::kernels
