// Small AVX-512 building blocks shared by the kernels: tail masks, horizontal sums, exp.
// Everything here is MLASERVE_AVX512 and may only run after cpu_has_avx512().
#pragma once

#include <cstdint>

// g++ 12 reports its own _mm512_undefined_ps() (used inside several intrinsics) as an
// uninitialised read once inlined (GCC PR 105593). The warning points into the intrinsics
// headers, so silencing it around their inclusion hides only that false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only warning group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "core/numeric.h"
#include "kernels/cpu_isa.h"

namespace mlaserve::kernels {

// Mask of the first min(count, 16) lanes of a 16-lane vector; count >= 0.
inline __mmask16 first_lanes16(int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << count) - 1u);
}

// Mask of the first min(count, 32) lanes of a 32-lane vector; count >= 0.
inline __mmask32 first_lanes32(int64_t count) {
  return count >= 32 ? 0xffffffffu : static_cast<__mmask32>((1u << count) - 1u);
}

// Mask of the first min(count, 64) lanes of a 64-lane vector; count >= 0.
inline __mmask64 first_lanes64(int64_t count) {
  return count >= 64 ? ~__mmask64{0} : (__mmask64{1} << count) - 1;
}

// Makes v live in a register. In register-tiled loops (4 × 4 FMAs from 4 + 4 loaded vectors)
// g++ otherwise folds one side's loads into the FMAs as memory operands, reloading each vector
// once per use: 20 loads per 16 FMAs instead of 8, which left such loops load-bound at about a
// third of the FMA peak.
MLASERVE_AVX512 inline void keep_in_register(__m512& v) {
  asm("" : "+v"(v));
}

// 16 bf16 values (their bits) as float32: a bf16 is the high half of its float32.
MLASERVE_AVX512 inline __m512 bf16_to_f32x16(__m256i bits) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// dst[0, n) = the bf16 row src as float32 (exact).
MLASERVE_AVX512 inline void widen_bf16_row(const bf16* src, int64_t n, float* dst) {
  for (int64_t c = 0; c < n; c += 16) {
    const __mmask16 lanes = first_lanes16(n - c);
    _mm512_mask_storeu_ps(dst + c, lanes, bf16_to_f32x16(_mm256_maskz_loadu_epi16(lanes, src + c)));
  }
}

// Sum of the 16 lanes. (g++ 12's _mm512_reduce_add_ps trips -Wmaybe-uninitialized.)
MLASERVE_AVX512 inline float hsum(__m512 v) {
  const __m512 halves = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
  const __m512 quarters =
      _mm512_add_ps(halves, _mm512_shuffle_f32x4(halves, halves, _MM_SHUFFLE(2, 3, 0, 1)));
  __m128 s = _mm512_castps512_ps128(quarters);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Horizontal sums of several vectors gathered into one vector ([Σa0, ..., Σa15] for 16) by
// interleave-and-add steps: 45 shuffles/adds for 16 sums, 24 for 8, instead of ~7 per sum.
// (By-value helpers: passing the accumulator array by reference makes g++ keep it in memory.)

// Per 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3].
MLASERVE_AVX512 inline __m512 sum_pairs(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
}

// Per 128-bit lane: that lane's partial sums of the four vectors behind pairs ab and cd.
MLASERVE_AVX512 inline __m512 sum_quads(__m512 ab, __m512 cd) {
  const __m512d lo = _mm512_unpacklo_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd));
  const __m512d hi = _mm512_unpackhi_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd));
  return _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi));  // float adds
}

