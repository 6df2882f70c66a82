// Token-granular MLA latent KV storage and its slot allocator.
//
// LatentKvPool holds, per layer and token slot, the normalised c_kv followed by the roped k_pe
// (kv_lora_rank + qk_rope_head_dim values, 576 for V2/V3), stored as --kv-cache-dtype
// (core/kv_dtype.h). SlotAllocator hands out slots; it is
// metadata only, so rank 0 can own the allocators of every DP group while each rank holds the
// storage of its own group.
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
  LatentKvPool(int64_t n_layers, int64_t row_dim, int64_t capacity_tokens, KvDtype dtype);

  static int64_t bytes_per_token(int64_t n_layers, int64_t row_dim, KvDtype dtype) {
    return n_layers * kv_row_bytes(dtype, row_dim);
  }

  // Stores row[0, row_dim) (float32) as token slot `slot` of layer l, converted to dtype().
  void write_row(int64_t l, int64_t slot, const float* row);
  // Layer l's capacity() rows as stored, for the attention kernels.
  KvRows layer(int64_t l) const;
  KvDtype dtype() const { return dtype_; }
  int64_t row_dim() const { return row_dim_; }
  int64_t capacity() const { return capacity_; }

 private:
  int64_t n_layers_, row_dim_, capacity_;
  KvDtype dtype_;
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  // values_: [n_layers, capacity, row_dim] of dtype, 64-byte aligned so rows of 576 values (any
  // dtype) start on cache lines (a vector's 16-byte alignment cost attention ~25 %). scales_:
  // [n_layers, capacity] float32, fp8_e4m3 only. Not zeroed: a slot is always written before
  // any step reads it, and untouched pages cost no memory.
  std::unique_ptr<uint8_t[], Free> values_;
  std::unique_ptr<float[], Free> scales_;
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
