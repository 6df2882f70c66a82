#include "bench_serving/aborter.h"

#include <nlohmann/json.hpp>

namespace mlaserve::bench_serving {

namespace {

constexpr int kNotFound = 404;
constexpr std::chrono::milliseconds kRetryInterval{10};

}  // namespace

Aborter::Aborter(const HttpClient& client, std::string rid, double delay_s)
    : client_(client),
      body_(nlohmann::json{{"rid", std::move(rid)}}.dump()),
      delay_(delay_s),
      thread_([this] { run(); }) {}

Aborter::~Aborter() {
  request_ended();
}

void Aborter::arm() {
  {
    std::lock_guard lock(mutex_);
    if (armed_at_) return;
    armed_at_ = std::chrono::steady_clock::now();
  }
  changed_.notify_all();
}

void Aborter::request_ended() {
  {
    std::lock_guard lock(mutex_);
    ended_ = true;
  }
  changed_.notify_all();
}

bool Aborter::sent() const {
  std::lock_guard lock(mutex_);
  return sent_;
}

// Whether the delay after arming passed before the request ended.
bool Aborter::wait_armed(std::unique_lock<std::mutex>& lock) {
  changed_.wait(lock, [&] { return armed_at_ || ended_; });
  if (ended_) return false;
  const auto due =
      *armed_at_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(delay_);
  return !changed_.wait_until(lock, due, [&] { return ended_; });
}

void Aborter::run() {
  std::unique_lock lock(mutex_);
  if (!wait_armed(lock)) return;
  while (!ended_) {
    lock.unlock();
    const HttpResult http = client_.post_json("/abort_request", body_);
    lock.lock();
    if (http.status != kNotFound) {
      sent_ = http.ok();
      return;
    }
    changed_.wait_for(lock, kRetryInterval, [&] { return ended_; });
  }
}

}  // namespace mlaserve::bench_serving
