#include "grammar/mask_cache.h"

#include <algorithm>
#include <bit>

namespace mlaserve::grammar {

size_t MaskCache::entry_bytes(const Entry& entry) {
  constexpr size_t kEntryOverhead = 96;  // list and hash-table nodes
  return entry.words.size() * sizeof(uint64_t) + entry.ids.size() * sizeof(int32_t) +
         kEntryOverhead;
}

bool MaskCache::find(StateId state, std::span<uint64_t> mask) {
  const auto it = index_.find(state);
  if (it == index_.end()) return false;
  recent_.splice(recent_.begin(), recent_, it->second);
  const Entry& entry = *it->second;
  if (!entry.words.empty()) {
    std::copy(entry.words.begin(), entry.words.end(), mask.begin());
    return true;
  }
  std::fill(mask.begin(), mask.end(), 0);
  for (const int32_t id : entry.ids) mask[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
  return true;
}

void MaskCache::insert(StateId state, std::span<const uint64_t> mask) {
  if (index_.contains(state)) return;
  Entry entry{state, {}, {}};
  size_t allowed = 0;
  for (const uint64_t word : mask) allowed += static_cast<size_t>(std::popcount(word));
  if (allowed * sizeof(int32_t) < mask.size() * sizeof(uint64_t)) {
    for (size_t w = 0; w < mask.size(); ++w) {
      for (uint64_t bits = mask[w]; bits != 0; bits &= bits - 1)
        entry.ids.push_back(
            static_cast<int32_t>(w * 64 + static_cast<size_t>(std::countr_zero(bits))));
    }
  } else {
    entry.words.assign(mask.begin(), mask.end());
  }
  bytes_ += entry_bytes(entry);
  recent_.push_front(std::move(entry));
  index_.emplace(state, recent_.begin());
  while (bytes_ > budget_bytes_ && recent_.size() > 1) {
    bytes_ -= entry_bytes(recent_.back());
    index_.erase(recent_.back().state);
    recent_.pop_back();
  }
}

}  // namespace mlaserve::grammar
