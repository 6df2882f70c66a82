// Sparse prefill attention (DeepSeek Sparse Attention on the normal path): every token attends
// to its own list of selected tokens, so no two queries share a kv block and the flash tiles
// (query rows x kv rows) have nothing to tile. The work item is one token with heads as vector
// lanes instead: per selected key, the 16 heads' scores are formed as 16 dot-product vectors
// and reduced into one vector (lane h = head h's score, 45 shuffles/adds for 16 sums), so the
// running max, the rescaling and the exponentials of the online softmax run on all 16 heads at
// once; each head's output row then takes its value row times its probability.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/avx512_util.h"
#include "kernels/cpu_isa.h"
#include "kernels/ops.h"
#include "kernels/parallel.h"
#include "kernels/reference.h"

namespace mlaserve::kernels {
namespace {

constexpr int64_t kHeadLanes = 16;

// Σ_c q[h][c] k[h][c] for the heads [0, n) of a 16-head group, lane h (lanes past n are 0).
// q and k point at the group's first head; rows are d floats apart.
MLASERVE_AVX512 __m512 group_scores(const float* q, const float* k, int64_t n, int64_t d) {
  __m512 acc[kHeadLanes];
  for (int64_t h = 0; h < kHeadLanes; ++h) {
    acc[h] = _mm512_setzero_ps();
    if (h >= n) continue;
    for (int64_t c = 0; c < d; c += 16) {
      const __mmask16 valid = first_lanes16(d - c);
      acc[h] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(valid, q + h * d + c),
                               _mm512_maskz_loadu_ps(valid, k + h * d + c), acc[h]);
    }
  }
  return sum_lanes(sum_quads(sum_pairs(acc[0], acc[1]), sum_pairs(acc[2], acc[3])),
                   sum_quads(sum_pairs(acc[4], acc[5]), sum_pairs(acc[6], acc[7])),
                   sum_quads(sum_pairs(acc[8], acc[9]), sum_pairs(acc[10], acc[11])),
                   sum_quads(sum_pairs(acc[12], acc[13]), sum_pairs(acc[14], acc[15])));
}

// o[h][0, d_v) *= factor[h] for the group's n heads.
MLASERVE_AVX512 void scale_rows(float* o, int64_t n, int64_t d_v, const float* factor) {
  for (int64_t h = 0; h < n; ++h) {
    const __m512 f = _mm512_set1_ps(factor[h]);
    for (int64_t c = 0; c < d_v; c += 16) {
      const __mmask16 valid = first_lanes16(d_v - c);
      _mm512_mask_storeu_ps(o + h * d_v + c, valid,
                            _mm512_mul_ps(_mm512_maskz_loadu_ps(valid, o + h * d_v + c), f));
    }
  }
}

// o[h] += p[h] * v[h] for the group's n heads (v rows d_v floats apart).
MLASERVE_AVX512 void add_values(float* o, int64_t n, int64_t d_v, const float* p, const float* v) {
  for (int64_t h = 0; h < n; ++h) {
    const __m512 ph = _mm512_set1_ps(p[h]);
    for (int64_t c = 0; c < d_v; c += 16) {
      const __mmask16 valid = first_lanes16(d_v - c);
      _mm512_mask_storeu_ps(o + h * d_v + c, valid,
                            _mm512_fmadd_ps(ph, _mm512_maskz_loadu_ps(valid, v + h * d_v + c),
                                            _mm512_maskz_loadu_ps(valid, o + h * d_v + c)));
    }
  }
}

// Token i, heads [h0, h0 + n) with n <= 16, over its selected keys: online softmax with heads
// as lanes. o: [16, d_v] scratch.
MLASERVE_AVX512 void attend_token_group(const PrefillAttention& s, const float* q, const float* k,
                                        const float* v, const int32_t* keys, int64_t count,
                                        int64_t i, int64_t h0, int64_t n, float* o, float* out) {
  const __m512 scale = _mm512_set1_ps(s.scale);
  const __mmask16 lanes = first_lanes16(n);
  __m512 max = _mm512_set1_ps(-INFINITY), sum = _mm512_setzero_ps();
  std::fill(o, o + n * s.d_v, 0.0f);
  alignas(64) float factor[kHeadLanes], p[kHeadLanes];
  const float* qi = q + (i * s.n_heads + h0) * s.d_qk;
  for (int64_t j = 0; j < count; ++j) {
    const int64_t key = keys[j];
    const __m512 score =
        _mm512_mul_ps(group_scores(qi, k + (key * s.n_heads + h0) * s.d_qk, n, s.d_qk), scale);
    const __m512 new_max = _mm512_mask_max_ps(max, lanes, max, score);
    // The first key's correction is exp(-inf) = 0 on an all-zero state.
    const __m512 correction = exp512(_mm512_sub_ps(max, new_max));
    const __m512 prob = exp512(_mm512_sub_ps(score, new_max));
    sum = _mm512_fmadd_ps(sum, correction, prob);
    max = new_max;
    _mm512_store_ps(factor, correction);
    _mm512_store_ps(p, prob);
    if (j > 0) scale_rows(o, n, s.d_v, factor);
    add_values(o, n, s.d_v, p, v + (key * s.n_heads + h0) * s.d_v);
  }
  alignas(64) float total[kHeadLanes];
  _mm512_store_ps(total, sum);
  for (int64_t h = 0; h < n; ++h) {
    const float inv = 1.0f / total[h];
    for (int64_t c = 0; c < s.d_v; ++c)
      out[(i * s.n_heads + h0 + h) * s.d_v + c] = o[h * s.d_v + c] * inv;
  }
}

}  // namespace

void mla_attention_prefill_sparse(const PrefillAttention& s, int64_t top_k, const float* q,
                                  const float* k, const float* v, const int32_t* selected,
                                  const int32_t* counts, float* out) {
  if (!cpu_has_avx512())
    return ref::mla_attention_prefill_sparse(s, top_k, q, k, v, selected, counts, out);
  const int64_t macs = s.n_tokens * std::min(top_k, s.n_tokens) * s.n_heads * (s.d_qk + s.d_v);
  for_each_item(s.n_tokens, macs >= (int64_t{1} << 21), [&](int64_t i) {
    thread_local std::vector<float> o;
    o.resize(static_cast<size_t>(kHeadLanes * s.d_v));
    for (int64_t h0 = 0; h0 < s.n_heads; h0 += kHeadLanes) {
      attend_token_group(s, q, k, v, selected + i * top_k, counts[i], i, h0,
                         std::min(kHeadLanes, s.n_heads - h0), o.data(), out);
    }
  });
}

}  // namespace mlaserve::kernels
