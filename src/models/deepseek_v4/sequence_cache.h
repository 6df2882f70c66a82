// What DeepSeek-V4 keeps of a sequence between steps, per layer: the raw rows of the last
// `sliding_window` tokens (a ring), the compressed entries made so far (and CSA's indexer keys),
// and each compressor's unfinished window as running softmax sums. Rows are stored in the
// cache's dtype (float32 or bf16); the running sums stay float32.
#pragma once

#include <cstdint>
#include <vector>

#include "core/kv_dtype.h"

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

// DeepSeek-V4's rows are float32 or bf16; fp8_e4m3 (V3's per-row scales) fails by name.
void check_row_dtype(KvDtype dtype);

// Rows of `dim` values in a KV dtype (float32 or bf16): written as float32, read back as such.
class RowStore {
 public:
  RowStore() = default;
  RowStore(KvDtype dtype, int64_t dim, int64_t rows = 0);
  int64_t rows() const { return static_cast<int64_t>(bytes_.size()) / row_bytes_; }
  int64_t dim() const { return dim_; }
  KvDtype dtype() const { return dtype_; }
  void append(const float* row);
  void put(int64_t i, const float* row);
  void read(int64_t first, int64_t n, float* out) const;  // rows [first, first + n) as float32
  KvRows view() const { return {dtype_, dim_, bytes_.data(), nullptr}; }
  size_t bytes() const { return bytes_.size(); }

 private:
  KvDtype dtype_ = KvDtype::Float32;
  int64_t dim_ = 0, row_bytes_ = 1;
  std::vector<uint8_t> bytes_;
};

struct LayerCache {
  RowStore window;      // [sliding_window, d]: the row of position p at p % window
  RowStore entries;     // [entries, d]
  RowStore index_keys;  // [entries, index_head_dim] (CSA)
  CompressorState kv_state, index_state;
};

struct SequenceCache {
  int64_t n_tokens = 0;  // positions [0, n_tokens) are in
  std::vector<LayerCache> layers;
};

}  // namespace mlaserve::models::deepseek_v4
