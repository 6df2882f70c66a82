// Hands engine events from the engine thread to the HTTP handler thread that owns the request.
// Sinks hold it by shared_ptr, so events that arrive after the handler has gone are harmless.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <vector>

#include "sched/generation.h"

namespace mlaserve::server {

struct QueuedEvent {
  size_t choice;  // index into the request's choices
  sched::TokenEvent event;
  std::chrono::steady_clock::time_point arrived;
};

class EventQueue {
 public:
  void push(QueuedEvent event);
  // Waits up to `timeout` for at least one event, then takes all that are queued.
  std::vector<QueuedEvent> wait_take_all(std::chrono::milliseconds timeout);

 private:
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::deque<QueuedEvent> events_;
};

}  // namespace mlaserve::server
