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

SequenceCache new_sequence_cache(const V4Config& cfg, KvDtype dtype) {
  SequenceCache cache;
  cache.layers.resize(static_cast<size_t>(cfg.num_hidden_layers));
  for (LayerCache& layer : cache.layers) {
    layer.window = RowStore(dtype, cfg.head_dim, cfg.sliding_window);
    layer.entries = RowStore(dtype, cfg.head_dim);
    layer.index_keys = RowStore(dtype, std::max<int64_t>(1, cfg.index_head_dim));
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

SequenceCache& V4KvStore::sequence(const model::SequenceStep& step) {
  if (step.n_cached == 0) return caches_[step.id] = new_sequence_cache(cfg_, dtype_);
  const auto it = caches_.find(step.id);
  if (it == caches_.end() || it->second.n_tokens != step.n_cached) {
    fail(
        "internal: request {} runs after {} cached tokens, but DeepSeek-V4's store holds {} of "
        "it (a shared prefix? V4 runs without the radix cache)",
        step.id, step.n_cached, it == caches_.end() ? 0 : it->second.n_tokens);
  }
  return it->second;
}

}  // namespace mlaserve::models::deepseek_v4
