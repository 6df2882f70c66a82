// Reads tokenizer.json in one streaming pass. The BPE vocabulary and merges, nearly all of the
// file, go straight into flat lists; building a JSON document for them would dominate load time.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mlaserve::tokenizer {

struct BpeMerge {
  std::string left;
  std::string right;
};

struct TokenizerJson {
  nlohmann::json document;  // the whole file except model.vocab and model.merges
  std::optional<std::vector<std::pair<std::string, int32_t>>> vocab;  // model.vocab, in file order
  std::optional<std::vector<BpeMerge>> merges;  // model.merges, "a b" strings or ["a", "b"] pairs
};

// Throws mlaserve::Error for invalid JSON (with its position) or a malformed vocab or merge.
TokenizerJson parse_tokenizer_json(std::string_view text);

}  // namespace mlaserve::tokenizer
