// The generation options of a request body, in OpenAI's field names (top level) or SGLang's
// (inside "sampling_params"), checked and turned into engine requests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sampling/sampling.h"
#include "sched/generation.h"
#include "server/structured_output.h"

namespace mlaserve::server {

enum class Api { Completions, Chat, Native };

struct GenerationOptions {
  sampling::SamplingParams sampling;
  std::optional<int64_t> max_new_tokens;  // as requested; resolved per prompt
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool skip_special_tokens = true;
  int n = 1;
  bool logprobs = false;
  int top_logprobs = 0;
  bool stream = false;
  bool include_usage = false;            // OpenAI stream_options.include_usage
  bool echo = false;                     // completions: prepend the prompt
  bool return_text_in_logprobs = false;  // SGLang: token text beside each logprob
  bool return_timings = false;           // OpenAI routes: each choice's "timings"
  int32_t priority = 0;                  // vLLM's and SGLang's request priority (higher first)
  std::string cache_salt;                // prefix-cache isolation ("" : shared)
  // Structured output: each engine request gets its own walk of the grammar (null: none).
  ConstraintFactory make_constraint;
};

// Fields of /v1/completions (api Completions) or /v1/chat/completions (api Chat).
GenerationOptions parse_openai_options(const nlohmann::json& body, Api api, int32_t vocab_size);
// Fields of Anthropic's /v1/messages: "max_tokens" (required when `needs_max_tokens`),
// "temperature", "top_p", "top_k", "stop_sequences", "stream" (and our "priority").
GenerationOptions parse_anthropic_options(const nlohmann::json& body, bool needs_max_tokens);
// Fields of OpenAI's /v1/responses: "max_output_tokens", "temperature", "top_p", "top_logprobs",
// "stream" (and the sampling fields chat takes: "seed", "top_k", "min_p", penalties, logit_bias;
// "priority", "cache_salt").
GenerationOptions parse_responses_options(const nlohmann::json& body, int32_t vocab_size);
// Fields of /generate: "sampling_params" {...}, "stream", "return_logprob", "top_logprobs_num".
GenerationOptions parse_native_options(const nlohmann::json& body, int32_t vocab_size);

// The engine request for choice `choice_index` of a prompt. With a seed, each of the n choices
// gets its own (seed + index), so they differ yet reproduce.
sched::GenerationRequest engine_request(const GenerationOptions& options,
                                        std::vector<int32_t> prompt, int64_t max_new_tokens,
                                        size_t choice_index);

}  // namespace mlaserve::server
