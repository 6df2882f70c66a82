// The front door of the engine for the HTTP server: a request to generate tokens, the events it
// produces, and the handle the server submits through. The server owns text (tokenizing,
// detokenizing, stop strings, API formats); the engine owns tokens, scheduling and the ranks.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sampling/sampling.h"

namespace mlaserve::sched {

// Structured output: which tokens a request may generate next (a grammar over the output text).
// The engine asks before each sample and reports every generated token; it alone owns the
// end-of-sequence ids (EOS, stop_token_ids), which it allows when can_end(). Used only by the
// engine's thread. fill_allowed and accept may throw mlaserve::Error (e.g. a grammar too
// ambiguous at this point): the request then ends with that error.
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets bit (id % 64) of allowed[id / 64] for each text token that may come next, clears the rest.
  virtual void fill_allowed(std::span<uint64_t> allowed) = 0;
  virtual bool can_end() const = 0;   // the output so far is complete
  virtual bool must_end() const = 0;  // complete, and nothing may follow: the request stops
  virtual void accept(int32_t token) = 0;
};

struct GenerationRequest {
  std::vector<int32_t> prompt;  // token ids (BOS included if the API added it)
  int64_t max_new_tokens = 128;
  sampling::SamplingParams sampling;
  std::vector<int32_t> stop_token_ids;  // finish with reason "stop" after emitting one of these
  bool ignore_eos = false;              // when false, the model's EOS ids also stop
  int top_logprobs = 0;                 // alternatives per token to report (0..20)
  bool logprobs = false;                // report the chosen token's logprob
  std::shared_ptr<TokenConstraint> constraint;  // structured output; null: any token
  // --enable-priority-scheduling: higher values are admitted first among a DP group's waiting
  // requests, preempting lower running ones when the group is full; 0 without the flag.
  int32_t priority = 0;
  // Prefix-cache isolation (vLLM's and SGLang's cache_salt): requests share cached prefixes only
  // with requests of the same salt ("" : no salt).
  std::string cache_salt;
};

// Rejected: the request cannot run as asked (prompt plus max_new_tokens over the context or the
// KV capacity), the client's fault; Error: the engine failed.
enum class FinishReason { None, Stop, Length, Abort, Error, Rejected };

// One generated token (or the end of the request). Delivered in order, per request.
struct TokenEvent {
  int32_t token = -1;                            // -1 when the event only finishes the request
  float logprob = 0.0f;                          // when requested
  std::vector<sampling::TokenLogprob> top;       // when top_logprobs > 0
  FinishReason finish = FinishReason::None;      // set on the request's last event
  std::string error;                             // Error, Rejected: why
  int64_t prompt_tokens = 0, cached_tokens = 0;  // filled on the first event
  double queue_seconds = 0;    // first event: from submit to the step that began its prefill
  int64_t spec_verify_ct = 0;  // speculative verify steps of the request so far
};

using EventSink = std::function<void(const TokenEvent&)>;

// Thread-safe: HTTP handler threads call it; events arrive on the engine thread (sinks must be
// quick and must not call back into the handle).
class EngineHandle {
 public:
  virtual ~EngineHandle() = default;
  // Queues a request; returns its id. A request that can never fit (prompt plus max_new_tokens
  // over the context or the KV capacity) gets one event, finished with FinishReason::Rejected.
  virtual uint64_t submit(GenerationRequest request, EventSink sink) = 0;
  // Stops a request at the next step and frees its KV (client gone, stop string matched).
  virtual void abort(uint64_t id) = 0;
  // Drops cached prefixes (POST /flush_cache). Returns false when requests are running.
  virtual bool flush_cache() = 0;
  // Server info for /get_server_info, /get_load, /metrics (layout, KV capacity and usage, per-
  // group queue and running counts, token counters).
  virtual nlohmann::json status() const = 0;
  virtual int64_t context_length() const = 0;
};

}  // namespace mlaserve::sched
