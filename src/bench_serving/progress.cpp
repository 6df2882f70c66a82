#include "bench_serving/progress.h"

#include <unistd.h>

#include <cstdio>
#include <string>

namespace mlaserve::bench_serving {

Progress::Progress(size_t total, bool wanted)
    : total_(total),
      enabled_(wanted && isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()) {
  if (enabled_) draw();
}

void Progress::advance() {
  std::lock_guard lock(mutex_);
  ++done_;
  if (enabled_) draw();
}

void Progress::finish() {
  std::lock_guard lock(mutex_);
  if (enabled_) std::fputc('\n', stderr);
  enabled_ = false;
}

void Progress::draw() const {
  constexpr size_t kWidth = 40;
  const size_t filled = total_ == 0 ? kWidth : done_ * kWidth / total_;
  const std::string bar = std::string(filled, '#') + std::string(kWidth - filled, '.');
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::fprintf(stderr, "\r[%s] %zu/%zu requests, %.1f s", bar.c_str(), done_, total_, elapsed);
  std::fflush(stderr);
}

}  // namespace mlaserve::bench_serving
