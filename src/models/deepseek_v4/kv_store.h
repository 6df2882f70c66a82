// DeepSeek-V4's KV store for the runtime, for now one SequenceCache per request (its window and
// compressed entries in the cache's dtype, its compressor state), found by the request's id. A
// sequence starts over when a step runs it from position 0 (a new request, or one the scheduler
// retracted) and goes when the request is released. Prefixes are not shared between requests: the
// scheduler runs V4 without the radix cache. The paged pool of row kinds that shares prefixes
// comes next (docs/DESIGN.md).
#pragma once

#include <unordered_map>

#include "model/model.h"
#include "models/deepseek_v4/config.h"
#include "models/deepseek_v4/sequence_cache.h"

namespace mlaserve::models::deepseek_v4 {

class V4KvStore : public model::KvStore {
 public:
  V4KvStore(const V4Config& cfg, int64_t capacity_tokens, KvDtype dtype)
      : cfg_(cfg), capacity_tokens_(capacity_tokens), dtype_(dtype) {}
  int64_t capacity_tokens() const override { return capacity_tokens_; }
  KvDtype dtype() const override { return dtype_; }
  void release(uint64_t id) override { caches_.erase(id); }

  // The cache of the step's sequence, holding exactly its n_cached tokens.
  SequenceCache& sequence(const model::SequenceStep& step);
  size_t sequences() const { return caches_.size(); }

 private:
  const V4Config& cfg_;
  int64_t capacity_tokens_;
  KvDtype dtype_;
  std::unordered_map<uint64_t, SequenceCache> caches_;
};

// What a memory budget holds of this store (rows in `dtype`, running sums in float32): each
// sequence's fixed part (the windows and the compressors' running sums) for max_sequences
// sequences, and the tokens of compressed entries the rest holds.
struct V4KvCapacity {
  int64_t bytes_per_token = 0;     // compressed entries and index keys, over all layers
  int64_t bytes_per_sequence = 0;  // windows and compressor state, over all layers
  int64_t tokens = 0;              // what the budget holds beside max_sequences' fixed parts
};
V4KvCapacity kv_capacity(const V4Config& cfg, KvDtype dtype, int64_t budget_bytes,
                         int64_t max_sequences);

// A fresh cache of cfg's layers: an empty window ring per layer, rows in dtype.
SequenceCache new_sequence_cache(const V4Config& cfg, KvDtype dtype);

}  // namespace mlaserve::models::deepseek_v4
