// Row-wise ops: rms_norm, silu_mul, softmax, rope_interleaved. AVX-512 with masked tails;
// the baseline build is x86-64-v2, where plain loops would only get 128-bit vectors.
// OpenMP splits rows only when there are enough elements to pay for waking the threads.
#include <cmath>
#include <vector>

#include "kernels/avx512_util.h"
#include "kernels/ops.h"
#include "kernels/parallel.h"
#include "kernels/reference.h"

namespace mlaserve::kernels {
namespace {

constexpr int64_t kMinParallelElements = 1 << 17;

// Σ row[i]² over i < dim, in four interleaved partial sums.
MLASERVE_AVX512 float sum_of_squares(const float* row, int64_t dim) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= dim; i += 64) {
    const __m512 a = _mm512_loadu_ps(row + i), b = _mm512_loadu_ps(row + i + 16);
    const __m512 c = _mm512_loadu_ps(row + i + 32), d = _mm512_loadu_ps(row + i + 48);
    acc0 = _mm512_fmadd_ps(a, a, acc0);
    acc1 = _mm512_fmadd_ps(b, b, acc1);
    acc2 = _mm512_fmadd_ps(c, c, acc2);
    acc3 = _mm512_fmadd_ps(d, d, acc3);
  }
  for (; i < dim; i += 16) {
    const __m512 a = _mm512_maskz_loadu_ps(first_lanes16(dim - i), row + i);
    acc0 = _mm512_fmadd_ps(a, a, acc0);
  }
  return hsum(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

MLASERVE_AVX512 void rms_norm_row(const float* x, const float* gamma, int64_t dim, float eps,
                                  float* y) {
  const float inv_rms = 1.0f / std::sqrt(sum_of_squares(x, dim) / static_cast<float>(dim) + eps);
  const __m512 scale = _mm512_set1_ps(inv_rms);
  for (int64_t i = 0; i < dim; i += 16) {
    const __mmask16 valid = first_lanes16(dim - i);
    const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(valid, x + i), scale);
    _mm512_mask_storeu_ps(y + i, valid, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(valid, gamma + i)));
  }
}

MLASERVE_AVX512 void silu_mul_row(const float* gate, const float* up, int64_t n, float* out) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 valid = first_lanes16(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(valid, gate + i);
    const __m512 silu =
        _mm512_div_ps(g, _mm512_add_ps(one, exp512(_mm512_sub_ps(_mm512_setzero_ps(), g))));
    _mm512_mask_storeu_ps(out + i, valid,
                          _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(valid, up + i)));
  }
}

MLASERVE_AVX512 void softmax_avx512(float* x, int64_t n) {
  __m512 max = _mm512_set1_ps(-INFINITY);
  for (int64_t i = 0; i < n; i += 16) {
    max = _mm512_max_ps(max, _mm512_mask_loadu_ps(max, first_lanes16(n - i), x + i));
  }
  const __m512 row_max = _mm512_set1_ps(hmax(max));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 valid = first_lanes16(n - i);
    const __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(valid, x + i), row_max));
    sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(valid, e));
    _mm512_mask_storeu_ps(x + i, valid, e);
  }
  const __m512 inv_sum = _mm512_set1_ps(1.0f / hsum(sum));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 valid = first_lanes16(n - i);
    _mm512_mask_storeu_ps(x + i, valid,
                          _mm512_mul_ps(_mm512_maskz_loadu_ps(valid, x + i), inv_sum));
  }
}

// The rotation of pair i as two per-element tables over dim floats: cos_pairs = [c0, c0, c1,
// c1, ...] and sin_pairs = [-s0, s0, -s1, s1, ...], so that rotated = x·cos_pairs +
// swap_pairs(x)·sin_pairs with swap_pairs(x) = [x1, x0, x3, x2, ...].
void expand_rotation(const float* cos_theta, const float* sin_theta, int64_t pairs,
                     float* cos_pairs, float* sin_pairs) {
  for (int64_t i = 0; i < pairs; ++i) {
    cos_pairs[2 * i] = cos_pairs[2 * i + 1] = cos_theta[i];
    sin_pairs[2 * i] = -sin_theta[i];
    sin_pairs[2 * i + 1] = sin_theta[i];
  }
}

