#include "cache/latent_kv_pool.h"

#include <algorithm>
#include <climits>

#include "core/error.h"

namespace mlaserve::cache {

namespace {

void check_capacity(int64_t capacity) {
  if (capacity <= 0 || capacity > INT32_MAX)
    fail("KV pool capacity {} tokens is out of range", capacity);
}

}  // namespace

LatentKvPool::LatentKvPool(int64_t n_layers, int64_t row_dim, int64_t capacity_tokens)
    : n_layers_(n_layers), row_dim_(row_dim), capacity_(capacity_tokens) {
  check_capacity(capacity_tokens);
  const size_t bytes = static_cast<size_t>(n_layers_ * capacity_ * row_dim_) * sizeof(float);
  constexpr size_t kAlign = 64;
  data_.reset(
      static_cast<float*>(std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign)));
  if (!data_) fail("cannot allocate a KV pool of {} MiB ({} tokens)", bytes >> 20, capacity_tokens);
}

SlotAllocator::SlotAllocator(int64_t capacity_tokens) : capacity_(capacity_tokens) {
  check_capacity(capacity_tokens);
  free_.reserve(static_cast<size_t>(capacity_));
  for (int64_t s = capacity_ - 1; s >= 0; --s) free_.push_back(static_cast<int32_t>(s));
}

std::vector<int32_t> SlotAllocator::allocate(int64_t n) {
  if (n > free_slots())
    fail("KV cache full: need {} token slots, {} free of {}", n, free_slots(), capacity_);
  std::vector<int32_t> slots(free_.end() - n, free_.end());
  std::reverse(slots.begin(), slots.end());
  free_.resize(free_.size() - static_cast<size_t>(n));
  return slots;
}

void SlotAllocator::release(std::span<const int32_t> slots) {
  for (auto it = slots.rbegin(); it != slots.rend(); ++it) free_.push_back(*it);
}

}  // namespace mlaserve::cache
