#include "server/response_store.h"

#include <utility>

namespace mlaserve::server {

namespace {

size_t text_bytes(const StoredResponse& stored) {
  return stored.response.dump().size() + stored.conversation.dump().size() +
         stored.input_items.dump().size();
}

}  // namespace

void ResponseStore::put(const std::string& id, StoredResponse stored) {
  const size_t bytes = text_bytes(stored);
  std::lock_guard lock(mutex_);
  if (auto it = entries_.find(id); it != entries_.end()) {
    bytes_ -= it->second.bytes;
    order_.erase(it->second.position);
    entries_.erase(it);
  }
  order_.push_back(id);
  entries_[id] = {std::move(stored), std::prev(order_.end()), bytes};
  bytes_ += bytes;
  // The newest stays even when it alone is over the byte limit.
  while (entries_.size() > 1 && (entries_.size() > capacity_ || bytes_ > capacity_bytes_)) {
    drop_oldest();
  }
}

void ResponseStore::drop_oldest() {
  const auto it = entries_.find(order_.front());
  bytes_ -= it->second.bytes;
  entries_.erase(it);
  order_.pop_front();
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
  bytes_ -= it->second.bytes;
  order_.erase(it->second.position);
  entries_.erase(it);
  return true;
}

}  // namespace mlaserve::server
