// Aborts one request through the native API's POST /abort_request {"rid": ...}, on a connection
// of its own, a delay after it is armed (when the request is sent, or when its first token
// arrives). A request the server does not know yet (404: it has not reached the server) is
// asked again every few milliseconds until the request ends.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "bench_serving/http_client.h"

namespace mlaserve::bench_serving {

class Aborter {
 public:
  Aborter(const HttpClient& client, std::string rid, double delay_s);
  ~Aborter();  // stops waiting (as request_ended) and joins
  Aborter(const Aborter&) = delete;
  Aborter& operator=(const Aborter&) = delete;

  void arm();            // starts the delay; later calls change nothing
  void request_ended();  // nothing more to abort
  bool sent() const;     // whether the server accepted the abort

 private:
  void run();
  bool wait_armed(std::unique_lock<std::mutex>& lock);

  const HttpClient& client_;
  std::string body_;
  std::chrono::duration<double> delay_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<std::chrono::steady_clock::time_point> armed_at_;
  bool ended_ = false;
  bool sent_ = false;
  std::jthread thread_;  // last: started once the members it reads exist
};

}  // namespace mlaserve::bench_serving
