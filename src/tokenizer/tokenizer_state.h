// What a loaded tokenizer consists of; shared, immutable, by Tokenizer copies.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/chat_format.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/pre_tokenizer.h"

namespace mlaserve::tokenizer {

// The ids that encode(add_special_tokens=true) puts around the text.
struct SpecialTokenIds {
  std::vector<int32_t> prefix;
  std::vector<int32_t> suffix;
};

// What a chat template can use: the template (or why it could not be parsed) and the
// special-token variables; or the built-in format that replaces a template.
struct ChatTemplateSetup {
  ChatFormatKind kind = ChatFormatKind::None;
  std::optional<ChatTemplate> chat_template;
  std::string unusable_reason;  // set when tokenizer_config has a template that does not parse
  std::string source;           // the template's text, as configured
  nlohmann::json special_token_variables = nlohmann::json::object();
};

// A Jinja template's setup from its text (kept unusable, with the reason, if it does not parse).
ChatTemplateSetup chat_setup_from_source(nlohmann::json special_token_variables,
                                         std::string source);

struct TokenizerState {
  // Sets up the added-token matchers; the other members are filled in by the loader.
  TokenizerState(BpeModel bpe, PreTokenizer pre, std::vector<AddedToken> added);

  // An added token's id by its content, else the vocabulary id of `token`.
  std::optional<int32_t> find_token(std::string_view token) const;

  BpeModel model;
  PreTokenizer pre_tokenizer;
  std::vector<AddedToken> added_tokens;
  TokenIdMap added_token_ids;                 // content -> id
  AddedTokenMatcher raw_text_matcher;         // added tokens with normalized=false
  AddedTokenMatcher normalized_text_matcher;  // added tokens with normalized=true
  std::vector<std::string> token_of_id;       // empty string: no token has this id
  std::vector<std::string> bytes_of_id;       // what each id decodes to
  std::vector<bool> known_id;
  std::vector<bool> special_id;
  SpecialTokenIds special_token_ids;
  std::optional<int32_t> bos_id;
  std::optional<int32_t> eos_id;
  ChatTemplateSetup chat;
};

}  // namespace mlaserve::tokenizer
