// Selections over rows of floats by quickselects whose partitions run 16 values at a time (one
// compare each way, the greater values compressed into the other buffer, the lesser ones
// left-packed in place): kth_largest for the indexer's top-k of candidate scores and a sampler's
// top-k of token weights (against std::nth_element on (score, position) pairs it halved the
// indexer's 32k-key top-k), nucleus_bar for a sampler's top-p.
#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "core/scratch.h"
#include "kernels/avx512_util.h"
#include "kernels/cpu_isa.h"
#include "kernels/ops.h"
#include "kernels/reference.h"

namespace mlaserve::kernels {
namespace {

// The median of current[0], current[n / 2] and current[n - 1]: a pivot sorted input cannot
// make degenerate.
float median_of_three(const float* current, int64_t n) {
  const float a = current[0], b = current[n / 2], c = current[n - 1];
  return std::max(std::min(a, b), std::min(std::max(a, b), c));
}

// One partition of current[0, n) around `pivot`: the greater values compressed into `other`, the
// lesser left-packed in place (`lesser` never passes the read position). Returns the counts and,
// where asked, the greater values' sum in double (two halves of 8 per vector).
struct Split {
  int64_t greater = 0, lesser = 0;
  double greater_sum = 0.0;
};
template <bool kSum>
MLASERVE_AVX512 Split partition16(float* current, float* other, int64_t n, float pivot) {
  const __m512 p = _mm512_set1_ps(pivot);
  Split split;
  __m512d sum = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 valid = first_lanes16(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(valid, current + i);
    const __mmask16 gt = _mm512_mask_cmp_ps_mask(valid, v, p, _CMP_GT_OQ);
    const __mmask16 lt = _mm512_mask_cmp_ps_mask(valid, v, p, _CMP_LT_OQ);
    _mm512_storeu_ps(other + split.greater, _mm512_maskz_compress_ps(gt, v));
    _mm512_storeu_ps(current + split.lesser, _mm512_maskz_compress_ps(lt, v));
    if constexpr (kSum) {
      const __m512 g = _mm512_maskz_mov_ps(gt, v);
      sum = _mm512_add_pd(sum, _mm512_cvtps_pd(_mm512_castps512_ps256(g)));
      sum = _mm512_add_pd(
          sum, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(g), 1))));
    }
    split.greater += __builtin_popcount(gt);
    split.lesser += __builtin_popcount(lt);
  }
  if constexpr (kSum) split.greater_sum = _mm512_reduce_add_pd(sum);
  return split;
}

// A thread's two rows for the partitions: n values each, 16 more for the full-vector stores.
struct Rows {
  float* current;
  float* other;
};
Rows scratch_rows(int64_t n) {
  thread_local std::vector<float> rows[2];
  return {take(rows[0], n + 16), take(rows[1], n + 16)};
}

MLASERVE_AVX512 KthLargest kth_largest_avx512(const float* x, int64_t n, int64_t k) {
  auto [current, other] = scratch_rows(n);
  const __m512 minus_inf = _mm512_set1_ps(-INFINITY);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 valid = first_lanes16(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(valid, x + i);
    _mm512_mask_storeu_ps(current + i, valid,
                          _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), minus_inf));
  }
  int64_t rank = k - 1;  // among `current`, best first
  int64_t above = 0;     // values left behind for being greater than all of `current`
  while (n > 32) {
    const float pivot = median_of_three(current, n);
    const Split split = partition16<false>(current, other, n, pivot);
    if (rank < split.greater) {
      std::swap(current, other);
      n = split.greater;
    } else if (rank < n - split.lesser) {
      return {pivot, above + split.greater};  // one of the values equal to the pivot
    } else {
      rank -= n - split.lesser;
      above += n - split.lesser;
      n = split.lesser;
    }
  }
  std::sort(current, current + n, std::greater<>());
  return {current[rank], above + (std::find(current, current + n, current[rank]) - current)};
}

// nucleus_bar by the same partitions, splitting by mass: each pass also sums (in double) the
// weights above the pivot; the nucleus then lies above the pivot, ends among the weights equal
// to it, or takes all of those and goes on below.
MLASERVE_AVX512 NucleusBar nucleus_bar_avx512(const float* w, int64_t n, double target) {
  auto [current, other] = scratch_rows(n);
  std::copy(w, w + n, current);
  double kept = 0.0;  // the weights above every one in `current`, all in the nucleus
  while (n > 32) {
    const float pivot = median_of_three(current, n);
    const Split split = partition16<true>(current, other, n, pivot);
    const int64_t equal = n - split.greater - split.lesser;
    if (kept + split.greater_sum >= target) {
      std::swap(current, other);
      n = split.greater;
      continue;
    }
    kept += split.greater_sum;
    if (kept + static_cast<double>(equal) * pivot >= target) {
      int64_t taken = 0;
      for (; kept < target && taken < equal; ++taken) kept += pivot;
      return {pivot, taken};
    }
    kept += static_cast<double>(equal) * pivot;
    n = split.lesser;
  }
  std::sort(current, current + n, std::greater<>());
  for (int64_t i = 0; i < n; ++i) {
    kept += current[i];
    if (kept < target) continue;
    return {current[i], i - (std::find(current, current + n, current[i]) - current) + 1};
  }
  return {0.0f, 0};
}

}  // namespace

NucleusBar nucleus_bar(const float* w, int64_t n, double target) {
  if (!cpu_has_avx512()) return ref::nucleus_bar(w, n, target);
  return nucleus_bar_avx512(w, n, target);
}

KthLargest kth_largest(const float* x, int64_t n, int64_t k) {
  if (!cpu_has_avx512()) return ref::kth_largest(x, n, k);
  return kth_largest_avx512(x, n, k);
}

}  // namespace mlaserve::kernels
