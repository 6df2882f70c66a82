#include "tokenizer/tiktoken_load.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace mlaserve::tokenizer {

// Kimi-K2's pat_str (tokenization_kimi.py in moonshotai/Kimi-K2-Instruct) is
//   [\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*
//   [\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?
//   [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// for tiktoken's Rust regex, where `[A&&[^B]]` is a class intersection. PCRE2 has none, so each
// such class is a lookahead that rules out Han before the class: (?:(?!\p{sc=Han})[A]). Rust
// reads \p{Han} as the Script property; PCRE2 10.40+ reads a bare script name as
// Script_Extensions (which would add CJK punctuation such as U+3001), hence sc=Han throughout.
// \s becomes White_Space, as in Rust, by Regex::from_oniguruma's translation.
const std::string_view kKimiK2Pattern =
    R"([\p{sc=Han}]+)"
    R"(|[^\r\n\p{L}\p{N}]?(?:(?!\p{sc=Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])*)"
    R"((?:(?!\p{sc=Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?(?:(?!\p{sc=Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])+)"
    R"((?:(?!\p{sc=Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {

using nlohmann::json;

// added_tokens_decoder ({"ID": {"content": ..., "special": ...}}) as added tokens, then a
// <|reserved_token_ID|> for each unnamed id of the reserved range after the ranks.
std::vector<AddedToken> special_tokens(const json& config, int32_t rank_count) {
  std::vector<AddedToken> tokens;
  if (const auto decoder = config.find("added_tokens_decoder"); decoder != config.end()) {
    for (const auto& [key, entry] : decoder->items()) {
      int32_t id = -1;
      const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), id);
      if (error != std::errc() || end != key.data() + key.size() || id < rank_count ||
          id > kMaxTiktokenRank + kTiktokenReservedSpecialTokens) {
        fail("added_tokens_decoder key '{}' is not an id after the {} ranks", key, rank_count);
      }
      tokens.push_back({id, entry.at("content").get<std::string>(), entry.value("special", true),
                        entry.value("lstrip", false), entry.value("rstrip", false),
                        entry.value("normalized", false)});
    }
  }
  for (int32_t id = rank_count; id < rank_count + kTiktokenReservedSpecialTokens; ++id) {
    if (std::none_of(tokens.begin(), tokens.end(),
                     [&](const AddedToken& t) { return t.id == id; })) {
      tokens.push_back({id, fmt::format("<|reserved_token_{}|>", id), true, false, false, false});
    }
  }
  return tokens;
}

}  // namespace

std::shared_ptr<TokenizerState> tiktoken_state(std::string_view model_text,
                                               std::string_view file_name, const json& config) {
  const std::vector<RankedToken> ranks = parse_tiktoken_model(model_text, file_name);
  int32_t rank_count = 0;
  for (const RankedToken& token : ranks) rank_count = std::max(rank_count, token.rank + 1);
  return std::make_shared<TokenizerState>(BpeModel(ranks),
                                          PreTokenizer::from_matches(kKimiK2Pattern),
                                          special_tokens(config, rank_count));
}

}  // namespace mlaserve::tokenizer
