// The lightning indexer of DeepSeek Sparse Attention (V3.2): each query's top-k keys.
//
// A query's scores are formed a block of kKeyBlock keys at a time from the block's index keys
// decoded and transposed ([head_dim, kKeyBlock]), so one AVX-512 FMA multiplies a query value into
// 16 keys at once and no score needs a horizontal sum. Every key of the call is decoded and
// transposed once, up front, into tiles all its queries read (a prefill's queries share their
// keys: transposing per query cost as much as the scoring).
// Every score goes straight to a candidate list that keeps the best top_k (TopK below), so a
// query holds O(top_k + kKeyBlock) values, never its whole row of n_kv scores. Threads take
// queries; with fewer queries than threads (decode) a query's keys are split into parts, each
// keeping its own candidates, merged at the end.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/scratch.h"
#include "kernels/avx512_util.h"
#include "kernels/cpu_isa.h"
#include "kernels/ops.h"
#include "kernels/parallel.h"
#include "kernels/reference.h"

namespace mlaserve::kernels {

void layer_norm(const float* x, const float* gamma, const float* beta, int64_t rows, int64_t dim,
                float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * dim;
    float mean = 0.0f, var = 0.0f;
    for (int64_t i = 0; i < dim; ++i) mean += in[i];
    mean /= static_cast<float>(dim);
    for (int64_t i = 0; i < dim; ++i) var += (in[i] - mean) * (in[i] - mean);
    const float inv = 1.0f / std::sqrt(var / static_cast<float>(dim) + eps);
    float* out = y + r * dim;
    for (int64_t i = 0; i < dim; ++i) out[i] = (in[i] - mean) * inv * gamma[i] + beta[i];
  }
}

void rope_half_split(float* x, int64_t n_vectors, int64_t stride, int64_t dim,
                     const float* cos_theta, const float* sin_theta) {
  const int64_t half = dim / 2;
  for (int64_t v = 0; v < n_vectors; ++v) {
    float* vec = x + v * stride;
    for (int64_t i = 0; i < half; ++i) {
      const float a = vec[i], b = vec[i + half];
      vec[i] = a * cos_theta[i] - b * sin_theta[i];
      vec[i + half] = a * sin_theta[i] + b * cos_theta[i];
    }
  }
}

namespace {

constexpr int64_t kKeyBlock = 32;          // keys per scored block: two 16-lane vectors
constexpr int64_t kMinKeysPerPart = 1024;  // below this, splitting a query's keys costs more
constexpr int64_t kMaxRowPathQueries = 8;  // up to this many queries score the stored rows

// A scored key; `better` orders by score, then by the earlier position (the reference's rule).
struct Candidate {
  float score;
  int32_t pos;
};
bool better(const Candidate& a, const Candidate& b) {
  return a.score > b.score || (a.score == b.score && a.pos < b.pos);
}

// Candidates as two arrays (16 scores per vector instruction), with 16 values of slack past
// `size` for the full-vector stores of a compaction.
struct Candidates {
  std::vector<float> scores;
  std::vector<int32_t> positions;
  int64_t size = 0;

