#include "bench_serving/stream_reader.h"

#include <nlohmann/json.hpp>

namespace mlaserve::bench_serving {

namespace {

double seconds_since(StreamReader::Clock::time_point start) {
  return std::chrono::duration<double>(StreamReader::Clock::now() - start).count();
}

}  // namespace

void StreamReader::on_bytes(std::string_view bytes) {
  const double now = seconds_since(start_);
  for (const std::string& payload : sse_.feed(bytes)) on_payload(payload, now);
}

void StreamReader::finish() {
  const double now = seconds_since(start_);
  for (const std::string& payload : sse_.finish()) on_payload(payload, now);
}

void StreamReader::on_payload(const std::string& payload, double now) {
  if (!error_.empty() || payload == "[DONE]") return;
  const nlohmann::json chunk = nlohmann::json::parse(payload, nullptr, false);
  if (chunk.is_discarded()) {
    error_ = "malformed chunk: " + payload.substr(0, 200);
    return;
  }
  ChunkDelta delta = parser_.parse(chunk);
  if (!delta.error.empty()) {
    error_ = "server error: " + delta.error;
    return;
  }
  if (!delta.finish_reason.empty()) finish_reason_ = delta.finish_reason;
  if (delta.output_ids) output_ids_ = std::move(*delta.output_ids);
  timer_.add(delta, now);
}

}  // namespace mlaserve::bench_serving
