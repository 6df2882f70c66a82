// Shared helpers for the tokenizer tests, which run from the repository root.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>
#include <string>

#include "tokenizer/tokenizer.h"

namespace mlaserve::tokenizer::testing {

inline constexpr const char* kDeepSeekV3Dir = "tests/data/tokenizer/deepseek-v3";
inline constexpr const char* kBrownTinyDir = "tests/data/brown-tiny-tokenizer";

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream file(path);
  if (!file) throw std::runtime_error("cannot open " + path + " (run from the repository root)");
  std::stringstream contents;
  contents << file.rdbuf();
  return nlohmann::json::parse(contents.str());
}

inline std::string from_hex(std::string_view hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return bytes;
}

// Tokenizers are loaded once per test binary.
inline const Tokenizer& deepseek_v3() {
  static const Tokenizer tokenizer = Tokenizer::load(kDeepSeekV3Dir);
  return tokenizer;
}

inline const Tokenizer& brown_tiny() {
  static const Tokenizer tokenizer = Tokenizer::load(kBrownTinyDir);
  return tokenizer;
}

// Decodes id by id, as a streaming server would, and joins the pieces.
inline std::string decode_streaming(const Tokenizer& tokenizer, std::span<const int32_t> ids,
                                    bool skip_special_tokens) {
  IncrementalDecoder decoder(tokenizer, skip_special_tokens);
  std::string text;
  for (const int32_t id : ids) text += decoder.push(id);
  return text + decoder.flush();
}

}  // namespace mlaserve::tokenizer::testing