  void reset(int64_t capacity) {
    scores.resize(static_cast<size_t>(capacity + 16));
    positions.resize(static_cast<size_t>(capacity + 16));
    size = 0;
  }
  void push(Candidate c) {
    scores[static_cast<size_t>(size)] = c.score;
    positions[static_cast<size_t>(size++)] = c.pos;
  }
};

// Keeps the best k of c (by `better`; k < c.size) in the order they had and returns the worst of
// them: every candidate above the k-th best score (kth_largest) and the first of those equal
// to it, left-packed 16 at a time. Candidates pushed in ascending position (the scoring order)
// so stay ascending: earlier positions win ties as `better` says, and the final selection needs
// no sort. (std::nth_element on the pairs and a sort by position took 35 % of a 32k-key indexer
// call.)
MLASERVE_AVX512 Candidate keep_best_in_order(Candidates& c, int64_t k) {
  const KthLargest best = kth_largest(c.scores.data(), c.size, k);
  const float kth = best.value;
  const __m512 t = _mm512_set1_ps(kth);
  // NaN scores never enter (their compares are false); a k-th best of -inf is then met only by
  // the -inf scores, which is all `better` orders among them anyway.
  int64_t ties = k - best.greater, kept = 0;
  for (int64_t i = 0; i < c.size; i += 16) {
    const __mmask16 valid = first_lanes16(c.size - i);
    const __m512 v = _mm512_loadu_ps(c.scores.data() + i);
    const __m512i pos = _mm512_loadu_si512(c.positions.data() + i);
    uint32_t equal = _mm512_mask_cmp_ps_mask(valid, v, t, _CMP_EQ_OQ);
    while (__builtin_popcount(equal) > ties) equal &= ~(1u << (31 - __builtin_clz(equal)));
    ties -= __builtin_popcount(equal);
    const auto keep =
        static_cast<__mmask16>(_mm512_mask_cmp_ps_mask(valid, v, t, _CMP_GT_OQ) | equal);
    _mm512_storeu_ps(c.scores.data() + kept, _mm512_maskz_compress_ps(keep, v));
    _mm512_storeu_si512(c.positions.data() + kept, _mm512_maskz_compress_epi32(keep, pos));
    kept += __builtin_popcount(keep);
  }
  c.size = kept;
  // The worst kept: the last one equal to the k-th best score (none only where NaN scores had
  // to fill the k: then every later score beats the bar).
  for (int64_t i = kept - 1; i >= 0; --i)
    if (c.scores[static_cast<size_t>(i)] == kth) return {kth, c.positions[static_cast<size_t>(i)]};
  return {-INFINITY, std::numeric_limits<int32_t>::max()};
}

// The best k candidates seen so far, pushed in ascending position. Candidates collect in a
// buffer of 4k; when it fills, the best k are kept (keep_best_in_order) and the k-th becomes the
// bar a new one must beat, so most keys of a long context cost one comparison (a vector compare
// of 32 scores in score_range). With keys in random order about k ln(n / 4k) pass the bar after
// the first compaction: one or two compactions per query at 32k keys (a buffer of 2k made
// three, 11 % of a 32k prefill).
class TopK {
 public:
  void reset(int64_t k) {
    k_ = k;
    items_.reset(kBufferTimesK * k);
    has_bar_ = false;
  }
  void push(Candidate c) {
    if (has_bar_ && !better(c, bar_)) return;
    items_.push(c);
    if (items_.size == kBufferTimesK * k_) keep_best();
  }
  // The score a candidate must exceed to enter (equal scores only from earlier positions, which
  // a range scored in order never brings later); -inf before the first compaction.
  float bar() const { return has_bar_ ? bar_.score : -INFINITY; }
  // The best min(k, seen) candidates, in ascending position.
  Candidates& best() {
    keep_best();
    return items_;
  }

 private:
  void keep_best() {
    if (items_.size <= k_) return;
    bar_ = keep_best_in_order(items_, k_);
    has_bar_ = true;
  }

