// DeepSeek-V4's KV store for the runtime: one SequenceCache per request (its window ring and
// compressor state, its compressed entries as rows of the store's shared pools), found by the
// request's id. A sequence starts over when a step runs it from position 0.
//
// Prefix reuse. V4's state after a prefix is not a row per token (the window ring and the
// compressors' running sums summarise it), so a prefix is reusable only where its whole state was
// kept: a snapshot, named by the KV slot of the prefix's last token (a slot the scheduler's radix
// cache holds, so the name stays unique while the prefix is cached). Snapshots are made where the
// scheduler asks (after a step, or from a released request's state, which costs no copy) and go
// when it says; a step whose sequence runs after n_cached > 0 tokens the store does not hold
// continues from the snapshot named by kv_slots[n_cached - 1]. A snapshot shares its compressed
// entries with the sequence it came from and with the sequences restored from it.
//
// Speculative decoding. A step marks its rows provisional (model::SequenceStep::provisional) when
// a later step may take some back (rejected drafts): the cache logs what they change
// (sequence_cache.h's UndoLog), and a step that runs the sequence after fewer tokens than the
// cache holds takes the rows after them back. With the MTP block, each request also has the
// block's own one-layer cache, at its own length (the block's passes run ahead of the main
// layers by the chained drafts).
#pragma once

#include <unordered_map>

#include "model/model.h"
#include "models/deepseek_v4/config.h"
#include "models/deepseek_v4/sequence_cache.h"

namespace mlaserve::models::deepseek_v4 {

class V4KvStore : public model::KvStore {
 public:
  // with_mtp: each request also has a cache of the MTP block's layer.
  V4KvStore(const V4Config& cfg, int64_t capacity_tokens, KvDtype dtype, bool with_mtp = false);
  int64_t capacity_tokens() const override { return capacity_tokens_; }
  KvDtype dtype() const override { return dtype_; }
  void release(uint64_t id) override { caches_.erase(id); }
  void snapshot(uint64_t id, int64_t n_tokens, int32_t key, bool release) override;
  void drop_snapshot(int32_t key) override { snapshots_.erase(key); }

  // The cache of the step's sequence, holding exactly its n_cached tokens (provisional rows after
  // them taken back, or restored from a snapshot where the sequence starts after a reused
  // prefix), logging the step's rows if they are provisional.
  SequenceCache& sequence(const model::SequenceStep& step);
  // The MTP block's cache of a sequence the main layers have run, likewise.
  SequenceCache& mtp_sequence(const model::SequenceStep& step);
  size_t sequences() const { return caches_.size(); }
  size_t snapshots() const { return snapshots_.size(); }
  int64_t pooled_rows() const { return pools_.rows_in_use(); }  // entries and keys held

 private:
  struct Held {
    SequenceCache main, mtp;  // mtp: empty without the MTP block
  };
  Held& held(const model::SequenceStep& step);
  Held fresh() const;
  SequenceCache padded_mtp_cache(int64_t n) const;

  const V4Config& cfg_;
  int64_t capacity_tokens_;
  KvDtype dtype_;
  bool with_mtp_;
  EntryPools pools_;
  std::unordered_map<uint64_t, Held> caches_;
  std::unordered_map<int32_t, Held> snapshots_;
};

// What a memory budget holds of this store (rows in `dtype`, running sums in float32): each
// sequence's fixed part (the windows and the compressors' running sums) for max_sequences
// sequences, and the tokens of compressed entries the rest holds (with_mtp: the MTP block's
// layer counted too).
struct V4KvCapacity {
  int64_t bytes_per_token = 0;     // compressed entries and index keys, over all layers
  int64_t bytes_per_sequence = 0;  // windows and compressor state, over all layers
  int64_t tokens = 0;              // what the budget holds beside max_sequences' fixed parts
};
V4KvCapacity kv_capacity(const V4Config& cfg, KvDtype dtype, int64_t budget_bytes,
                         int64_t max_sequences, bool with_mtp = false);

// Pools for cfg's layers (the MTP block's included), rows in dtype.
EntryPools new_entry_pools(const V4Config& cfg, KvDtype dtype);

// A fresh cache of n_layers of cfg's layers from first_layer on (n_layers < 0: the decoder's):
// an empty window ring per layer, rows in dtype, entries in pools.
SequenceCache new_sequence_cache(const V4Config& cfg, KvDtype dtype, const EntryPools& pools,
                                 int64_t first_layer = 0, int64_t n_layers = -1);

}  // namespace mlaserve::models::deepseek_v4
