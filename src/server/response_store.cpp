#include "server/response_store.h"

#include <utility>

namespace mlaserve::server {

void ResponseStore::put(const std::string& id, StoredResponse stored) {
  std::lock_guard lock(mutex_);
  if (auto it = entries_.find(id); it != entries_.end()) {
    it->second.stored = std::move(stored);
    return;
  }
  order_.push_back(id);
  entries_[id] = {std::move(stored), std::prev(order_.end())};
  if (entries_.size() > kCapacity) {
    entries_.erase(order_.front());
    order_.pop_front();
  }
}

std::optional<StoredResponse> ResponseStore::get(const std::string& id) const {
  std::lock_guard lock(mutex_);
  const auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  return it->second.stored;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard lock(mutex_);
  const auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  order_.erase(it->second.position);
  entries_.erase(it);
  return true;
}

}  // namespace mlaserve::server