  static constexpr int64_t kBufferTimesK = 4;
  int64_t k_ = 0;
  Candidates items_;
  Candidate bar_{};
  bool has_bar_ = false;
};

// The keys of slots[0, n) as tiles of kKeyBlock keys, each [head_dim, kKeyBlock] (keys past n
// zero), decoded from the pool's dtype.
void transpose_keys(const KvRows& keys, const int32_t* slots, int64_t n, int64_t head_dim,
                    float* tiles) {
  const int64_t blocks = (n + kKeyBlock - 1) / kKeyBlock;
  for_each_item(blocks, n * head_dim >= (int64_t{1} << 16), [&](int64_t b) {
    thread_local std::vector<float> row;
    row.resize(static_cast<size_t>(head_dim));
    float* tile = tiles + b * head_dim * kKeyBlock;
    for (int64_t j = 0; j < kKeyBlock; ++j) {
      const int64_t key = b * kKeyBlock + j;
      if (key < n) {
        decode_kv_row(keys, slots[key], row.data());
      } else {
        std::fill(row.begin(), row.end(), 0.0f);
      }
      for (int64_t d = 0; d < head_dim; ++d) tile[d * kKeyBlock + j] = row[static_cast<size_t>(d)];
    }
  });
}

// s += sum over heads h0..h0+kHeads of w[h] * relu(a[h]), for the block's 32 keys (a0: keys
// 0-15, a1: keys 16-31): the head sums of score_heads and score_heads_bf16 into a block's scores.
template <int kHeads>
MLASERVE_AVX512 inline __attribute__((always_inline)) void add_weighted_relu(
    const float* w, int64_t h0, const __m512 (&a0)[kHeads], const __m512 (&a1)[kHeads], __m512& s0,
    __m512& s1) {
  const __m512 zero = _mm512_setzero_ps();
  for (int h = 0; h < kHeads; ++h) {
    const __m512 wh = _mm512_set1_ps(w[h0 + h]);
    s0 = _mm512_fmadd_ps(wh, _mm512_max_ps(a0[h], zero), s0);
    s1 = _mm512_fmadd_ps(wh, _mm512_max_ps(a1[h], zero), s1);
  }
}

// Adds sum_{h in [h0, h0 + kHeads)} w[h] * relu(q[h] . key_j) for the block's 32 keys to s0
// (keys 0-15) and s1 (16-31): kHeads heads at a time, 2 * kHeads independent FMA chains.
template <int kHeads>
MLASERVE_AVX512 inline __attribute__((always_inline)) void score_heads(const float* q,
                                                                       const float* w,
                                                                       const float* tile,
                                                                       int64_t h0, int64_t head_dim,
                                                                       __m512& s0, __m512& s1) {
  const __m512 zero = _mm512_setzero_ps();
  __m512 a0[kHeads], a1[kHeads];
  for (int h = 0; h < kHeads; ++h) a0[h] = a1[h] = zero;
  const float* qh = q + h0 * head_dim;
  for (int64_t d = 0; d < head_dim; ++d) {
    const __m512 k0 = _mm512_loadu_ps(tile + d * kKeyBlock);
    const __m512 k1 = _mm512_loadu_ps(tile + d * kKeyBlock + 16);
    for (int h = 0; h < kHeads; ++h) {
      const __m512 qd = _mm512_set1_ps(qh[h * head_dim + d]);
      a0[h] = _mm512_fmadd_ps(qd, k0, a0[h]);
      a1[h] = _mm512_fmadd_ps(qd, k1, a1[h]);
    }
  }
  add_weighted_relu<kHeads>(w, h0, a0, a1, s0, s1);
}

// out[j] = sum_h w[h] * relu(q[h] . key_j) for the block's 32 keys, four heads at a time (each
// pair of key loads feeds eight FMAs).
MLASERVE_AVX512 void score_block(const float* q, const float* w, const float* tile, int64_t n_heads,
                                 int64_t head_dim, float* out) {
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int64_t h = 0;
  for (; h + 4 <= n_heads; h += 4) score_heads<4>(q, w, tile, h, head_dim, s0, s1);
  for (; h < n_heads; ++h) score_heads<1>(q, w, tile, h, head_dim, s0, s1);
  _mm512_storeu_ps(out, s0);
  _mm512_storeu_ps(out + 16, s1);
}

// The bf16 form of the tiles (indexer_scores_in_bf16): per pair of dims p, each key's two values
// side by side, [pairs][kKeyBlock][2], so one 512-bit load holds 16 keys' pairs for vdpbf16ps.
// Read from a bf16 pool as stored; an odd head_dim's last pair ends in a zero.
int64_t dim_pairs(int64_t head_dim) {
  return (head_dim + 1) / 2;
}

void transpose_keys_bf16(const KvRows& keys, const int32_t* slots, int64_t n, int64_t head_dim,
                         bf16* tiles) {
  const int64_t blocks = (n + kKeyBlock - 1) / kKeyBlock, pairs = dim_pairs(head_dim);
  for_each_item(blocks, n * head_dim >= (int64_t{1} << 16), [&](int64_t b) {
    bf16* tile = tiles + b * pairs * kKeyBlock * 2;
    for (int64_t j = 0; j < kKeyBlock; ++j) {
      const int64_t key = b * kKeyBlock + j;
      const auto* row = key < n ? reinterpret_cast<const bf16*>(keys.row(slots[key])) : nullptr;
      for (int64_t d = 0; d < 2 * pairs; ++d)
        tile[((d / 2) * kKeyBlock + j) * 2 + d % 2] = row && d < head_dim ? row[d] : bf16{};
    }
  });
}

// score_heads with bf16 tiles and q as bf16 pairs (q2: [heads][pairs] of two bf16 each).
template <int kHeads>
MLASERVE_AVX512_BF16 inline __attribute__((always_inline)) void score_heads_bf16(
    const uint32_t* q2, const float* w, const bf16* tile, int64_t h0, int64_t pairs, __m512& s0,
    __m512& s1) {
  const __m512 zero = _mm512_setzero_ps();
  __m512 a0[kHeads], a1[kHeads];
  for (int h = 0; h < kHeads; ++h) a0[h] = a1[h] = zero;
  const uint32_t* qh = q2 + h0 * pairs;
  for (int64_t p = 0; p < pairs; ++p) {
    const auto k0 = (__m512bh)_mm512_loadu_si512(tile + p * kKeyBlock * 2);
    const auto k1 = (__m512bh)_mm512_loadu_si512(tile + p * kKeyBlock * 2 + 32);
    for (int h = 0; h < kHeads; ++h) {
      const auto qp = (__m512bh)_mm512_set1_epi32(static_cast<int>(qh[h * pairs + p]));
      a0[h] = _mm512_dpbf16_ps(a0[h], k0, qp);
      a1[h] = _mm512_dpbf16_ps(a1[h], k1, qp);
    }
  }
  add_weighted_relu<kHeads>(w, h0, a0, a1, s0, s1);
}

MLASERVE_AVX512_BF16 void score_block_bf16(const uint32_t* q2, const float* w, const bf16* tile,
                                           int64_t n_heads, int64_t pairs, float* out) {
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int64_t h = 0;
  for (; h + 4 <= n_heads; h += 4) score_heads_bf16<4>(q2, w, tile, h, pairs, s0, s1);
  for (; h < n_heads; ++h) score_heads_bf16<1>(q2, w, tile, h, pairs, s0, s1);
  _mm512_storeu_ps(out, s0);
  _mm512_storeu_ps(out + 16, s1);
}

// One query's q as bf16 pairs for score_block_bf16: [heads][pairs].
void pack_query_pairs(const float* q, int64_t n_heads, int64_t head_dim, uint32_t* q2) {
  const int64_t pairs = dim_pairs(head_dim);
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t p = 0; p < pairs; ++p) {
      const int64_t d = 2 * p;
      const uint32_t lo = f32_to_bf16(q[h * head_dim + d]);
      const uint32_t hi = d + 1 < head_dim ? f32_to_bf16(q[h * head_dim + d + 1]) : 0;
      q2[h * pairs + p] = lo | hi << 16;
    }
  }
}

