// Sends one benchmark request as its plan says (streamed or whole, closed early, aborted) and
// measures it.
#pragma once

#include <string>

#include "bench_serving/backend.h"
#include "bench_serving/dataset.h"
#include "bench_serving/http_client.h"
#include "bench_serving/metrics.h"
#include "bench_serving/request_plan.h"

namespace mlaserve::bench_serving {

struct RequestSettings {
  Backend backend = Backend::Mlaserve;
  bool ignore_eos = true;
  std::string model;          // for the OpenAI backends
  nlohmann::json extra_body;  // merged into every request body
};

// Never throws for what the server does: a refused connection, an HTTP error, a timeout, a
// malformed chunk or a stream without tokens make a failed result carrying the reason.
// A stream the plan closes early is Cut; a request the plan aborts (it needs plan.rid and the
// native API) is Aborted when the server ends it with finish reason "abort", and Ok when the
// abort came too late. An abort the plan did not ask for is a failure.
// output_len is the server's count; when a server reports none, a stream counts the tokens
// its chunks carried, and a whole response leaves 0 (the caller may count the text).
// retokenized_len is left for the caller, who re-encodes after the run so that encoding does
// not compete with the server for the CPU while it is being measured.
RequestResult send_request(const HttpClient& client, const RequestSettings& settings,
                           const BenchRequest& request, const RequestPlan& plan);

}  // namespace mlaserve::bench_serving
