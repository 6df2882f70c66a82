// Token-granular MLA latent KV storage and its slot allocator.
//
// LatentKvPool holds, per layer and token slot, the normalised c_kv followed by the roped k_pe
// (kv_lora_rank + qk_rope_head_dim values, 576 for V2/V3), stored as --kv-cache-dtype
// (core/kv_dtype.h). A model with DeepSeek Sparse Attention (V3.2) also keeps each token's index
// key (index_head_dim values, in the same dtype) beside its latent row: same layers, same
// slots, so prefix reuse, retraction and the per-group pools cover it unchanged. SlotAllocator
// hands out slots; it is metadata only, so rank 0 can own the allocators of every DP group while
// each rank holds the storage of its own group.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <vector>

#include "core/kv_dtype.h"

namespace mlaserve::cache {

class LatentKvPool {
 public:
  // index_dim: values of a token's index key per layer (0: no indexer, no key storage).
  LatentKvPool(int64_t n_layers, int64_t row_dim, int64_t capacity_tokens, KvDtype dtype,
               int64_t index_dim = 0);

  static int64_t bytes_per_token(int64_t n_layers, int64_t row_dim, KvDtype dtype,
                                 int64_t index_dim = 0) {
    return n_layers *
           (kv_row_bytes(dtype, row_dim) + (index_dim > 0 ? kv_row_bytes(dtype, index_dim) : 0));
  }

  // Stores row[0, row_dim) (float32) as token slot `slot` of layer l, converted to dtype().
  void write_row(int64_t l, int64_t slot, const float* row);
  // Layer l's capacity() rows as stored, for the attention kernels.
  KvRows layer(int64_t l) const;
  // The same for index keys (key[0, index_dim)); only with index_dim() > 0.
  void write_index_key(int64_t l, int64_t slot, const float* key);
  KvRows index_keys(int64_t l) const;
  KvDtype dtype() const { return dtype_; }
  int64_t row_dim() const { return latent_.row_dim; }
  int64_t index_dim() const { return index_.row_dim; }
  int64_t capacity() const { return capacity_; }

 private:
  int64_t n_layers_, capacity_;
  KvDtype dtype_;
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  // One kind of row per layer and slot: values [n_layers, capacity, row_dim] of dtype, 64-byte
  // aligned so rows of 576 values (any dtype) start on cache lines (a vector's 16-byte
  // alignment cost attention ~25 %); scales [n_layers, capacity] float32, fp8_e4m3 only. Not
  // zeroed: a slot is always written before any step reads it, and untouched pages cost no
  // memory.
  struct Rows {
    int64_t row_dim = 0;
    std::unique_ptr<uint8_t[], Free> values;
    std::unique_ptr<float[], Free> scales;
  };
  void allocate(Rows& rows, int64_t row_dim) const;
  void write(Rows& rows, int64_t l, int64_t slot, const float* row) const;
  KvRows view(const Rows& rows, int64_t l) const;

  Rows latent_, index_;
};

class SlotAllocator {
 public:
  explicit SlotAllocator(int64_t capacity_tokens);

  int64_t capacity() const { return capacity_; }
  int64_t free_slots() const { return static_cast<int64_t>(free_.size()); }

  // n free slots (lowest first); throws mlaserve::Error when fewer than n are free.
  std::vector<int32_t> allocate(int64_t n);
  void release(std::span<const int32_t> slots);

 private:
  int64_t capacity_;
  std::vector<int32_t> free_;  // stack of free slots, lowest on top
};

}  // namespace mlaserve::cache
