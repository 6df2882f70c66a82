// Rank 0's record of one request while the engine serves it.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "sched/generation.h"

namespace mlaserve::sched {

struct ActiveRequest {
  uint64_t id = 0;
  GenerationRequest request;
  EventSink sink;
  int group = 0;
  std::vector<int32_t> slots;    // KV slots reserved for prompt + max_new_tokens
  int64_t n_prefilled = 0;       // prompt tokens already sent to the forward
  std::vector<int32_t> generated;
  bool aborted = false;
  std::chrono::steady_clock::time_point arrival = std::chrono::steady_clock::now();

  int64_t prompt_len() const { return static_cast<int64_t>(request.prompt.size()); }
  int64_t kv_tokens_needed() const { return prompt_len() + request.max_new_tokens; }
  bool prefill_done() const { return n_prefilled == prompt_len(); }
  // Tokens still to compute: the rest of the prompt and of the generation budget.
  int64_t outstanding_tokens() const {
    return prompt_len() - n_prefilled + request.max_new_tokens - static_cast<int64_t>(generated.size());
  }
};

}  // namespace mlaserve::sched