// Per-thread scratch: a block's scores and the candidates.
struct IndexerScratch {
  float scores[kKeyBlock];
  TopK top;
};

IndexerScratch& scratch() {
  thread_local IndexerScratch s;
  return s;
}

// Pushes the block's scores (keys first .. first + n) that beat the bar; a vector compare skips
// the rest.
MLASERVE_AVX512 void push_above_bar(IndexerScratch& scr, int64_t first, int64_t n) {
  const __m512 bar = _mm512_set1_ps(scr.top.bar());
  uint32_t above = static_cast<uint32_t>(
      _mm512_cmp_ps_mask(_mm512_loadu_ps(scr.scores), bar, _CMP_GT_OQ) |
      (static_cast<uint32_t>(_mm512_cmp_ps_mask(_mm512_loadu_ps(scr.scores + 16), bar, _CMP_GT_OQ))
       << 16));
  if (n < kKeyBlock) above &= (uint32_t{1} << n) - 1;
  for (; above != 0; above &= above - 1) {
    const int j = __builtin_ctz(above);
    scr.top.push({scr.scores[j], static_cast<int32_t>(first + j)});
  }
}

// Scores positions [begin, end) (begin a block boundary) for one query into top (reset by the
// caller): score_block(first, out) writes the 32 scores of the block starting at key `first`.
template <typename ScoreBlock>
void score_range(int64_t begin, int64_t end, IndexerScratch& scr, ScoreBlock score_block) {
  for (int64_t first = begin; first < end; first += kKeyBlock) {
    score_block(first, scr.scores);
    push_above_bar(scr, first, std::min(kKeyBlock, end - first));
  }
}

