// Token-granular MLA latent KV storage and its slot allocator.
//
// LatentKvPool holds, per layer and token slot, the normalised c_kv followed by the roped k_pe
// (kv_lora_rank + qk_rope_head_dim values, 576 for V2/V3). SlotAllocator hands out slots; it is
// metadata only, so rank 0 can own the allocators of every DP group while each rank holds the
// storage of its own group.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <vector>

namespace mlaserve::cache {

class LatentKvPool {
 public:
  LatentKvPool(int64_t n_layers, int64_t row_dim, int64_t capacity_tokens);

  static int64_t bytes_per_token(int64_t n_layers, int64_t row_dim) {
    return n_layers * row_dim * static_cast<int64_t>(sizeof(float));
  }

  float* layer(int64_t l) { return data_.get() + l * capacity_ * row_dim_; }
  const float* layer(int64_t l) const { return data_.get() + l * capacity_ * row_dim_; }
  int64_t row_dim() const { return row_dim_; }
  int64_t capacity() const { return capacity_; }

 private:
  int64_t n_layers_, row_dim_, capacity_;
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  // [n_layers, capacity, row_dim], 64-byte aligned so rows of 288 or 576 floats start on cache
  // lines (a vector's 16-byte alignment cost attention ~25 %). Not zeroed: a slot is always
  // written before any step reads it, and untouched pages cost no memory.
  std::unique_ptr<float[], Free> data_;
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
