// Reads one streamed response chunk by chunk as its bytes arrive: times each chunk (StreamTimer)
// and keeps what the stream said so far: an error, the finish reason, the native output ids.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bench_serving/backend.h"
#include "bench_serving/sse.h"
#include "bench_serving/stream_timer.h"

namespace mlaserve::bench_serving {

class StreamReader {
 public:
  using Clock = std::chrono::steady_clock;
  // `start`: when the request was sent; chunk times are measured from it.
  StreamReader(Backend backend, Clock::time_point start) : parser_(backend), start_(start) {}

  void on_bytes(std::string_view bytes);
  void finish();  // the stream ended: takes a last line that had no newline

  const StreamTimer& timer() const { return timer_; }
  const std::string& error() const { return error_; }  // the first malformed or error chunk
  const std::string& finish_reason() const { return finish_reason_; }
  const std::vector<int32_t>& output_ids() const { return output_ids_; }

 private:
  void on_payload(const std::string& payload, double now);

  SseParser sse_;
  ChunkParser parser_;
  StreamTimer timer_;
  Clock::time_point start_;
  std::string error_;
  std::string finish_reason_;
  std::vector<int32_t> output_ids_;
};

}  // namespace mlaserve::bench_serving