MLASERVE_AVX512 void rotate_pairs(float* vec, int64_t rotated_dim, const float* cos_pairs,
                                  const float* sin_pairs) {
  for (int64_t i = 0; i < rotated_dim; i += 16) {
    const __mmask16 valid = first_lanes16(rotated_dim - i);
    const __m512 v = _mm512_maskz_loadu_ps(valid, vec + i);
    const __m512 swapped = _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1));
    const __m512 sin_part = _mm512_mul_ps(swapped, _mm512_maskz_loadu_ps(valid, sin_pairs + i));
    _mm512_mask_storeu_ps(
        vec + i, valid, _mm512_fmadd_ps(v, _mm512_maskz_loadu_ps(valid, cos_pairs + i), sin_part));
  }
}

// Two passes of 16 lanes: the largest value (any NaN noted), then its first lane. The scalar
// loop, a compare and a branch per value, took ~0.1 ms over a 129k vocabulary.
MLASERVE_AVX512 int64_t first_argmax_avx512(const float* x, int64_t n) {
  const __m512 minus_inf = _mm512_set1_ps(-INFINITY);
  __m512 max = minus_inf;
  __mmask16 nan = 0;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 valid = first_lanes16(n - i);
    const __m512 v = _mm512_mask_loadu_ps(minus_inf, valid, x + i);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    max = _mm512_max_ps(max, v);
  }
  if (nan) return ref::first_argmax(x, n);  // the first NaN
  const __m512 best = _mm512_set1_ps(hmax(max));
  for (int64_t i = 0;; i += 16) {
    const __mmask16 valid = first_lanes16(n - i);
    const __mmask16 equal =
        _mm512_mask_cmp_ps_mask(valid, _mm512_maskz_loadu_ps(valid, x + i), best, _CMP_EQ_OQ);
    if (equal) return i + __builtin_ctz(equal);
  }
}

// The same division as the reference (not a multiplication by 1 / temperature), and exp512's ~2
// ulp for std::exp's: at a 129k vocabulary 0.05 ms where std::exp took ~0.7 ms per token.
MLASERVE_AVX512 void temperature_weights_avx512(const float* logits, int64_t n, float max_logit,
                                                float temperature, float* out) {
  const __m512 max = _mm512_set1_ps(max_logit), t = _mm512_set1_ps(temperature);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 valid = first_lanes16(n - i);
    const __m512 x = _mm512_maskz_loadu_ps(valid, logits + i);
    _mm512_mask_storeu_ps(out + i, valid, exp512(_mm512_div_ps(_mm512_sub_ps(x, max), t)));
  }
}

}  // namespace

void rms_norm(const float* x, const float* gamma, int64_t rows, int64_t dim, float eps, float* y) {
  if (!cpu_has_avx512()) return ref::rms_norm(x, gamma, rows, dim, eps, y);
  for_ranges(rows, rows * dim >= kMinParallelElements, [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) rms_norm_row(x + r * dim, gamma, dim, eps, y + r * dim);
  });
}

void silu_mul(const float* gate_up, int64_t rows, int64_t inter, float* out) {
  if (!cpu_has_avx512()) return ref::silu_mul(gate_up, rows, inter, out);
  for_ranges(rows, rows * inter >= kMinParallelElements, [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      const float* gate = gate_up + r * 2 * inter;
      silu_mul_row(gate, gate + inter, inter, out + r * inter);
    }
  });
}

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  if (!cpu_has_avx512()) return ref::softmax(x, n);
  softmax_avx512(x, n);
}

int64_t first_argmax(const float* x, int64_t n) {
  if (!cpu_has_avx512()) return ref::first_argmax(x, n);
  return first_argmax_avx512(x, n);
}

void temperature_weights(const float* logits, int64_t n, float max_logit, float temperature,
                         float* out) {
  if (!cpu_has_avx512()) return ref::temperature_weights(logits, n, max_logit, temperature, out);
  temperature_weights_avx512(logits, n, max_logit, temperature, out);
}

void rope_interleaved(float* x, int64_t n_vectors, int64_t stride, int64_t dim,
                      const float* cos_theta, const float* sin_theta) {
  if (!cpu_has_avx512())
    return ref::rope_interleaved(x, n_vectors, stride, dim, cos_theta, sin_theta);
  const int64_t pairs = dim / 2;
  thread_local std::vector<float> tables;
  tables.resize(static_cast<size_t>(4 * pairs));
  float* cos_pairs = tables.data();
  float* sin_pairs = cos_pairs + 2 * pairs;
  expand_rotation(cos_theta, sin_theta, pairs, cos_pairs, sin_pairs);
  for_ranges(n_vectors, n_vectors * dim >= kMinParallelElements, [&](int64_t first, int64_t last) {
    for (int64_t v = first; v < last; ++v)
      rotate_pairs(x + v * stride, 2 * pairs, cos_pairs, sin_pairs);
  });
}

}  // namespace mlaserve::kernels
