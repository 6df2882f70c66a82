#include "server/event_queue.h"

#include <iterator>
#include <utility>

namespace mlaserve::server {

void EventQueue::push(QueuedEvent event) {
  {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(event));
  }
  arrived_.notify_one();
}

std::vector<QueuedEvent> EventQueue::wait_take_all(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  arrived_.wait_for(lock, timeout, [&] { return !events_.empty(); });
  std::vector<QueuedEvent> taken(std::make_move_iterator(events_.begin()),
                                 std::make_move_iterator(events_.end()));
  events_.clear();
  return taken;
}

}  // namespace mlaserve::server
