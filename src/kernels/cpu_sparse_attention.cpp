// Sparse prefill attention (DeepSeek Sparse Attention on the normal path): every token attends
// to its own list of selected tokens, so no two queries share a kv block and the flash tiles
// (query rows x kv rows) have nothing to tile. Work goes head by head instead (k and v are
// head-major), so both threads read the same head's rows, which stay in cache across its
// queries: a token's selection touches top_k rows scattered over the prompt, and all heads'
// rows at once would stream the prompt's whole K/V from memory again for every token.
// Within a (head, token) pair the selected keys go 16 at a time: 16 dot products reduced into
// one vector (lane j = key j's score, 45 shuffles/adds for 16 sums), the online softmax on that
// vector, then each key's value row times its probability.
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

constexpr int64_t kKeyLanes = 16;
constexpr int64_t kQueriesPerItem = 32;  // tokens of one head per work item

// Lane j = q . k[keys[j]] for j < n (0 past n); k rows are d floats apart.
MLASERVE_AVX512 __m512 key_scores(const float* q, const float* k, const int32_t* keys, int64_t n,
                                  int64_t d) {
  __m512 acc[kKeyLanes];
  for (int64_t j = 0; j < kKeyLanes; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t c = 0; c < d; c += 16) {
    const __mmask16 valid = first_lanes16(d - c);
    const __m512 qc = _mm512_maskz_loadu_ps(valid, q + c);
    for (int64_t j = 0; j < n; ++j)
      acc[j] = _mm512_fmadd_ps(qc, _mm512_maskz_loadu_ps(valid, k + keys[j] * d + c), acc[j]);
  }
  return sum_lanes(sum_quads(sum_pairs(acc[0], acc[1]), sum_pairs(acc[2], acc[3])),
                   sum_quads(sum_pairs(acc[4], acc[5]), sum_pairs(acc[6], acc[7])),
                   sum_quads(sum_pairs(acc[8], acc[9]), sum_pairs(acc[10], acc[11])),
                   sum_quads(sum_pairs(acc[12], acc[13]), sum_pairs(acc[14], acc[15])));
}

// o[0, d_v) = o * correction + sum_j p[j] * v[keys[j]] for j < n.
MLASERVE_AVX512 void update_output(float* o, int64_t d_v, float correction, const float* p,
                                   const float* v, const int32_t* keys, int64_t n) {
  const __m512 corr = _mm512_set1_ps(correction);
  for (int64_t c = 0; c < d_v; c += 16) {
    const __mmask16 valid = first_lanes16(d_v - c);
    __m512 acc = _mm512_mul_ps(_mm512_maskz_loadu_ps(valid, o + c), corr);
    for (int64_t j = 0; j < n; ++j) {
      acc = _mm512_fmadd_ps(_mm512_set1_ps(p[j]),
                            _mm512_maskz_loadu_ps(valid, v + keys[j] * d_v + c), acc);
    }
    _mm512_mask_storeu_ps(o + c, valid, acc);
  }
}

// Requests rows keys[0, n) of k (d_k floats each) and v (d_v) into L1: a selection's rows are
// scattered over the prompt, where the hardware prefetcher sees no stream.
MLASERVE_AVX512 void prefetch_rows(const float* k, int64_t d_k, const float* v, int64_t d_v,
                                   const int32_t* keys, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    const char* k_row = reinterpret_cast<const char*>(k + keys[j] * d_k);
    const char* v_row = reinterpret_cast<const char*>(v + keys[j] * d_v);
    for (int64_t b = 0; b < d_k * 4; b += 64) _mm_prefetch(k_row + b, _MM_HINT_T0);
    for (int64_t b = 0; b < d_v * 4; b += 64) _mm_prefetch(v_row + b, _MM_HINT_T0);
  }
}

// Token i, head h over its count selected keys; k_h, v_h are head h's rows. o: [d_v] scratch.
MLASERVE_AVX512 void attend_token(const PrefillAttention& s, const float* q, const float* k_h,
                                  const float* v_h, const int32_t* keys, int64_t count, int64_t i,
                                  int64_t h, float* o, float* out) {
  const float* qi = q + (i * s.n_heads + h) * s.d_qk;
  const __m512 scale = _mm512_set1_ps(s.scale);
  float max = -INFINITY, sum = 0.0f;
  std::fill(o, o + s.d_v, 0.0f);
  alignas(64) float p[kKeyLanes];
  for (int64_t first = 0; first < count; first += kKeyLanes) {
    const int64_t n = std::min(kKeyLanes, count - first);
    if (first + kKeyLanes < count) {  // the next block's rows, while this one computes
      prefetch_rows(k_h, s.d_qk, v_h, s.d_v, keys + first + kKeyLanes,
                    std::min(kKeyLanes, count - first - kKeyLanes));
    }
    const __mmask16 lanes = first_lanes16(n);
    const __m512 score = _mm512_mul_ps(key_scores(qi, k_h, keys + first, n, s.d_qk), scale);
    const float new_max =
        std::max(max, hmax(_mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), lanes, score)));
    const float correction = std::exp(max - new_max);  // 0 for the first block
    const __m512 prob =
        _mm512_maskz_mov_ps(lanes, exp512(_mm512_sub_ps(score, _mm512_set1_ps(new_max))));
    sum = sum * correction + hsum(prob);
    max = new_max;
    _mm512_store_ps(p, prob);
    update_output(o, s.d_v, correction, p, v_h, keys + first, n);
  }
  const float inv = 1.0f / sum;
  float* dst = out + (i * s.n_heads + h) * s.d_v;
  for (int64_t c = 0; c < s.d_v; ++c) dst[c] = o[c] * inv;
}

}  // namespace

void mla_attention_prefill_sparse(const PrefillAttention& s, int64_t top_k, const float* q,
                                  const float* k, const float* v, const int32_t* selected,
                                  const int32_t* counts, float* out) {
  if (!cpu_has_avx512())
    return ref::mla_attention_prefill_sparse(s, top_k, q, k, v, selected, counts, out);
  const int64_t runs = (s.n_tokens + kQueriesPerItem - 1) / kQueriesPerItem;
  const int64_t macs = s.n_tokens * std::min(top_k, s.n_tokens) * s.n_heads * (s.d_qk + s.d_v);
  // Items head-major: the threads work on one head's rows at a time.
  for_each_item(s.n_heads * runs, macs >= (int64_t{1} << 21), [&](int64_t item) {
    const int64_t h = item / runs, first = item % runs * kQueriesPerItem;
    thread_local std::vector<float> o;
    o.resize(static_cast<size_t>(s.d_v));
    const float* k_h = k + h * s.n_tokens * s.d_qk;
    const float* v_h = v + h * s.n_tokens * s.d_v;
    for (int64_t i = first; i < std::min(s.n_tokens, first + kQueriesPerItem); ++i)
      attend_token(s, q, k_h, v_h, selected + i * top_k, counts[i], i, h, o.data(), out);
  });
}

}  // namespace mlaserve::kernels
