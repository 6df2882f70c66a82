// Kimi-K2's tokenizer from tiktoken.model: tests/data/kimi-tokenizer's cases, encoded by the npm
// js-tiktoken package with the same ranks, special tokens and pattern, and malformed files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tokenizer/tiktoken_load.h"
#include "tokenizer/tiny_tokenizer_test_util.h"
#include "tokenizer/tokenizer_test_util.h"

namespace mlaserve::tokenizer {
namespace {

using ::testing::HasSubstr;
using testing::kimi_tokenizer;

std::vector<nlohmann::json> kimi_cases() {
  const nlohmann::json file = testing::read_json("tests/data/kimi-tokenizer/cases.json");
  return std::vector<nlohmann::json>(file.at("cases").begin(), file.at("cases").end());
}

class KimiCase : public ::testing::TestWithParam<nlohmann::json> {
 protected:
  std::string text() const { return GetParam().at("text").get<std::string>(); }
  std::vector<int32_t> ids() const { return GetParam().at("ids").get<std::vector<int32_t>>(); }
};

TEST_P(KimiCase, EncodesAsJsTiktoken) {
  EXPECT_EQ(kimi_tokenizer().encode(text(), /*add_special_tokens=*/false), ids());
}

TEST_P(KimiCase, DecodesBackToTheText) {
  EXPECT_EQ(kimi_tokenizer().decode(ids(), /*skip_special_tokens=*/false), text());
  EXPECT_EQ(testing::decode_streaming(kimi_tokenizer(), ids(), false), text());
}

INSTANTIATE_TEST_SUITE_P(KimiTokenizer, KimiCase, ::testing::ValuesIn(kimi_cases()),
                         [](const auto& info) {
                           return info.param.at("id").template get<std::string>();
                         });

// The special tokens sit after the ranks as tokenizer_config's added_tokens_decoder says, the
// rest of the reserved range is <|reserved_token_ID|>, and tokens are spelled byte-level.
TEST(KimiTokenizer, SpecialTokensAfterTheRanks) {
  const Tokenizer& tok = kimi_tokenizer();
  const nlohmann::json config =
      testing::read_json("tests/data/kimi-tokenizer/tokenizer_config.json");
  int32_t named = 0;
  for (const auto& [key, entry] : config.at("added_tokens_decoder").items()) {
    EXPECT_EQ(tok.token_to_id(entry.at("content").get<std::string>()), std::stoi(key));
    EXPECT_TRUE(tok.is_special(std::stoi(key)));
    ++named;
  }
  const int32_t ranks = tok.vocab_size() - kTiktokenReservedSpecialTokens;
  EXPECT_GT(named, 20);
  EXPECT_EQ(tok.bos_id(), tok.token_to_id("[BOS]"));
  EXPECT_EQ(tok.eos_id(), ranks + 1);
  EXPECT_EQ(tok.id_to_token(ranks + 5), fmt::format("<|reserved_token_{}|>", ranks + 5));
  EXPECT_EQ(tok.id_to_token(' '),
            "\u0120");  // byte-level spelling, as Kimi's convert_ids_to_tokens
  EXPECT_EQ(tok.encode("a", /*add_special_tokens=*/true), tok.encode("a", false));
  EXPECT_EQ(tok.decode(tok.encode("x<|im_end|>y", false), /*skip_special_tokens=*/true), "xy");
}

// Kimi's pattern keeps Han runs apart from other letters, and CJK punctuation (Script Common,
// though its Script_Extensions include Han) out of the Han runs.
TEST(KimiTokenizer, HanRunsArePiecesOfTheirOwn) {
  const PreTokenizer pre = PreTokenizer::from_matches(kKimiK2Pattern);
  std::vector<std::string> pieces;
  std::deque<std::string> arena;
  pre.split(
      "中文English混合、Text'S  \n\n x", [&](std::string_view p) { pieces.emplace_back(p); },
      arena);
  EXPECT_EQ(pieces,
            (std::vector<std::string>{"中文", "English", "混合", "、Text'S", "  \n\n", " x"}));
}

std::string tiktoken_load_error(const std::string& model) {
  const testing::TinyTokenizerDir dir;
  dir.write("tiktoken.model", model);
  try {
    Tokenizer::load(dir.path());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// All 256 bytes, as a tiktoken.model's first lines.
std::string byte_lines() {
  std::string lines;
  const std::string_view alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int byte = 0; byte < 256; ++byte) {
    lines += fmt::format("{}{}==", alphabet[byte >> 2], alphabet[(byte & 3) << 4]);
    lines += fmt::format(" {}\n", byte);
  }
  return lines;
}

TEST(KimiTokenizer, LoadsAFileOfBytesAndAMerge) {
  const testing::TinyTokenizerDir dir;
  dir.write("tiktoken.model", byte_lines() + "YWI= 256\n");  // "ab"
  const Tokenizer tok = Tokenizer::load(dir.path());
  EXPECT_EQ(tok.encode("abc", false), (std::vector<int32_t>{256, 'c'}));
  EXPECT_EQ(tok.vocab_size(), 257 + kTiktokenReservedSpecialTokens);
}

TEST(KimiTokenizer, MalformedLinesNameTheFileAndLine) {
  const std::string bytes = byte_lines();
  for (const auto& [line, message] : std::vector<std::pair<std::string, std::string>>{
           {"YWI=256", "expected 'BASE64 RANK'"},
           {"YWI= 256 7", "expected 'BASE64 RANK'"},
           {"YW*= 256", "'YW*=' is not valid base64"},
           {"YWI 256", "'YWI' is not valid base64"},
           {"YWI= x", "rank 'x' is not an integer"},
           {"YWI= -1", "rank '-1' is not an integer"},
           {"YWI= 99999999999", "rank '99999999999' is not an integer"},
           {"YWI= 5", "rank 5 is repeated (first on line 6)"},
           {"YQ== 256", "the token is repeated (first on line 98)"},
           {" 256", "the token is empty"},
       }) {
    const std::string error = tiktoken_load_error(bytes + line + "\n");
    EXPECT_THAT(error, HasSubstr("tiktoken.model line 257: " + message)) << line;
  }
}

TEST(KimiTokenizer, MissingByteAndBadSpecialIds) {
  EXPECT_THAT(tiktoken_load_error("YWI= 0\n"), HasSubstr("no token for the byte 0x00"));
  const testing::TinyTokenizerDir dir;
  dir.write("tiktoken.model", byte_lines());
  dir.write("tokenizer_config.json",
            R"({"added_tokens_decoder": {"12": {"content": "<x>", "special": true}}})");
  try {
    Tokenizer::load(dir.path());
    FAIL() << "loaded a special token on a rank's id";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("added_tokens_decoder key '12' is not an id after the 256"));
  }
}

}  // namespace
}  // namespace mlaserve::tokenizer
