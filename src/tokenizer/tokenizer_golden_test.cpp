// Every case of tests/data/tokenizer/cases.json against the real DeepSeek-V3 tokenizer.
#include <gtest/gtest.h>

#include "tokenizer/tokenizer_test_util.h"

namespace mlaserve::tokenizer {
namespace {

using testing::deepseek_v3_tokenizer;
using testing::from_hex;

std::vector<nlohmann::json> golden_cases() {
  const nlohmann::json file = testing::read_json("tests/data/tokenizer/cases.json");
  return std::vector<nlohmann::json>(file.at("cases").begin(), file.at("cases").end());
}

class GoldenCase : public ::testing::TestWithParam<nlohmann::json> {
 protected:
  std::string text() const { return from_hex(GetParam().at("text_utf8_hex").get<std::string>()); }
  std::vector<int32_t> ids(const char* key) const {
    return GetParam().at(key).get<std::vector<int32_t>>();
  }
  std::string expected(const char* key) const { return GetParam().at(key).get<std::string>(); }
};

TEST_P(GoldenCase, EncodesWithoutSpecialTokens) {
  EXPECT_EQ(deepseek_v3_tokenizer().encode(text(), false), ids("ids"));
}

TEST_P(GoldenCase, EncodesWithBos) {
  EXPECT_EQ(deepseek_v3_tokenizer().encode(text(), true), ids("ids_with_special"));
}

TEST_P(GoldenCase, Decodes) {
  EXPECT_EQ(deepseek_v3_tokenizer().decode(ids("ids"), false), expected("decoded"));
  EXPECT_EQ(deepseek_v3_tokenizer().decode(ids("ids_with_special"), false),
            expected("decoded_with_special"));
  EXPECT_EQ(deepseek_v3_tokenizer().decode(ids("ids_with_special"), true),
            expected("decoded_skip_special"));
}

TEST_P(GoldenCase, TokensAreTheVocabularySpellings) {
  const std::vector<int32_t> token_ids = ids("ids");
  const auto tokens = GetParam().at("tokens").get<std::vector<std::string>>();
  ASSERT_EQ(token_ids.size(), tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    EXPECT_EQ(deepseek_v3_tokenizer().id_to_token(token_ids[i]), tokens[i]) << "position " << i;
    EXPECT_EQ(deepseek_v3_tokenizer().token_to_id(tokens[i]), token_ids[i]) << "position " << i;
  }
}

TEST_P(GoldenCase, StreamingDecodeJoinsToTheFullDecode) {
  EXPECT_EQ(testing::decode_streaming(deepseek_v3_tokenizer(), ids("ids"), false),
            expected("decoded"));
  EXPECT_EQ(testing::decode_streaming(deepseek_v3_tokenizer(), ids("ids_with_special"), true),
            expected("decoded_skip_special"));
}

INSTANTIATE_TEST_SUITE_P(DeepSeekV3, GoldenCase, ::testing::ValuesIn(golden_cases()),
                         [](const auto& info) {
                           return info.param.at("id").template get<std::string>();
                         });

}  // namespace
}  // namespace mlaserve::tokenizer
