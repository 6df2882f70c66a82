// Request indices handed from the dispatcher (which releases each at its arrival time) to the
// worker threads, first in first out: with C workers this is SGLang's asyncio semaphore of C
// around each request, and requests that arrive while all are busy wait in arrival order.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>

namespace mlaserve::bench_serving {

class WorkQueue {
 public:
  void push(size_t index) {
    {
      std::lock_guard lock(mutex_);
      items_.push_back(index);
    }
    ready_.notify_one();
  }
  // No more pushes: pop returns nullopt once the queue is empty.
  void close() {
    {
      std::lock_guard lock(mutex_);
      closed_ = true;
    }
    ready_.notify_all();
  }
  std::optional<size_t> pop() {
    std::unique_lock lock(mutex_);
    ready_.wait(lock, [&] { return closed_ || !items_.empty(); });
    if (items_.empty()) return std::nullopt;
    const size_t index = items_.front();
    items_.pop_front();
    return index;
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<size_t> items_;
  bool closed_ = false;
};

}  // namespace mlaserve::bench_serving
