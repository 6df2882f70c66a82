// What DeepSeek-V4 keeps of a sequence between steps, per layer: the raw rows of the last
// `sliding_window` tokens (a ring), the compressed entries made so far (and CSA's indexer keys),
// and each compressor's unfinished window as running softmax sums. One sequence, float32 rows:
// the paged pool of row kinds for the server comes next.
#pragma once

#include <cstdint>
#include <vector>

namespace mlaserve::models::deepseek_v4 {

// A softmax-weighted sum built one candidate at a time, per dim: after candidates (s_k, v_k),
// value() = Σ_k e^{s_k} v_k / Σ_k e^{s_k}, kept as the running max m, Σ e^{s_k - m} and
// Σ e^{s_k - m} v_k, so a compressor's window costs 3 floats per dim however long it is.
class SoftmaxSum {
 public:
  void reset(int64_t dim);
  void add(const float* score, const float* value);  // one candidate: dim scores and values
  void value(float* out) const;

 private:
  std::vector<float> max_, sum_, acc_;
};

// A compressor's unfinished entries. `own`: the candidates of the entry the current window
// completes (with overlap, the previous window's tokens are already in). `next` (overlap only):
// the current window's tokens as the following entry's previous-window candidates.
struct CompressorState {
  SoftmaxSum own, next;
};

struct LayerCache {
  std::vector<float> window;      // [sliding_window, d]: the row of position p at p % window
  std::vector<float> entries;     // [entries, d]
  std::vector<float> index_keys;  // [entries, index_head_dim] (CSA)
  CompressorState kv_state, index_state;
};

struct SequenceCache {
  int64_t n_tokens = 0;  // positions [0, n_tokens) are in
  std::vector<LayerCache> layers;
};

}  // namespace mlaserve::models::deepseek_v4
