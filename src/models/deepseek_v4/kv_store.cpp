#include "models/deepseek_v4/kv_store.h"

#include <algorithm>
#include <cmath>

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

EntryPools new_entry_pools(const V4Config& cfg, KvDtype dtype) {
  EntryPools pools;
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    pools.entries.push_back(std::make_shared<RowPool>(dtype, cfg.head_dim));
    pools.index_keys.push_back(
        std::make_shared<RowPool>(dtype, std::max<int64_t>(1, cfg.index_head_dim)));
  }
  return pools;
}

SequenceCache new_sequence_cache(const V4Config& cfg, KvDtype dtype, const EntryPools& pools) {
  SequenceCache cache;
  cache.layers.resize(static_cast<size_t>(cfg.num_hidden_layers));
  for (size_t l = 0; l < cache.layers.size(); ++l) {
    LayerCache& layer = cache.layers[l];
    layer.window = RowStore(dtype, cfg.head_dim, cfg.sliding_window);
    layer.entries = PooledRows(pools.entries[l]);
    layer.index_keys = PooledRows(pools.index_keys[l]);
  }
  return cache;
}

V4KvCapacity kv_capacity(const V4Config& cfg, KvDtype dtype, int64_t budget_bytes,
                         int64_t max_sequences) {
  check_row_dtype(dtype);
  V4KvCapacity c;
  const int64_t value_bytes = kv_value_bytes(dtype);
  double per_token = 0;
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    per_token += cfg.kv_values_per_token(l) * static_cast<double>(value_bytes);
    c.bytes_per_sequence += cfg.window_values() * value_bytes + cfg.compressor_state_floats(l) * 4;
  }
  c.bytes_per_token = static_cast<int64_t>(std::ceil(per_token));
  const int64_t left = budget_bytes - max_sequences * c.bytes_per_sequence;
  c.tokens = left > 0 ? left / std::max<int64_t>(1, c.bytes_per_token) : 0;
  return c;
}

V4KvStore::V4KvStore(const V4Config& cfg, int64_t capacity_tokens, KvDtype dtype)
    : cfg_(cfg),
      capacity_tokens_(capacity_tokens),
      dtype_(dtype),
      pools_(new_entry_pools(cfg, dtype)) {}

SequenceCache& V4KvStore::sequence(const model::SequenceStep& step) {
  if (step.n_cached == 0) return caches_[step.id] = new_sequence_cache(cfg_, dtype_, pools_);
  if (const auto it = caches_.find(step.id);
      it != caches_.end() && it->second.n_tokens == step.n_cached)
    return it->second;
  const int32_t key = step.kv_slots[static_cast<size_t>(step.n_cached - 1)];
  const auto kept = snapshots_.find(key);
  if (kept == snapshots_.end() || kept->second.n_tokens != step.n_cached) {
    fail(
        "internal: request {} runs after {} cached tokens, but DeepSeek-V4's store holds neither "
        "its state nor a snapshot of {} tokens under slot {}",
        step.id, step.n_cached, step.n_cached, key);
  }
  return caches_[step.id] = kept->second;
}

void V4KvStore::snapshot(uint64_t id, int64_t n_tokens, int32_t key, bool release) {
  const auto it = caches_.find(id);
  if (it == caches_.end() || it->second.n_tokens != n_tokens) {
    fail("internal: a snapshot of request {} after {} tokens, but the store holds {} of it", id,
         n_tokens, it == caches_.end() ? 0 : it->second.n_tokens);
  }
  if (!release) {
    snapshots_.insert_or_assign(key, it->second);
    return;
  }
  snapshots_.insert_or_assign(key, std::move(it->second));
  caches_.erase(it);
}

}  // namespace mlaserve::models::deepseek_v4
