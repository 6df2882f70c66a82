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

// `bytes` (rounded up to whole cache lines) from aligned_alloc; fails when memory is short.
void* aligned_bytes(int64_t bytes) {
  constexpr int64_t kAlign = 64;
  void* p = std::aligned_alloc(kAlign, static_cast<size_t>((bytes + kAlign - 1) / kAlign * kAlign));
  if (!p) fail("cannot allocate {} MiB for the KV pool", bytes >> 20);
  return p;
}

}  // namespace

LatentKvPool::LatentKvPool(int64_t n_layers, int64_t row_dim, int64_t capacity_tokens,
                           KvDtype dtype)
    : n_layers_(n_layers), row_dim_(row_dim), capacity_(capacity_tokens), dtype_(dtype) {
  check_capacity(capacity_tokens);
  const int64_t rows = n_layers_ * capacity_;
  values_.reset(static_cast<uint8_t*>(aligned_bytes(rows * row_dim_ * kv_value_bytes(dtype))));
  if (dtype == KvDtype::Fp8E4m3)
    scales_.reset(static_cast<float*>(aligned_bytes(rows * int64_t{sizeof(float)})));
}

void LatentKvPool::write_row(int64_t l, int64_t slot, const float* row) {
  const int64_t index = l * capacity_ + slot;
  encode_kv_row(dtype_, row, row_dim_, values_.get() + index * row_dim_ * kv_value_bytes(dtype_),
                scales_ ? scales_.get() + index : nullptr);
}

KvRows LatentKvPool::layer(int64_t l) const {
  const int64_t first = l * capacity_;
  return {dtype_, row_dim_, values_.get() + first * row_dim_ * kv_value_bytes(dtype_),
          scales_ ? scales_.get() + first : nullptr};
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
