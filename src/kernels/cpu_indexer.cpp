// The lightning indexer of DeepSeek Sparse Attention (V3.2): each query's top-k keys.
//
// A query's scores are formed a block of kKeyBlock keys at a time: the block's index keys are
// decoded from the pool into a small tile stored transposed ([head_dim, kKeyBlock]), so one
// AVX-512 FMA multiplies a query value into 16 keys at once and no score needs a horizontal sum.
// Every score goes straight to a candidate list that keeps the best top_k (TopK below), so a
// query holds O(top_k + kKeyBlock) values, never its whole row of n_kv scores. Threads take
// queries; with fewer queries than threads (decode) a query's keys are split into parts, each
// keeping its own candidates, merged at the end.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

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

// A scored key; `better` orders by score, then by the earlier position (the reference's rule).
struct Candidate {
  float score;
  int32_t pos;
};
bool better(const Candidate& a, const Candidate& b) {
  return a.score > b.score || (a.score == b.score && a.pos < b.pos);
}

// The best k candidates seen so far. Candidates collect in a buffer of 2k; when it fills, the
// best k are kept (nth_element) and the k-th becomes the bar a new one must beat, so most keys
// of a long context cost one comparison.
class TopK {
 public:
  void reset(int64_t k) {
    k_ = k;
    items_.clear();
    items_.reserve(static_cast<size_t>(2 * k));
    has_bar_ = false;
  }
  void push(Candidate c) {
    if (has_bar_ && !better(c, bar_)) return;
    items_.push_back(c);
    if (static_cast<int64_t>(items_.size()) == 2 * k_) keep_best();
  }
  // The best min(k, seen) candidates, in no particular order.
  std::vector<Candidate>& best() {
    keep_best();
    return items_;
  }

 private:
  void keep_best() {
    if (static_cast<int64_t>(items_.size()) <= k_) return;
    std::nth_element(items_.begin(), items_.begin() + (k_ - 1), items_.end(), better);
    items_.resize(static_cast<size_t>(k_));
    bar_ = items_.back();  // the k-th best after nth_element
    has_bar_ = true;
  }

  int64_t k_ = 0;
  std::vector<Candidate> items_;
  Candidate bar_{};
  bool has_bar_ = false;
};

// The kv tile of one block: [head_dim, kKeyBlock], keys past the block's end zero.
void load_block_transposed(const KvRows& keys, const int32_t* slots, int64_t n, int64_t head_dim,
                           float* row, float* tile) {
  for (int64_t j = 0; j < kKeyBlock; ++j) {
    if (j < n) {
      decode_kv_row(keys, slots[j], row);
    } else {
      std::fill(row, row + head_dim, 0.0f);
    }
    for (int64_t d = 0; d < head_dim; ++d) tile[d * kKeyBlock + j] = row[d];
  }
}

// out[j] = sum_h w[h] * relu(q[h] . key_j) for the block's 32 keys; heads two at a time, so
// four independent FMA chains are in flight.
MLASERVE_AVX512 void score_block(const float* q, const float* w, const float* tile, int64_t n_heads,
                                 int64_t head_dim, float* out) {
  const __m512 zero = _mm512_setzero_ps();
  __m512 s0 = zero, s1 = zero;
  int64_t h = 0;
  for (; h + 2 <= n_heads; h += 2) {
    const float* qa = q + h * head_dim;
    const float* qb = qa + head_dim;
    __m512 a0 = zero, a1 = zero, b0 = zero, b1 = zero;
    for (int64_t d = 0; d < head_dim; ++d) {
      const __m512 k0 = _mm512_loadu_ps(tile + d * kKeyBlock);
      const __m512 k1 = _mm512_loadu_ps(tile + d * kKeyBlock + 16);
      const __m512 va = _mm512_set1_ps(qa[d]), vb = _mm512_set1_ps(qb[d]);
      a0 = _mm512_fmadd_ps(va, k0, a0);
      a1 = _mm512_fmadd_ps(va, k1, a1);
      b0 = _mm512_fmadd_ps(vb, k0, b0);
      b1 = _mm512_fmadd_ps(vb, k1, b1);
    }
    const __m512 wa = _mm512_set1_ps(w[h]), wb = _mm512_set1_ps(w[h + 1]);
    s0 = _mm512_fmadd_ps(wa, _mm512_max_ps(a0, zero), s0);
    s1 = _mm512_fmadd_ps(wa, _mm512_max_ps(a1, zero), s1);
    s0 = _mm512_fmadd_ps(wb, _mm512_max_ps(b0, zero), s0);
    s1 = _mm512_fmadd_ps(wb, _mm512_max_ps(b1, zero), s1);
  }
  for (; h < n_heads; ++h) {
    const float* qa = q + h * head_dim;
    __m512 a0 = zero, a1 = zero;
    for (int64_t d = 0; d < head_dim; ++d) {
      const __m512 va = _mm512_set1_ps(qa[d]);
      a0 = _mm512_fmadd_ps(va, _mm512_loadu_ps(tile + d * kKeyBlock), a0);
      a1 = _mm512_fmadd_ps(va, _mm512_loadu_ps(tile + d * kKeyBlock + 16), a1);
    }
    const __m512 wa = _mm512_set1_ps(w[h]);
    s0 = _mm512_fmadd_ps(wa, _mm512_max_ps(a0, zero), s0);
    s1 = _mm512_fmadd_ps(wa, _mm512_max_ps(a1, zero), s1);
  }
  _mm512_storeu_ps(out, s0);
  _mm512_storeu_ps(out + 16, s1);
}

