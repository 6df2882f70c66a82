#include "models/deepseek_v4/kv_store.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace mlaserve::models::deepseek_v4 {

EntryPools new_entry_pools(const V4Config& cfg, KvDtype dtype) {
  EntryPools pools;
  for (int64_t l = 0; l < cfg.layers_with_mtp(); ++l) {
    pools.entries.push_back(std::make_shared<RowPool>(dtype, cfg.head_dim));
    pools.index_keys.push_back(
        std::make_shared<RowPool>(dtype, std::max<int64_t>(1, cfg.index_head_dim)));
  }
  return pools;
}

SequenceCache new_sequence_cache(const V4Config& cfg, KvDtype dtype, const EntryPools& pools,
                                 int64_t first_layer, int64_t n_layers) {
  SequenceCache cache;
  cache.first_layer = first_layer;
  cache.layers.resize(static_cast<size_t>(n_layers < 0 ? cfg.num_hidden_layers : n_layers));
  for (size_t i = 0; i < cache.layers.size(); ++i) {
    const size_t l = static_cast<size_t>(first_layer) + i;
    LayerCache& layer = cache.layers[i];
    layer.window = RowStore(dtype, cfg.head_dim, cfg.sliding_window);
    layer.entries = PooledRows(pools.entries[l]);
    layer.index_keys = PooledRows(pools.index_keys[l]);
  }
  return cache;
}

V4KvCapacity kv_capacity(const V4Config& cfg, KvDtype dtype, int64_t budget_bytes,
                         int64_t max_sequences, bool with_mtp) {
  check_row_dtype(dtype);
  V4KvCapacity c;
  const int64_t value_bytes = kv_value_bytes(dtype);
  double per_token = 0;
  for (int64_t l = 0; l < (with_mtp ? cfg.layers_with_mtp() : cfg.num_hidden_layers); ++l) {
    per_token += cfg.kv_values_per_token(l) * static_cast<double>(value_bytes);
    c.bytes_per_sequence += cfg.window_values() * value_bytes + cfg.compressor_state_floats(l) * 4;
  }
  c.bytes_per_token = static_cast<int64_t>(std::ceil(per_token));
  const int64_t left = budget_bytes - max_sequences * c.bytes_per_sequence;
  c.tokens = left > 0 ? left / std::max<int64_t>(1, c.bytes_per_token) : 0;
  return c;
}

V4KvStore::V4KvStore(const V4Config& cfg, int64_t capacity_tokens, KvDtype dtype, bool with_mtp)
    : cfg_(cfg),
      capacity_tokens_(capacity_tokens),
      dtype_(dtype),
      with_mtp_(with_mtp),
      pools_(new_entry_pools(cfg, dtype)) {}

SequenceCache& V4KvStore::sequence(const model::SequenceStep& step) {
  SequenceCache& cache = held(step).main;
  begin_rows(cache, step.provisional);
  return cache;
}

V4KvStore::Held& V4KvStore::held(const model::SequenceStep& step) {
  if (step.n_cached == 0) return caches_[step.id] = fresh();
  if (const auto it = caches_.find(step.id);
      it != caches_.end() && can_roll_back(it->second.main, step.n_cached)) {
    roll_back(it->second.main, step.n_cached);
    return it->second;
  }
  const int32_t key = step.kv_slots[static_cast<size_t>(step.n_cached - 1)];
  const auto kept = snapshots_.find(key);
  if (kept == snapshots_.end() || kept->second.main.n_tokens != step.n_cached) {
    fail(
        "internal: request {} runs after {} cached tokens, but DeepSeek-V4's store holds neither "
        "its state nor a snapshot of {} tokens under slot {}",
        step.id, step.n_cached, step.n_cached, key);
  }
  return caches_[step.id] = kept->second;
}

V4KvStore::Held V4KvStore::fresh() const {
  Held h{new_sequence_cache(cfg_, dtype_, pools_), {}};
  if (with_mtp_) h.mtp = new_sequence_cache(cfg_, dtype_, pools_, cfg_.mtp_layer(), 1);
  return h;
}

SequenceCache& V4KvStore::mtp_sequence(const model::SequenceStep& step) {
  const auto it = caches_.find(step.id);
  if (!with_mtp_ || it == caches_.end())
    fail("internal: the MTP block runs request {}, which its main layers have not run", step.id);
  SequenceCache& cache = it->second.mtp;
  if (can_roll_back(cache, step.n_cached)) {
    roll_back(cache, step.n_cached);
  } else {
    cache = padded_mtp_cache(step.n_cached);
  }
  begin_rows(cache, step.provisional);
  return cache;
}

// An MTP cache holds the rows of every position its sequence's MTP passes ran, which is every
// position for a request that speculates from its first token. One restored from a snapshot a
// request without speculation made (a constrained one) lacks them: it starts at position n with
// zero rows and entries before it. That only makes drafts worse, never outputs: every draft is
// verified.
SequenceCache V4KvStore::padded_mtp_cache(int64_t n) const {
  SequenceCache cache = new_sequence_cache(cfg_, dtype_, pools_, cfg_.mtp_layer(), 1);
  cache.n_tokens = n;
  const int64_t ratio = cfg_.compress_ratio(cfg_.mtp_layer());
  if (ratio == 0) return cache;
  LayerCache& layer = cache.layers.front();
  const std::vector<float> zeros(static_cast<size_t>(std::max(cfg_.head_dim, cfg_.index_head_dim)),
                                 0.0f);
  for (int64_t e = 0; e < n / ratio; ++e) {
    layer.entries.append(zeros.data());
    if (ratio == 4) layer.index_keys.append(zeros.data());
  }
  layer.kv_state.own.reset(cfg_.head_dim);
  layer.kv_state.next.reset(cfg_.head_dim);
  layer.index_state.own.reset(cfg_.index_head_dim);
  layer.index_state.next.reset(cfg_.index_head_dim);
  return cache;
}

void V4KvStore::snapshot(uint64_t id, int64_t n_tokens, int32_t key, bool release) {
  const auto it = caches_.find(id);
  if (it == caches_.end() || !can_roll_back(it->second.main, n_tokens)) {
    fail("internal: a snapshot of request {} after {} tokens, but the store holds {} of it", id,
         n_tokens, it == caches_.end() ? 0 : it->second.main.n_tokens);
  }
  Held kept = release ? std::move(it->second) : it->second;
  if (release) caches_.erase(it);
  // The snapshot's rows are final: the request's provisional ones (rejected drafts) go.
  roll_back(kept.main, n_tokens);
  if (can_roll_back(kept.mtp, n_tokens)) {
    roll_back(kept.mtp, n_tokens);
  } else {
    finalize_rows(kept.mtp);
  }
  snapshots_.insert_or_assign(key, std::move(kept));
}

}  // namespace mlaserve::models::deepseek_v4
