#include "models/deepseek_v4/sequence_cache.h"

#include <algorithm>

#include "core/error.h"

namespace mlaserve::models::deepseek_v4 {

void check_row_dtype(KvDtype dtype) {
  if (dtype == KvDtype::Fp8E4m3)
    fail("DeepSeek-V4 keeps its KV rows in float32 or bfloat16 (--kv-cache-dtype), not fp8_e4m3");
}

RowStore::RowStore(KvDtype dtype, int64_t dim, int64_t rows)
    : dtype_(dtype),
      dim_(dim),
      row_bytes_(kv_value_bytes(dtype) * dim),
      bytes_(static_cast<size_t>(rows * row_bytes_)) {
  check_row_dtype(dtype);
}

void RowStore::append(const float* row) {
  bytes_.resize(bytes_.size() + static_cast<size_t>(row_bytes_));
  put(rows() - 1, row);
}

void RowStore::put(int64_t i, const float* row) {
  encode_kv_row(dtype_, row, dim_, bytes_.data() + i * row_bytes_, nullptr);
}

void RowStore::read(int64_t first, int64_t n, float* out) const {
  const KvRows rows = view();
  for (int64_t i = 0; i < n; ++i) decode_kv_row(rows, first + i, out + i * dim_);
}

int32_t RowPool::add(const float* row) {
  if (free_.empty()) {
    rows_.append(row);
    holders_.push_back(1);
    return static_cast<int32_t>(rows_.rows() - 1);
  }
  const int32_t id = free_.back();
  free_.pop_back();
  rows_.put(id, row);
  holders_[static_cast<size_t>(id)] = 1;
  return id;
}

void RowPool::let_go(int32_t row) {
  if (--holders_[static_cast<size_t>(row)] == 0) free_.push_back(row);
}

PooledRows::PooledRows(const PooledRows& other) : pool_(other.pool_), ids_(other.ids_) {
  for (int32_t id : ids_) pool_->hold(id);
}

PooledRows& PooledRows::operator=(const PooledRows& other) {
  if (this != &other) *this = PooledRows(other);
  return *this;
}

PooledRows& PooledRows::operator=(PooledRows&& other) noexcept {
  if (this != &other) {
    let_go();
    pool_ = std::move(other.pool_);
    ids_ = std::move(other.ids_);
  }
  return *this;
}

void PooledRows::let_go() {
  for (int32_t id : ids_) pool_->let_go(id);
  ids_.clear();
}

void PooledRows::read(int64_t first, int64_t n, float* out) const {
  for (int64_t i = 0; i < n; ++i)
    pool_->read(ids_[static_cast<size_t>(first + i)], out + i * pool_->view().row_dim);
}

int64_t EntryPools::rows_in_use() const {
  int64_t n = 0;
  for (const auto* kind : {&entries, &index_keys})
    for (const auto& pool : *kind) n += pool->rows_in_use();
  return n;
}

void PooledRows::truncate(int64_t n) {
  for (size_t i = static_cast<size_t>(n); i < ids_.size(); ++i) pool_->let_go(ids_[i]);
  ids_.resize(std::min(ids_.size(), static_cast<size_t>(n)));
}

void log_provisional_rows(SequenceCache& cache) {
  if (cache.undo.base >= 0) return;
  cache.undo.base = cache.n_tokens;
  cache.undo.layers.resize(cache.layers.size());
  for (size_t l = 0; l < cache.layers.size(); ++l) {
    const LayerCache& layer = cache.layers[l];
    UndoLayer& u = cache.undo.layers[l];
    u.kv_states = {layer.kv_state};
    u.index_states = {layer.index_state};
    u.entries = {layer.entries.rows()};
    u.index_keys = {layer.index_keys.rows()};
    u.replaced = RowStore(layer.window.dtype(), layer.window.dim());
  }
}

bool can_roll_back(const SequenceCache& cache, int64_t n) {
  return n == cache.n_tokens ||
         (cache.undo.base >= 0 && cache.undo.base <= n && n <= cache.n_tokens);
}

namespace {

// The logged value after `rows` provisional rows (a layer without that compressor logged only
// its value at base, which never changed).
template <typename T>
const T& after(const std::vector<T>& logged, int64_t rows) {
  return logged[std::min(static_cast<size_t>(rows), logged.size() - 1)];
}

}  // namespace

void roll_back(SequenceCache& cache, int64_t n) {
  if (!can_roll_back(cache, n)) {
    fail("internal: DeepSeek-V4's cache of {} tokens cannot go back to {} (provisional from {})",
         cache.n_tokens, n, cache.undo.base);
  }
  if (n == cache.n_tokens) {
    finalize_rows(cache);
    return;
  }
  const int64_t kept = n - cache.undo.base;
  std::vector<float> row;
  for (size_t l = 0; l < cache.layers.size(); ++l) {
    LayerCache& layer = cache.layers[l];
    const UndoLayer& u = cache.undo.layers[l];
    layer.kv_state = after(u.kv_states, kept);
    layer.index_state = after(u.index_states, kept);
    layer.entries.truncate(after(u.entries, kept));
    layer.index_keys.truncate(after(u.index_keys, kept));
    // Latest position first: where two taken-back rows share a ring slot, the earlier one's
    // replaced row is the one that was there at n.
    const int64_t W = layer.window.rows();
    row.resize(static_cast<size_t>(layer.window.dim()));
    for (int64_t p = cache.n_tokens - 1; p >= n; --p) {
      u.replaced.read(p - cache.undo.base, 1, row.data());
      layer.window.put(p % W, row.data());
    }
  }
  cache.n_tokens = n;
  finalize_rows(cache);
}

}  // namespace mlaserve::models::deepseek_v4
