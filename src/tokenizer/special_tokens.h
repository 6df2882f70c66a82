// Which ids encode(add_special_tokens=true) adds, and the special-token strings of
// tokenizer_config.json.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "tokenizer/tokenizer_state.h"

namespace mlaserve::tokenizer {

using TokenLookup = std::function<std::optional<int32_t>(std::string_view)>;

// A tokenizer_config special token ("bos_token" etc.): a string, or an AddedToken object with
// "content"; nullopt when absent or null.
std::optional<std::string> config_token(const nlohmann::json& config, const char* key);

// Follows HF Python: when tokenizer_config has add_bos_token/add_eos_token (LlamaTokenizerFast
// and friends), they decide; otherwise tokenizer.json's post_processor does (ByteLevel adds
// nothing; TemplateProcessing, RobertaProcessing, BertProcessing and Sequence are read).
SpecialTokenIds special_token_ids(const nlohmann::json& post_processor,
                                  const nlohmann::json& config, const TokenLookup& lookup);

}  // namespace mlaserve::tokenizer
