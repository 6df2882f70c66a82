// Pieces of OpenAI response bodies shared by /v1/completions and /v1/chat/completions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/choice_state.h"
#include "server/generation_batch.h"
#include "tokenizer/tokenizer.h"

namespace mlaserve::server {

// "cmpl-" / "chatcmpl-" followed by 32 random hex digits.
std::string new_request_id(std::string_view prefix);
int64_t unix_time_now();

// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details":
// {"cached_tokens"}}; a prompt shared by n choices counts once.
nlohmann::json usage_json(const GenerationBatch& batch);

// The finish_reason of a choice that has ended.
nlohmann::json finish_reason_json(const Finish* finish);

// Legacy completions shape: {"tokens", "token_logprobs", "top_logprobs", "text_offset"}.
nlohmann::json completion_logprobs_json(const tokenizer::Tokenizer& tokenizer,
                                        std::span<const GeneratedToken> tokens,
                                        bool with_alternatives);
// Chat shape: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}.
nlohmann::json chat_logprobs_json(const tokenizer::Tokenizer& tokenizer,
                                  std::span<const GeneratedToken> tokens);

}  // namespace mlaserve::server
