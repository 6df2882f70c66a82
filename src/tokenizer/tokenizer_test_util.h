// Helpers for the tokenizer tests and microbenchmarks, with the shared ones (the test tokenizers,
// read_json) from tests/support. They run from the repository root.
#pragma once

#include <span>
#include <string>

#include "support/files.h"
#include "support/tokenizers.h"
#include "tokenizer/tokenizer.h"

namespace mlaserve::testing {

inline std::string from_hex(std::string_view hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return bytes;
}

// Decodes id by id, as a streaming server would, and joins the pieces.
inline std::string decode_streaming(const tokenizer::Tokenizer& tok, std::span<const int32_t> ids,
                                    bool skip_special_tokens) {
  tokenizer::IncrementalDecoder decoder(tok, skip_special_tokens);
  std::string text;
  for (const int32_t id : ids) text += decoder.push(id);
  return text + decoder.flush();
}

}  // namespace mlaserve::testing
