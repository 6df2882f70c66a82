// Sparse prefill attention (DeepSeek Sparse Attention on the normal path): every token attends
// to its own list of selected tokens, so no two queries share a kv block and the flash tiles
// (query rows x kv rows) have nothing to tile. Work goes head by head instead (k and v are
// head-major), a block of one head's queries at a time, and within a block by chunks of keys:
// every query of the block takes its selected keys of one chunk, then of the next. A query's
// selection is scattered over the whole prompt (top_k rows of up to 32k), so reading each
// query's rows in turn streams the head's K/V (21 MB at 32k tokens) from L3 or memory once per
// query; a chunk's rows stay in L2 while the block's queries read them, so the head's K/V comes
// from beyond L2 once per block instead (`BM_SparsePrefillAttention/tokens:32768` 9.5-10.8 s ->
// 6.6-7.0 s; software prefetches of the next keys' rows, a gain before, now cost a few %).
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
constexpr int64_t kQueriesPerItem = 256;  // tokens of one head per work item
// Key rows per chunk: at DeepSeek's 192 + 128 dims in float32 655 KB of K and V (the bench
// model's 96 + 64: 330 KB), with the block's running outputs (256 x d_v floats) beside them in
// a 1 MB L2 (256 to 1024 rows measured alike).
constexpr int64_t kKeysPerChunk = 512;

// Lane j = q . rows[j] (16 rows of d floats). A fixed 16, so that the accumulators stay in
// registers (a short group repeats a row and masks its scores).
MLASERVE_AVX512 __m512 key_scores(const float* q, const float* const* rows, int64_t d) {
  __m512 acc[kKeyLanes];
#pragma GCC unroll 16
  for (int64_t j = 0; j < kKeyLanes; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t c = 0; c < d; c += 16) {
    const __mmask16 valid = first_lanes16(d - c);
    const __m512 qc = _mm512_maskz_loadu_ps(valid, q + c);
#pragma GCC unroll 16
    for (int64_t j = 0; j < kKeyLanes; ++j)
      acc[j] = _mm512_fmadd_ps(qc, _mm512_maskz_loadu_ps(valid, rows[j] + c), acc[j]);
  }
  return sum_lanes(sum_quads(sum_pairs(acc[0], acc[1]), sum_pairs(acc[2], acc[3])),
                   sum_quads(sum_pairs(acc[4], acc[5]), sum_pairs(acc[6], acc[7])),
                   sum_quads(sum_pairs(acc[8], acc[9]), sum_pairs(acc[10], acc[11])),
                   sum_quads(sum_pairs(acc[12], acc[13]), sum_pairs(acc[14], acc[15])));
}

// o[0, d_v) = o * correction + sum_j p[j] * rows[j] over 16 rows (p[j] = 0 for a repeated one),
// in two chains of 8 so that the FMAs' latency overlaps.
MLASERVE_AVX512 void update_output(float* o, int64_t d_v, float correction, const float* p,
                                   const float* const* rows) {
  const __m512 corr = _mm512_set1_ps(correction);
  for (int64_t c = 0; c < d_v; c += 16) {
    const __mmask16 valid = first_lanes16(d_v - c);
    __m512 even = _mm512_mul_ps(_mm512_maskz_loadu_ps(valid, o + c), corr);
    __m512 odd = _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int64_t j = 0; j < kKeyLanes; j += 2) {
      even = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), _mm512_maskz_loadu_ps(valid, rows[j] + c), even);
      odd = _mm512_fmadd_ps(_mm512_set1_ps(p[j + 1]), _mm512_maskz_loadu_ps(valid, rows[j + 1] + c),
                            odd);
    }
    _mm512_mask_storeu_ps(o + c, valid, _mm512_add_ps(even, odd));
  }
}

// A query's online softmax so far: the running max and sum of its scores (its output, not yet
// divided by the sum, is kept beside it: attend_keys' o).
struct Running {
  float max = -INFINITY, sum = 0.0f;
};

// Folds keys [0, count) of head h (rows of k_h, v_h) into query qi's running softmax r and o.
MLASERVE_AVX512 void attend_keys(const PrefillAttention& s, const float* qi, const float* k_h,
                                 const float* v_h, const int32_t* keys, int64_t count, Running& r,
                                 float* o) {
  const __m512 scale = _mm512_set1_ps(s.scale);
  alignas(64) float p[kKeyLanes];
  const float* k_rows[kKeyLanes];
  const float* v_rows[kKeyLanes];
  for (int64_t first = 0; first < count; first += kKeyLanes) {
    const int64_t n = std::min(kKeyLanes, count - first);
    for (int64_t j = 0; j < kKeyLanes; ++j) {  // past n, the first key again (masked below)
      const int64_t key = keys[first + (j < n ? j : 0)];
      k_rows[j] = k_h + key * s.d_qk;
      v_rows[j] = v_h + key * s.d_v;
    }
    const __mmask16 lanes = first_lanes16(n);
    const __m512 score = _mm512_mul_ps(key_scores(qi, k_rows, s.d_qk), scale);
    const float new_max =
        std::max(r.max, hmax(_mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), lanes, score)));
    const float correction = std::exp(r.max - new_max);  // 0 for the first block
    const __m512 prob =
        _mm512_maskz_mov_ps(lanes, exp512(_mm512_sub_ps(score, _mm512_set1_ps(new_max))));
    r.sum = r.sum * correction + hsum(prob);
    r.max = new_max;
    _mm512_store_ps(p, prob);
    update_output(o, s.d_v, correction, p, v_rows);
  }
}

// Head h's queries [first, end), chunk by chunk of keys (each query's selection is ascending, so
// a cursor per query walks it once).
MLASERVE_AVX512 void attend_block(const PrefillAttention& s, int64_t top_k, const float* q,
                                  const float* k_h, const float* v_h, const int32_t* selected,
                                  const int32_t* counts, int64_t h, int64_t first, int64_t end,
                                  float* out) {
  const int64_t n = end - first;
  thread_local std::vector<float> o;
  thread_local std::vector<Running> running;
  thread_local std::vector<int64_t> cursor;
  o.assign(static_cast<size_t>(n * s.d_v), 0.0f);
  running.assign(static_cast<size_t>(n), Running{});
  cursor.assign(static_cast<size_t>(n), 0);
  // Query i's keys are below i + 1 <= end.
  for (int64_t chunk_end = kKeysPerChunk; chunk_end - kKeysPerChunk < end;
       chunk_end += kKeysPerChunk) {
    for (int64_t j = 0; j < n; ++j) {
      const int64_t i = first + j;
      const int32_t* keys = selected + i * top_k;
      int64_t& at = cursor[static_cast<size_t>(j)];
      int64_t stop = at;
      while (stop < counts[i] && keys[stop] < chunk_end) ++stop;
      attend_keys(s, q + (i * s.n_heads + h) * s.d_qk, k_h, v_h, keys + at, stop - at,
                  running[static_cast<size_t>(j)], o.data() + j * s.d_v);
      at = stop;
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    const float inv = 1.0f / running[static_cast<size_t>(j)].sum;
    float* dst = out + ((first + j) * s.n_heads + h) * s.d_v;
    for (int64_t c = 0; c < s.d_v; ++c) dst[c] = o[static_cast<size_t>(j * s.d_v + c)] * inv;
  }
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
    attend_block(s, top_k, q, k + h * s.n_tokens * s.d_qk, v + h * s.n_tokens * s.d_v, selected,
                 counts, h, first, std::min(s.n_tokens, first + kQueriesPerItem), out);
  });
}

}  // namespace mlaserve::kernels
