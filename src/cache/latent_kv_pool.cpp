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
                           KvDtype dtype, int64_t index_dim)
    : n_layers_(n_layers), capacity_(capacity_tokens), dtype_(dtype) {
  check_capacity(capacity_tokens);
  allocate(latent_, row_dim);
  if (index_dim > 0) allocate(index_, index_dim);
}

void LatentKvPool::allocate(Rows& rows, int64_t row_dim) const {
  const int64_t n = n_layers_ * capacity_;
  rows.row_dim = row_dim;
  rows.values.reset(static_cast<uint8_t*>(aligned_bytes(n * row_dim * kv_value_bytes(dtype_))));
  if (dtype_ == KvDtype::Fp8E4m3)
    rows.scales.reset(static_cast<float*>(aligned_bytes(n * int64_t{sizeof(float)})));
}

void LatentKvPool::write(Rows& rows, int64_t l, int64_t slot, const float* row) const {
  const int64_t index = l * capacity_ + slot;
  encode_kv_row(dtype_, row, rows.row_dim,
                rows.values.get() + index * rows.row_dim * kv_value_bytes(dtype_),
                rows.scales ? rows.scales.get() + index : nullptr);
}

KvRows LatentKvPool::view(const Rows& rows, int64_t l) const {
  const int64_t first = l * capacity_;
  return {dtype_, rows.row_dim, rows.values.get() + first * rows.row_dim * kv_value_bytes(dtype_),
          rows.scales ? rows.scales.get() + first : nullptr};
}

void LatentKvPool::write_row(int64_t l, int64_t slot, const float* row) {
  write(latent_, l, slot, row);
}

KvRows LatentKvPool::layer(int64_t l) const {
  return view(latent_, l);
}

void LatentKvPool::write_index_key(int64_t l, int64_t slot, const float* key) {
  if (!index_.values) fail("internal: an index key written to a KV pool without index keys");
  write(index_, l, slot, key);
}

KvRows LatentKvPool::index_keys(int64_t l) const {
  if (!index_.values) fail("internal: index keys read from a KV pool without them");
  return view(index_, l);
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
