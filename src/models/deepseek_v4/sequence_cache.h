// What DeepSeek-V4 keeps of a sequence between steps, per layer: the raw rows of the last
// `sliding_window` tokens (a ring), the compressed entries made so far (and CSA's indexer keys),
// and each compressor's unfinished window as running softmax sums. Rows are stored in the
// cache's dtype (float32 or bf16); the running sums stay float32. The compressed entries live in
// pools shared by every sequence of a store, so that a copy of a sequence (a prefix snapshot, or
// a request restored from one) shares the entries it has in common instead of copying them.
#pragma once

#include <cstdint>
#include <memory>
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

// Rows that several sequences may hold: each row counts its holders and returns to the free list
// when the last one lets go. Rows never change once written (compressed entries are final).
class RowPool {
 public:
  RowPool(KvDtype dtype, int64_t dim) : rows_(dtype, dim) {}
  int32_t add(const float* row);  // a new row, held once
  void hold(int32_t row) { holders_[static_cast<size_t>(row)] += 1; }
  void let_go(int32_t row);
  KvRows view() const { return rows_.view(); }
  void read(int32_t row, float* out) const { rows_.read(row, 1, out); }
  int64_t rows_in_use() const { return rows_.rows() - static_cast<int64_t>(free_.size()); }

 private:
  RowStore rows_;
  std::vector<int32_t> holders_;
  std::vector<int32_t> free_;
};

// One sequence's list of rows of a pool, in order, each held while listed: copying the list
// holds its rows once more, destroying it lets go of them.
class PooledRows {
 public:
  PooledRows() = default;
  explicit PooledRows(std::shared_ptr<RowPool> pool) : pool_(std::move(pool)) {}
  PooledRows(const PooledRows& other);
  PooledRows& operator=(const PooledRows& other);
  PooledRows(PooledRows&& other) noexcept = default;
  PooledRows& operator=(PooledRows&& other) noexcept;
  ~PooledRows() { let_go(); }

  int64_t rows() const { return static_cast<int64_t>(ids_.size()); }
  void append(const float* row) { ids_.push_back(pool_->add(row)); }
  void truncate(int64_t n);                               // lets go of the rows after the first n
  void read(int64_t first, int64_t n, float* out) const;  // rows [first, first + n) as float32
  KvRows view() const { return pool_->view(); }           // addressed by ids()
  const int32_t* ids() const { return ids_.data(); }

 private:
  void let_go();
  std::shared_ptr<RowPool> pool_;
  std::vector<int32_t> ids_;
};

struct LayerCache {
  RowStore window;        // [sliding_window, d]: the row of position p at p % window
  PooledRows entries;     // [entries, d]
  PooledRows index_keys;  // [entries, index_head_dim] (CSA)
  CompressorState kv_state, index_state;
};

// A store's pools, one of each kind per layer (entries of head_dim, index keys of
// index_head_dim).
struct EntryPools {
  std::vector<std::shared_ptr<RowPool>> entries, index_keys;
  int64_t rows_in_use() const;
};

// What a sequence's provisional rows changed (speculative drafts, which a later step may take
// back), per layer: each compressor's state and its pool's row count from `base` on, one more
// after every row ([0]: at base; a layer without compressors keeps its [0]), and the window rows
// the provisional rows replaced, in position order. Nothing else changes that a row could take
// back: entries and keys are only appended. A logged row costs a copy of the compressor states
// (V4-Flash: ~0.5 MB over its 43 layers), so only provisional steps log.
struct UndoLayer {
  std::vector<CompressorState> kv_states, index_states;
  std::vector<int64_t> entries, index_keys;
  RowStore replaced;
};

struct UndoLog {
  int64_t base = -1;  // the first provisional position; -1: rows are final, nothing is logged
  std::vector<UndoLayer> layers;
};

struct SequenceCache {
  int64_t n_tokens = 0;     // positions [0, n_tokens) are in
  int64_t first_layer = 0;  // layers[i] is layer first_layer + i (the MTP block's: its one layer)
  std::vector<LayerCache> layers;
  UndoLog undo;

  LayerCache& layer(int64_t l) { return layers[static_cast<size_t>(l - first_layer)]; }
  // The layer's log while the sequence's rows are provisional, else null.
  UndoLayer* undo_layer(int64_t l) {
    return undo.base < 0 ? nullptr : &undo.layers[static_cast<size_t>(l - first_layer)];
  }
};

// The step about to run adds provisional rows: logs them from n_tokens on (a log already open
// goes on: the rows after its base stay provisional until a step takes them back or finalizes).
void log_provisional_rows(SequenceCache& cache);
// The rows are final: the log goes.
inline void finalize_rows(SequenceCache& cache) {
  cache.undo = {};
}
// Before a step adds rows: logged if they are provisional, else the rows so far are final.
inline void begin_rows(SequenceCache& cache, bool provisional) {
  if (provisional) {
    log_provisional_rows(cache);
  } else {
    finalize_rows(cache);
  }
}
// Whether roll_back(cache, n) can run: n == n_tokens, or n within the logged rows.
bool can_roll_back(const SequenceCache& cache, int64_t n);
// cache as it was after its first n tokens: the logged rows after them taken back, the rest
// final (the log goes; the next step's begin_rows opens one from n if it needs it).
void roll_back(SequenceCache& cache, int64_t n);

}  // namespace mlaserve::models::deepseek_v4