// Adds the four 128-bit lanes of each quad; quad i's four totals land in lane i.
MLASERVE_AVX512 inline __m512 sum_lanes(__m512 q0, __m512 q1, __m512 q2, __m512 q3) {
  const __m512 q01 = _mm512_add_ps(_mm512_shuffle_f32x4(q0, q1, _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_f32x4(q0, q1, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 q23 = _mm512_add_ps(_mm512_shuffle_f32x4(q2, q3, _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_f32x4(q2, q3, _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(q01, q23, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(q01, q23, _MM_SHUFFLE(3, 1, 3, 1)));
}

// [Σa0, ..., Σa7].
MLASERVE_AVX512 inline __m256 hsum8(__m512 a0, __m512 a1, __m512 a2, __m512 a3, __m512 a4,
                                    __m512 a5, __m512 a6, __m512 a7) {
  const __m512 q0 = sum_quads(sum_pairs(a0, a1), sum_pairs(a2, a3));
  const __m512 q1 = sum_quads(sum_pairs(a4, a5), sum_pairs(a6, a7));
  return _mm512_castps512_ps256(sum_lanes(q0, q1, q0, q1));
}

// [Σa0, ..., Σa3], each sum taken in the same order as by hsum8.
MLASERVE_AVX512 inline __m128 hsum4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
  const __m512 q = sum_quads(sum_pairs(a0, a1), sum_pairs(a2, a3));
  return _mm512_castps512_ps128(sum_lanes(q, q, q, q));
}

// y[i * y_stride + r] = Σ acc[r][i] for r < kRows, i < kM: the outputs of a GEMV tile, four or
// eight weight rows at a time (the tile's ~7 ops per output were a sixth of its work at
// K = 1024). A row's sum is taken in one order in tiles of 4 and 8 rows alike, so that it does
// not depend on which tile m chose (the deterministic kernels).
template <int kRows, int kM>
MLASERVE_AVX512 inline __attribute__((always_inline)) void store_tile_sums(
    const __m512 (&acc)[kRows][kM], float* y, int64_t y_stride) {
#pragma GCC unroll 8
  for (int i = 0; i < kM; ++i) {
    if constexpr (kRows == 8) {
      _mm256_storeu_ps(y + i * y_stride, hsum8(acc[0][i], acc[1][i], acc[2][i], acc[3][i],
                                               acc[4][i], acc[5][i], acc[6][i], acc[7][i]));
    } else if constexpr (kRows == 4) {
      _mm_storeu_ps(y + i * y_stride, hsum4(acc[0][i], acc[1][i], acc[2][i], acc[3][i]));
    } else {
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) y[i * y_stride + r] = hsum(acc[r][i]);
    }
  }
}

// Largest of the 16 lanes.
MLASERVE_AVX512 inline float hmax(__m512 v) {
  const __m512 halves = _mm512_max_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
  const __m512 quarters =
      _mm512_max_ps(halves, _mm512_shuffle_f32x4(halves, halves, _MM_SHUFFLE(2, 3, 0, 1)));
  __m128 s = _mm512_castps512_ps128(quarters);
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// e^x per lane, relative error ~2 ulp. x = n·ln2 + r with |r| <= ln2/2; e^r by a degree-6
// polynomial; 2^n applied by scalef, which also yields +inf above ~88.7. Lanes below -103.9
// (where e^x is below the smallest denormal), -inf included, give exactly 0.
MLASERVE_AVX512 inline __m512 exp512(__m512 x) {
  const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
  const __m512 ln2_hi = _mm512_set1_ps(0.693359375f);  // ln2 split so n·ln2_hi is exact
  const __m512 ln2_lo = _mm512_set1_ps(-2.12194440e-4f);
  const __mmask16 nonzero = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-103.9f), _CMP_GE_OQ);
  x = _mm512_min_ps(x, _mm512_set1_ps(89.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT);
  __m512 r = _mm512_fnmadd_ps(n, ln2_hi, x);
  r = _mm512_fnmadd_ps(n, ln2_lo, r);
  // Taylor coefficients 1/6! .. 1/2!, then 1 + r + r²·p(r).
  __m512 p = _mm512_set1_ps(1.0f / 720.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_maskz_scalef_ps(nonzero, p, n);
}

}  // namespace mlaserve::kernels