// Per-thread scratch: a decoded row, the block's tile, its scores and the candidates.
struct IndexerScratch {
  std::vector<float> row, tile, scores;
  TopK top;
};

IndexerScratch& scratch(int64_t head_dim) {
  thread_local IndexerScratch s;
  s.row.resize(static_cast<size_t>(head_dim));
  s.tile.resize(static_cast<size_t>(head_dim * kKeyBlock));
  s.scores.resize(kKeyBlock);
  return s;
}

// Scores positions [begin, end) for query i into top (reset by the caller).
void score_range(const IndexerTopk& s, const float* q, const float* w, const KvRows& keys,
                 const int32_t* kv_slots, int64_t begin, int64_t end, IndexerScratch& scr) {
  for (int64_t first = begin; first < end; first += kKeyBlock) {
    const int64_t n = std::min(kKeyBlock, end - first);
    load_block_transposed(keys, kv_slots + first, n, s.head_dim, scr.row.data(), scr.tile.data());
    score_block(q, w, scr.tile.data(), s.n_heads, s.head_dim, scr.scores.data());
    for (int64_t j = 0; j < n; ++j)
      scr.top.push({scr.scores[static_cast<size_t>(j)], static_cast<int32_t>(first + j)});
  }
}

// Writes the chosen positions of a query, ascending.
void write_selection(std::vector<Candidate>& best, int32_t* selected, int32_t* count) {
  std::sort(best.begin(), best.end(),
            [](const Candidate& a, const Candidate& b) { return a.pos < b.pos; });
  for (size_t j = 0; j < best.size(); ++j) selected[j] = best[j].pos;
  *count = static_cast<int32_t>(best.size());
}

}  // namespace

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
  const int64_t threads = parallel_threads();
  const int64_t parts = std::clamp<int64_t>(
      std::min((2 * threads + s.n_q - 1) / s.n_q, s.n_kv / kMinKeysPerPart), 1, 2 * threads);
  const bool parallel = s.n_q * s.n_kv * s.n_heads * s.head_dim >= (int64_t{1} << 20);
  if (parts == 1) {
    for_each_item(s.n_q, parallel, [&](int64_t i) {
      if (visible(i) <= s.top_k) return take_all(i);
      IndexerScratch& scr = scratch(s.head_dim);
      scr.top.reset(s.top_k);
      score_range(s, query(i), query_weights(i), keys, kv_slots, 0, visible(i), scr);
      write_selection(scr.top.best(), selected + i * s.top_k, counts + i);
    });
    return;
  }
  // Few queries, long contexts: each (query, part) item keeps the best of its key range.
  std::vector<std::vector<Candidate>> part_best(static_cast<size_t>(s.n_q * parts));
  for_each_item(s.n_q * parts, parallel, [&](int64_t item) {
    const int64_t i = item / parts, part = item % parts, n = visible(i);
    if (n <= s.top_k) return;
    IndexerScratch& scr = scratch(s.head_dim);
    scr.top.reset(s.top_k);
    score_range(s, query(i), query_weights(i), keys, kv_slots, n * part / parts,
                n * (part + 1) / parts, scr);
    part_best[static_cast<size_t>(item)] = scr.top.best();
  });
  for (int64_t i = 0; i < s.n_q; ++i) {
    if (visible(i) <= s.top_k) {
      take_all(i);
      continue;
    }
    std::vector<Candidate>& all = part_best[static_cast<size_t>(i * parts)];
    for (int64_t part = 1; part < parts; ++part) {
      const auto& more = part_best[static_cast<size_t>(i * parts + part)];
      all.insert(all.end(), more.begin(), more.end());
    }
    const auto k = static_cast<ptrdiff_t>(s.top_k);
    std::nth_element(all.begin(), all.begin() + (k - 1), all.end(), better);
    all.resize(static_cast<size_t>(k));
    write_selection(all, selected + i * s.top_k, counts + i);
  }
}

}  // namespace mlaserve::kernels
