#include "tokenizer/word_cache.h"

#include <algorithm>
#include <functional>

namespace mlaserve::tokenizer {

WordCache::WordCache() : slots_(kSlots) {}

bool WordCache::lookup(std::string_view word, std::vector<int32_t>& ids) const {
  if (word.size() > kMaxWordBytes) return false;
  const size_t hash = std::hash<std::string_view>{}(word);
  std::lock_guard lock(mutex_);
  const Slot& slot = slots_[hash % kSlots];
  if (slot.id_count == 0 || slot.hash != hash ||
      std::string_view(slot.word.data(), slot.word_length) != word) {
    return false;
  }
  ids.insert(ids.end(), slot.ids.begin(), slot.ids.begin() + slot.id_count);
  return true;
}

void WordCache::store(std::string_view word, std::span<const int32_t> ids) {
  if (word.size() > kMaxWordBytes || ids.empty() || ids.size() > kMaxIds) return;
  const size_t hash = std::hash<std::string_view>{}(word);
  std::lock_guard lock(mutex_);
  Slot& slot = slots_[hash % kSlots];
  slot.hash = hash;
  slot.word_length = static_cast<uint8_t>(word.size());
  slot.id_count = static_cast<uint8_t>(ids.size());
  std::copy(word.begin(), word.end(), slot.word.begin());
  std::copy(ids.begin(), ids.end(), slot.ids.begin());
}

}  // namespace mlaserve::tokenizer
