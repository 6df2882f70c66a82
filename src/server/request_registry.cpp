#include "server/request_registry.h"

#include <chrono>

namespace mlaserve::server {

bool RequestRegistry::reserve(const std::string& rid, std::weak_ptr<EventQueue> queue) {
  std::lock_guard lock(mutex_);
  return entries_.emplace(rid, Entry{std::move(queue), {}}).second;
}

void RequestRegistry::attach(const std::string& rid, size_t choice, uint64_t engine_id) {
  std::lock_guard lock(mutex_);
  const auto it = entries_.find(rid);
  if (it != entries_.end()) it->second.choices.emplace_back(choice, engine_id);
}

void RequestRegistry::remove(const std::string& rid) {
  std::lock_guard lock(mutex_);
  entries_.erase(rid);
}

bool RequestRegistry::abort(const std::string& rid, sched::EngineHandle& engine) {
  std::lock_guard lock(mutex_);
  const auto it = entries_.find(rid);
  if (it == entries_.end()) return false;
  abort_entry(it->second, engine);
  return true;
}

size_t RequestRegistry::abort_all(sched::EngineHandle& engine) {
  std::lock_guard lock(mutex_);
  for (const auto& [rid, entry] : entries_) abort_entry(entry, engine);
  return entries_.size();
}

void RequestRegistry::abort_entry(const Entry& entry, sched::EngineHandle& engine) {
  const std::shared_ptr<EventQueue> queue = entry.queue.lock();
  for (const auto& [choice, engine_id] : entry.choices) {
    engine.abort(engine_id);
    if (!queue) continue;
    sched::TokenEvent aborted;
    aborted.finish = sched::FinishReason::Abort;
    aborted.error = "aborted by /abort_request";
    queue->push({choice, std::move(aborted), std::chrono::steady_clock::now()});
  }
}

}  // namespace mlaserve::server