// Scores positions [begin, end) for one query straight from the stored key rows, with the heads
// as vector lanes: per key, sum_d q[:, d] * key[d] for 16 heads in one FMA chain, then
// w . relu(.) summed across lanes. Nothing is transposed, so a decode (one query over the whole
// context) reads each key once at its stored size; four keys at a time keep four chains in flight.
MLASERVE_AVX512 void score_rows(const IndexerTopk& s, const float* q, const float* w,
                                const KvRows& keys, const int32_t* kv_slots, int64_t begin,
                                int64_t end, IndexerScratch& scr) {
  constexpr int64_t kLanes = 16, kKeys = 4;
  const int64_t groups = (s.n_heads + kLanes - 1) / kLanes, dim = s.head_dim;
  thread_local std::vector<float> qt, wv, rows;
  qt.assign(static_cast<size_t>(groups * dim * kLanes), 0.0f);  // [group][d][lane]
  wv.assign(static_cast<size_t>(groups * kLanes), 0.0f);        // padded heads weigh 0
  rows.resize(static_cast<size_t>(kKeys * dim));
  for (int64_t h = 0; h < s.n_heads; ++h) {
    wv[static_cast<size_t>(h)] = w[h];
    for (int64_t d = 0; d < dim; ++d)
      qt[static_cast<size_t>(((h / kLanes) * dim + d) * kLanes + h % kLanes)] = q[h * dim + d];
  }
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t first = begin; first < end; first += kKeys) {
    const int64_t n = std::min(kKeys, end - first);
    const float* key[kKeys];
    for (int64_t j = 0; j < kKeys; ++j) {
      float* row = rows.data() + j * dim;
      if (j >= n) {
        key[j] = key[0];
      } else if (keys.dtype == KvDtype::Float32) {
        key[j] = reinterpret_cast<const float*>(keys.row(kv_slots[first + j]));
      } else if (keys.dtype == KvDtype::BFloat16) {
        widen_bf16_row(reinterpret_cast<const bf16*>(keys.row(kv_slots[first + j])), dim, row);
        key[j] = row;
      } else {
        decode_kv_row(keys, kv_slots[first + j], row);
        key[j] = row;
      }
    }
    __m512 total[kKeys] = {zero, zero, zero, zero};
    for (int64_t g = 0; g < groups; ++g) {
      __m512 acc[kKeys] = {zero, zero, zero, zero};
      const float* qg = qt.data() + g * dim * kLanes;
      for (int64_t d = 0; d < dim; ++d) {
        const __m512 qd = _mm512_loadu_ps(qg + d * kLanes);
        for (int64_t j = 0; j < kKeys; ++j)
          acc[j] = _mm512_fmadd_ps(qd, _mm512_set1_ps(key[j][d]), acc[j]);
      }
      const __m512 wg = _mm512_loadu_ps(wv.data() + g * kLanes);
      for (int64_t j = 0; j < kKeys; ++j)
        total[j] = _mm512_fmadd_ps(wg, _mm512_max_ps(acc[j], zero), total[j]);
    }
    for (int64_t j = 0; j < n; ++j) scr.top.push({hsum(total[j]), static_cast<int32_t>(first + j)});
  }
}

// Writes the chosen positions of a query (best: in ascending position, as TopK keeps them).
void write_selection(const Candidates& best, int32_t* selected, int32_t* count) {
  std::copy(best.positions.begin(), best.positions.begin() + best.size, selected);
  *count = static_cast<int32_t>(best.size);
}

}  // namespace

bool indexer_scores_in_bf16(const IndexerTopk& s, const KvRows& keys) {
  return s.bf16_activations && keys.dtype == KvDtype::BFloat16 && cpu_has_avx512_bf16() &&
         gemm_path(1) == GemmPath::Bf16Dot;
}

