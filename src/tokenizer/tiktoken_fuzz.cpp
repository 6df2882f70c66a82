// libFuzzer harness (fuzz/README.md): Kimi's tiktoken.model reader and the tokenizer built from
// what it reads. The input is a tiktoken.model's text: parsing must succeed or be an
// mlaserve::Error; a vocabulary that parses and has every byte must encode text (Kimi's
// pattern, the derived merges) into ids whose bytes are the text again. Any other exception
// escapes and is reported as a crash.
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tiktoken_load.h"
#include "tokenizer/tiktoken_model.h"

namespace {

using namespace mlaserve::tokenizer;

void require(bool holds) {
  if (!holds) std::abort();
}

// Texts that reach every alternative of Kimi's pattern.
constexpr std::string_view kTexts[] = {
    "Hello, World! It's 2026-12-06.\n\n  code(x) { return x; }\r\n",
    "中文English混合、Text'S  ８９ 😀👍🏽\t\t\n x",
};

void encode_round_trip(const std::vector<RankedToken>& ranks) {
  const BpeModel model(ranks);
  const PreTokenizer pre = PreTokenizer::from_matches(kKimiK2Pattern);
  std::unordered_map<int32_t, std::string_view> bytes_of_rank;
  for (const RankedToken& token : ranks) bytes_of_rank[token.rank] = token.bytes;
  for (const std::string_view text : kTexts) {
    std::vector<int32_t> ids;
    std::deque<std::string> arena;
    pre.split(
        text, [&](std::string_view piece) { model.encode(piece, ids); }, arena);
    std::string decoded;
    for (const int32_t id : ids) decoded += bytes_of_rank.at(id);
    require(decoded == text);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<RankedToken> ranks;
  try {
    ranks = parse_tiktoken_model(text, "tiktoken.model");
  } catch (const mlaserve::Error&) {
    return 0;
  }
  try {
    encode_round_trip(ranks);
  } catch (const mlaserve::Error&) {
    // a byte without a token
  }
  return 0;
}
