#include "tokenizer/token_id_map.h"

#include <functional>

namespace mlaserve::tokenizer {

bool TokenIdMap::insert(std::string_view token, int32_t id) {
  // Keep the table at most half full so that probe sequences stay short.
  if ((entries_.size() + 1) * 2 > slots_.size()) grow();
  const size_t hash = std::hash<std::string_view>{}(token);
  const size_t slot = probe(token, hash);
  if (slots_[slot] != 0) return false;
  entries_.push_back({bytes_.size(), static_cast<uint32_t>(token.size()), id, hash});
  bytes_.append(token);
  slots_[slot] = static_cast<uint32_t>(entries_.size());
  return true;
}

std::optional<int32_t> TokenIdMap::find(std::string_view token) const {
  if (slots_.empty()) return std::nullopt;
  const size_t slot = probe(token, std::hash<std::string_view>{}(token));
  if (slots_[slot] == 0) return std::nullopt;
  return entries_[slots_[slot] - 1].id;
}

size_t TokenIdMap::probe(std::string_view token, size_t hash) const {
  const size_t mask = slots_.size() - 1;
  for (size_t slot = hash & mask;; slot = (slot + 1) & mask) {
    if (slots_[slot] == 0) return slot;
    const Entry& entry = entries_[slots_[slot] - 1];
    if (entry.hash == hash && token_of(entry) == token) return slot;
  }
}

void TokenIdMap::grow() {
  slots_.assign(std::max<size_t>(slots_.size() * 2, 64), 0);
  const size_t mask = slots_.size() - 1;
  for (size_t i = 0; i < entries_.size(); ++i) {
    size_t slot = entries_[i].hash & mask;
    while (slots_[slot] != 0) slot = (slot + 1) & mask;
    slots_[slot] = static_cast<uint32_t>(i + 1);
  }
}

}  // namespace mlaserve::tokenizer
