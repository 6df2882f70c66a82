// Kimi-K2's tokenizer as its model directory ships it: `tiktoken.model` (tiktoken's ranks) and
// `tokenizer_config.json`, whose added_tokens_decoder names the special tokens by id (they come
// after the ranks; tokenization_kimi.py).
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string_view>

#include "tokenizer/tokenizer_state.h"

namespace mlaserve::tokenizer {

// How many ids after the ranks are special tokens (tokenization_kimi.py's
// num_reserved_special_tokens); those added_tokens_decoder does not name are
// <|reserved_token_ID|>.
inline constexpr int32_t kTiktokenReservedSpecialTokens = 256;

// Kimi-K2's pre-tokenizer pattern in the PCRE2 form this tokenizer runs (see the definition).
extern const std::string_view kKimiK2Pattern;

// The model, pre-tokenizer and added tokens from tiktoken.model's text (`file_name` for errors)
// and tokenizer_config.json; the loader fills in the rest of the state.
std::shared_ptr<TokenizerState> tiktoken_state(std::string_view model_text,
                                               std::string_view file_name,
                                               const nlohmann::json& config);

}  // namespace mlaserve::tokenizer
