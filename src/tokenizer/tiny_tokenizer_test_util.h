// A tiny byte-level BPE tokenizer.json built in the test, to vary one component at a time.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "support/files.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

namespace mlaserve::testing {

// Ids 0..255 are the bytes, 256 is "ab" (the one merge), 257 is the added token "<s>".
inline nlohmann::json tiny_tokenizer_json() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int byte = 0; byte < 256; ++byte) {
    vocab[tokenizer::byte_level::bytes_to_symbols(std::string(1, static_cast<char>(byte)))] = byte;
  }
  vocab["ab"] = 256;
  return {
      {"version", "1.0"},
      {"added_tokens", {{{"id", 257}, {"content", "<s>"}, {"special", true}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b"}}}},
  };
}

// A fresh directory holding the given files.
class TinyTokenizerDir {
 public:
  void write(const std::string& name, const std::string& contents) const {
    std::ofstream(dir_ / name, std::ios::binary) << contents;
  }
  tokenizer::Tokenizer load(const nlohmann::json& tokenizer_json,
                            const nlohmann::json& config = nlohmann::json()) const {
    write("tokenizer.json", tokenizer_json.dump());
    if (config.is_null()) {
      std::filesystem::remove(dir_ / "tokenizer_config.json");
    } else {
      write("tokenizer_config.json", config.dump());
    }
    return tokenizer::Tokenizer::load(dir_.path());
  }
  // The message of the Error that loading throws, or "" when it loads.
  std::string load_error(const nlohmann::json& tokenizer_json,
                         const nlohmann::json& config = nlohmann::json()) const {
    try {
      load(tokenizer_json, config);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  const std::filesystem::path& path() const { return dir_.path(); }

 private:
  TempDir dir_;
};

}  // namespace mlaserve::testing