void indexer_topk(const IndexerTopk& s, const float* q, const float* weights, const KvRows& keys,
                  const int32_t* kv_slots, int32_t* selected, int32_t* counts) {
  if (!cpu_has_avx512()) return ref::indexer_topk(s, q, weights, keys, kv_slots, selected, counts);
  const auto visible = [&](int64_t i) { return s.n_kv - s.n_q + i + 1; };
  const auto query = [&](int64_t i) { return q + i * s.n_heads * s.head_dim; };
  const auto query_weights = [&](int64_t i) { return weights + i * s.n_heads; };
  // A query that sees at most top_k keys takes them all, unscored.
  const auto take_all = [&](int64_t i) {
    for (int64_t j = 0; j < visible(i); ++j) selected[i * s.top_k + j] = static_cast<int32_t>(j);
    counts[i] = static_cast<int32_t>(visible(i));
  };
  // With bf16 scores q is rounded to bf16 once here, for every path (the reference rounds alike).
  const bool in_bf16 = indexer_scores_in_bf16(s, keys);
  thread_local std::vector<float> rounded_q;
  if (in_bf16) {
    float* rounded = take(rounded_q, s.n_q * s.n_heads * s.head_dim);
    for (int64_t i = 0; i < s.n_q * s.n_heads * s.head_dim; ++i)
      rounded[i] = bf16_to_f32(f32_to_bf16(q[i]));
    q = rounded;
  }
  // Few queries (decodes, a speculative verify): each scores the stored rows itself. More (a
  // prefill chunk): every key is transposed once into tiles that all of them read, as bf16 pairs
  // for vdpbf16ps with bf16 scores.
  const bool from_rows = s.n_q <= kMaxRowPathQueries;
  const int64_t blocks = (s.n_kv + kKeyBlock - 1) / kKeyBlock, pairs = dim_pairs(s.head_dim);
  thread_local std::vector<float> tile_storage;
  thread_local std::vector<bf16> tile_storage_b16;
  float* tiles = nullptr;
  bf16* tiles_b16 = nullptr;
  if (!from_rows && in_bf16) {
    tiles_b16 = take(tile_storage_b16, blocks * kKeyBlock * 2 * pairs);
    transpose_keys_bf16(keys, kv_slots, s.n_kv, s.head_dim, tiles_b16);
  } else if (!from_rows) {
    tiles = take(tile_storage, blocks * kKeyBlock * s.head_dim);
    transpose_keys(keys, kv_slots, s.n_kv, s.head_dim, tiles);
  }
  const auto score = [&](int64_t i, int64_t begin, int64_t end, IndexerScratch& scr) {
    const float* qi = query(i);
    const float* wi = query_weights(i);
    if (from_rows) return score_rows(s, qi, wi, keys, kv_slots, begin, end, scr);
    if (tiles) {
      return score_range(begin, end, scr, [&](int64_t first, float* out) {
        score_block(qi, wi, tiles + first * s.head_dim, s.n_heads, s.head_dim, out);
      });
    }
    thread_local std::vector<uint32_t> q2;
    q2.resize(static_cast<size_t>(s.n_heads * pairs));
    pack_query_pairs(qi, s.n_heads, s.head_dim, q2.data());
    score_range(begin, end, scr, [&](int64_t first, float* out) {
      score_block_bf16(q2.data(), wi, tiles_b16 + first * 2 * pairs, s.n_heads, pairs, out);
    });
  };
  const int64_t threads = parallel_threads();
  const int64_t parts = std::clamp<int64_t>(
      std::min((2 * threads + s.n_q - 1) / s.n_q, s.n_kv / kMinKeysPerPart), 1, 2 * threads);
  const bool parallel = s.n_q * s.n_kv * s.n_heads * s.head_dim >= (int64_t{1} << 20);
  if (parts == 1) {
    for_each_item(s.n_q, parallel, [&](int64_t i) {
      if (visible(i) <= s.top_k) return take_all(i);
      IndexerScratch& scr = scratch();
      scr.top.reset(s.top_k);
      score(i, 0, visible(i), scr);
      write_selection(scr.top.best(), selected + i * s.top_k, counts + i);
    });
    return;
  }
  // Few queries, long contexts: each (query, part) item keeps the best of its key range.
  std::vector<Candidates> part_best(static_cast<size_t>(s.n_q * parts));
  for_each_item(s.n_q * parts, parallel, [&](int64_t item) {
    const int64_t i = item / parts, part = item % parts, n = visible(i);
    if (n <= s.top_k) return;
    IndexerScratch& scr = scratch();
    scr.top.reset(s.top_k);
    // Parts start on block boundaries.
    const int64_t per_part = (n / parts + kKeyBlock - 1) / kKeyBlock * kKeyBlock;
    score(i, std::min(n, part * per_part),
          part + 1 == parts ? n : std::min(n, (part + 1) * per_part), scr);
    part_best[static_cast<size_t>(item)] = scr.top.best();
  });
  for (int64_t i = 0; i < s.n_q; ++i) {
    if (visible(i) <= s.top_k) {
      take_all(i);
      continue;
    }
    // The parts' ranges follow one another, so their lists joined are in ascending position.
    Candidates all;
    all.reset(parts * s.top_k);
    for (int64_t part = 0; part < parts; ++part) {
      const Candidates& one = part_best[static_cast<size_t>(i * parts + part)];
      for (int64_t j = 0; j < one.size; ++j)
        all.push({one.scores[static_cast<size_t>(j)], one.positions[static_cast<size_t>(j)]});
    }
    if (all.size > s.top_k) keep_best_in_order(all, s.top_k);
    write_selection(all, selected + i * s.top_k, counts + i);
  }
}

}  // namespace mlaserve::kernels
