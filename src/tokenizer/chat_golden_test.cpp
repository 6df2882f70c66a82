// Every case of tests/data/tokenizer/chat_cases.json: DeepSeek-V3's chat template rendered by
// our interpreter, then encoded; and the tool-call cases of chat_tool_cases.json.
#include <gtest/gtest.h>

#include "tokenizer/tokenizer_test_util.h"

namespace mlaserve::tokenizer {
namespace {

using testing::deepseek_v3_tokenizer;

std::vector<nlohmann::json> chat_cases(const std::string& path) {
  const nlohmann::json file = testing::read_json(path);
  return std::vector<nlohmann::json>(file.at("cases").begin(), file.at("cases").end());
}

class ChatGoldenCase : public ::testing::TestWithParam<nlohmann::json> {};

TEST_P(ChatGoldenCase, RendersEncodesAndDecodes) {
  const nlohmann::json& golden = GetParam();
  ASSERT_TRUE(deepseek_v3_tokenizer().has_chat_template());
  const std::string rendered = deepseek_v3_tokenizer().apply_chat_template(
      golden.at("messages"), golden.at("add_generation_prompt").get<bool>());
  EXPECT_EQ(rendered, golden.at("rendered").get<std::string>());
  const auto ids = golden.at("ids").get<std::vector<int32_t>>();
  EXPECT_EQ(deepseek_v3_tokenizer().encode(rendered, false), ids);
  EXPECT_EQ(deepseek_v3_tokenizer().decode(ids, true),
            golden.at("decoded_skip_special").get<std::string>());
}

INSTANTIATE_TEST_SUITE_P(DeepSeekV3, ChatGoldenCase,
                         ::testing::ValuesIn(chat_cases("tests/data/tokenizer/chat_cases.json")),
                         [](const auto& info) {
                           return info.param.at("id").template get<std::string>();
                         });

// The V3 template's tool-call and tool-output branches, rendered by Python jinja2 (the engine
// HF transformers uses) into tests/data/tokenizer/chat_tool_cases.json.
class ChatToolCase : public ::testing::TestWithParam<nlohmann::json> {};

TEST_P(ChatToolCase, RendersAsJinja2Does) {
  const nlohmann::json& golden = GetParam();
  EXPECT_EQ(deepseek_v3_tokenizer().apply_chat_template(
                golden.at("messages"), golden.at("add_generation_prompt").get<bool>()),
            golden.at("rendered").get<std::string>());
}

INSTANTIATE_TEST_SUITE_P(
    DeepSeekV3, ChatToolCase,
    ::testing::ValuesIn(chat_cases("tests/data/tokenizer/chat_tool_cases.json")),
    [](const auto& info) { return info.param.at("id").template get<std::string>(); });

}  // namespace
}  // namespace mlaserve::tokenizer
