// A one-line progress bar on stderr, redrawn as requests finish; only when stderr is a terminal,
// so that logs and captured output stay clean.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>

namespace mlaserve::bench_serving {

class Progress {
 public:
  // Draws nothing unless `wanted` and stderr is a terminal.
  Progress(size_t total, bool wanted);
  void advance();  // thread-safe
  void finish();   // ends the line

 private:
  void draw() const;
  size_t total_;
  size_t done_ = 0;
  bool enabled_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
};

}  // namespace mlaserve::bench_serving
