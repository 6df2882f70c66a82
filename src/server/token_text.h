// How a single token is shown in logprobs: its text, or, when its bytes are only part of a
// UTF-8 character, "bytes:\xNN..." (vLLM's convention), plus the raw bytes (OpenAI's "bytes").
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace mlaserve::server {

std::string token_display_text(const tokenizer::Tokenizer& tokenizer, int32_t id);
nlohmann::json token_bytes(const tokenizer::Tokenizer& tokenizer, int32_t id);

}  // namespace mlaserve::server
