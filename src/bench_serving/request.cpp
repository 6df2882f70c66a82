#include "bench_serving/request.h"

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>

#include "bench_serving/aborter.h"
#include "bench_serving/stream_reader.h"

namespace mlaserve::bench_serving {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

RequestResult result_of(Outcome outcome, int64_t prompt_len) {
  RequestResult result;
  result.outcome = outcome;
  result.prompt_len = prompt_len;
  return result;
}

RequestResult failure(std::string error, int64_t prompt_len) {
  RequestResult result = result_of(Outcome::Failed, prompt_len);
  result.error = std::move(error);
  return result;
}

// Ok, or Aborted when the server ended the request with an abort that the plan asked for (an
// abort that nobody asked for is a failure).
RequestResult ended(const std::string& finish_reason, const RequestPlan& plan, int64_t prompt_len) {
  if (finish_reason != "abort") return result_of(Outcome::Ok, prompt_len);
  if (!plan.abort_delay_s) return failure("the server aborted the request", prompt_len);
  return result_of(Outcome::Aborted, prompt_len);
}

// Reads the stream until it ends or, when the plan says so, closes it after that many tokens.
// The first token arms the aborter (if any).
RequestResult send_streaming(const HttpClient& client, const RequestSettings& settings,
                             const std::string& body, const BenchRequest& request,
                             const RequestPlan& plan, Aborter* aborter) {
  const Clock::time_point start = Clock::now();
  StreamReader reader(settings.backend, start);
  const auto on_body = [&](std::string_view bytes) {
    reader.on_bytes(bytes);
    const StreamTimer& timer = reader.timer();
    if (!timer.has_tokens()) return true;
    if (aborter) aborter->arm();
    return plan.disconnect_after == 0 || timer.output_tokens() < plan.disconnect_after;
  };
  const HttpResult http = client.post_json(api_path(settings.backend), body, on_body);
  reader.finish();
  const double latency = seconds_since(start);
  const StreamTimer& timer = reader.timer();
  RequestResult result = result_of(Outcome::Cut, request.prompt_len);
  if (!http.closed_by_receiver) {
    if (!http.ok()) return failure(http.describe(), request.prompt_len);
    if (!reader.error().empty()) return failure(reader.error(), request.prompt_len);
    result = ended(reader.finish_reason(), plan, request.prompt_len);
    if (result.ok() && !timer.has_tokens()) {
      return failure("the response streamed no tokens", request.prompt_len);
    }
  }
  result.output_len = timer.output_tokens();
  result.ttft = timer.ttft();
  result.latency = latency;
  result.itl = timer.itl();
  result.spec_verify_ct = timer.spec_verify_ct();
  result.generated_text = timer.text();
  result.output_ids = reader.output_ids();
  return result;
}

// Without streaming, the first token is seen only with the whole response: TTFT = latency.
RequestResult send_whole(const HttpClient& client, const RequestSettings& settings,
                         const std::string& body, const BenchRequest& request,
                         const RequestPlan& plan, Aborter* aborter) {
  const Clock::time_point start = Clock::now();
  if (aborter) aborter->arm();
  const HttpResult http = client.post_json(api_path(settings.backend), body);
  const double latency = seconds_since(start);
  if (!http.ok()) return failure(http.describe(), request.prompt_len);
  const json response = json::parse(http.body, nullptr, false);
  if (response.is_discarded())
    return failure("malformed response: " + http.body.substr(0, 200), request.prompt_len);
  ChunkDelta delta = parse_response(settings.backend, response);
  if (!delta.error.empty()) return failure("server error: " + delta.error, request.prompt_len);
  RequestResult result = ended(delta.finish_reason, plan, request.prompt_len);
  if (result.outcome == Outcome::Failed) return result;
  result.output_len = delta.completion_tokens.value_or(0);
  result.spec_verify_ct = delta.spec_verify_ct.value_or(0);
  result.ttft = latency;
  result.latency = latency;
  result.generated_text = std::move(delta.text);
  result.output_ids = delta.output_ids.value_or(std::vector<int32_t>{});
  return result;
}

}  // namespace

RequestResult send_request(const HttpClient& client, const RequestSettings& settings,
                           const BenchRequest& request, const RequestPlan& plan) {
  const RequestSpec spec{.prompt = request.prompt,
                         .max_tokens = request.output_len,
                         .ignore_eos = settings.ignore_eos,
                         .stream = plan.stream,
                         .model = settings.model,
                         .extra_body = settings.extra_body,
                         .rid = plan.rid};
  try {
    const std::string body = request_body(settings.backend, spec).dump();
    std::unique_ptr<Aborter> aborter;
    if (plan.abort_delay_s && !plan.rid.empty()) {
      aborter = std::make_unique<Aborter>(client, plan.rid, *plan.abort_delay_s);
    }
    return plan.stream ? send_streaming(client, settings, body, request, plan, aborter.get())
                       : send_whole(client, settings, body, request, plan, aborter.get());
  } catch (const std::exception& e) {  // e.g. a prompt that is not UTF-8 cannot be put in JSON
    return failure(std::string("client error: ") + e.what(), request.prompt_len);
  }
}

}  // namespace mlaserve::bench_serving
