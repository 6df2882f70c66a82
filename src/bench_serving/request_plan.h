// How each benchmark request is sent beyond its prompt and length: streamed or whole, and the
// faults a soak test injects (a client that closes its connection mid-stream, a request aborted
// through POST /abort_request from another connection). Drawn from the run's seed, so that a run
// can be repeated request for request.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bench_serving/dataset.h"
#include "bench_serving/rng.h"

namespace mlaserve::bench_serving {

struct MixOptions {
  double stream_fraction = 1.0;      // of all requests
  double disconnect_fraction = 0.0;  // of the streaming requests
  double abort_fraction = 0.0;       // of the requests that do not disconnect
};

// Aborts wait up to this long after their trigger (the first token, or the send): short, so that
// most land while the request generates even on a fast server.
inline constexpr double kMaxAbortDelayS = 0.1;

struct RequestPlan {
  bool stream = true;
  // Streaming only: close the connection once this many tokens have arrived; 0: read to the end.
  int64_t disconnect_after = 0;
  // Abort this long after the first token (streaming) or after sending (not streaming).
  std::optional<double> abort_delay_s;
  std::string rid;  // the native API's request id; set for aborted requests (the abort names it)
};

// Each kind is given to exactly round(fraction * eligible) requests, chosen uniformly: streaming
// among all; disconnecting among the streaming requests of 2 tokens or more, after 1 to
// output_len - 1 tokens (so always before the end); aborted among the rest, after
// [0, kMaxAbortDelayS) seconds. A fraction outside [0, 1] is an Error.
std::vector<RequestPlan> plan_requests(const MixOptions& options,
                                       std::span<const BenchRequest> requests, Rng& rng);

}  // namespace mlaserve::bench_serving
