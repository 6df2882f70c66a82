#include "bench_serving/request.h"

#include <chrono>
#include <nlohmann/json.hpp>

#include "bench_serving/sse.h"
#include "bench_serving/stream_timer.h"

namespace mlaserve::bench_serving {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Reads a streamed response chunk by chunk, timing each as it arrives.
class StreamReader {
 public:
  StreamReader(Backend backend, Clock::time_point start) : parser_(backend), start_(start) {}

  void on_bytes(std::string_view bytes) {
    const double now = seconds_since(start_);
    for (const std::string& payload : sse_.feed(bytes)) on_payload(payload, now);
  }
  void finish() {
    const double now = seconds_since(start_);
    for (const std::string& payload : sse_.finish()) on_payload(payload, now);
  }
  const StreamTimer& timer() const { return timer_; }
  const std::string& error() const { return error_; }

 private:
  void on_payload(const std::string& payload, double now) {
    if (!error_.empty() || payload == "[DONE]") return;
    const json chunk = json::parse(payload, nullptr, false);
    if (chunk.is_discarded()) {
      error_ = "malformed chunk: " + payload.substr(0, 200);
      return;
    }
    const ChunkDelta delta = parser_.parse(chunk);
    if (!delta.error.empty()) {
      error_ = "server error: " + delta.error;
      return;
    }
    timer_.add(delta, now);
  }

  SseParser sse_;
  ChunkParser parser_;
  StreamTimer timer_;
  Clock::time_point start_;
  std::string error_;
};

RequestResult failure(std::string error, int64_t prompt_len) {
  RequestResult result;
  result.prompt_len = prompt_len;
  result.error = std::move(error);
  return result;
}

RequestResult send_streaming(const HttpClient& client, const RequestSettings& settings,
                             const std::string& body, int64_t prompt_len) {
  const Clock::time_point start = Clock::now();
  StreamReader reader(settings.backend, start);
  const HttpResult http = client.post_json(api_path(settings.backend), body,
                                           [&](std::string_view bytes) { reader.on_bytes(bytes); });
  reader.finish();
  const double latency = seconds_since(start);
  if (!http.ok()) return failure(http.describe(), prompt_len);
  if (!reader.error().empty()) return failure(reader.error(), prompt_len);
  const StreamTimer& timer = reader.timer();
  if (!timer.has_tokens()) return failure("the response streamed no tokens", prompt_len);
  RequestResult result;
  result.success = true;
  result.prompt_len = prompt_len;
  result.output_len = timer.output_tokens();
  result.ttft = timer.ttft();
  result.latency = latency;
  result.itl = timer.itl();
  result.spec_verify_ct = timer.spec_verify_ct();
  result.generated_text = timer.text();
  return result;
}

// Without streaming, the first token is seen only with the whole response: TTFT = latency.
RequestResult send_whole(const HttpClient& client, const RequestSettings& settings,
                         const std::string& body, int64_t prompt_len) {
  const Clock::time_point start = Clock::now();
  const HttpResult http = client.post_json(api_path(settings.backend), body);
  const double latency = seconds_since(start);
  if (!http.ok()) return failure(http.describe(), prompt_len);
  const json response = json::parse(http.body, nullptr, false);
  if (response.is_discarded())
    return failure("malformed response: " + http.body.substr(0, 200), prompt_len);
  const ChunkDelta delta = parse_response(settings.backend, response);
  if (!delta.error.empty()) return failure("server error: " + delta.error, prompt_len);
  RequestResult result;
  result.success = true;
  result.prompt_len = prompt_len;
  result.output_len = delta.completion_tokens.value_or(0);
  result.spec_verify_ct = delta.spec_verify_ct.value_or(0);
  result.ttft = latency;
  result.latency = latency;
  result.generated_text = delta.text;
  return result;
}

}  // namespace

RequestResult send_request(const HttpClient& client, const RequestSettings& settings,
                           const std::string& prompt, int64_t prompt_len, int64_t max_tokens) {
  const RequestSpec spec{prompt,          max_tokens,     settings.ignore_eos,
                         settings.stream, settings.model, settings.extra_body};
  try {
    const std::string body = request_body(settings.backend, spec).dump();
    return settings.stream ? send_streaming(client, settings, body, prompt_len)
                           : send_whole(client, settings, body, prompt_len);
  } catch (const std::exception& e) {  // e.g. a prompt that is not UTF-8 cannot be put in JSON
    return failure(std::string("client error: ") + e.what(), prompt_len);
  }
}

}  // namespace mlaserve::bench_serving
