// The chat formats of DeepSeek-V3.1, Kimi-K2 and V3.2: V3.1's Jinja template with
// chat_template_kwargs and Kimi-K2's templates against Python jinja2's renderings
// (tests/data/chat-v31, tests/data/chat-kimi), and the built-in V3.2 encoder against
// DeepSeek's own test vector and cases encoded by DeepSeek's encoder (tests/data/chat-v32).
#include <gmock/gmock.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "tokenizer/deepseek_v32_encoding.h"
#include "tokenizer/tokenizer_test_util.h"

namespace mlaserve::tokenizer {
namespace {

using testing::deepseek_v3_tokenizer;
using ::testing::HasSubstr;
using testing::read_text;

constexpr const char* kV31Dir = "tests/data/chat-v31";
constexpr const char* kV32Dir = "tests/data/chat-v32";
constexpr const char* kKimiDir = "tests/data/chat-kimi";

nlohmann::ordered_json read_ordered(const std::string& path) {
  return nlohmann::ordered_json::parse(read_text(path));
}

const Tokenizer& v31_tokenizer() {
  static const Tokenizer tokenizer = deepseek_v3_tokenizer().with_chat_template(
      read_text(std::string(kV31Dir) + "/chat_template.jinja"));
  return tokenizer;
}

std::string rstrip(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text;
}

std::vector<nlohmann::ordered_json> cases_of(const std::string& path) {
  const nlohmann::ordered_json file = read_ordered(path);
  return {file.at("cases").begin(), file.at("cases").end()};
}

// One case of a folder's renderings.json (render_reference.py): the conversation it names from
// the folder's conversations.json, rendered with `tokenizer`'s chat format and the case's kwargs.
std::string render_golden_case(const Tokenizer& tokenizer, const std::string& dir,
                               const nlohmann::ordered_json& golden) {
  const nlohmann::ordered_json conversations = read_ordered(dir + "/conversations.json");
  for (const auto& conversation : conversations.at("conversations")) {
    if (conversation.at("id") != golden.at("conversation")) continue;
    ChatInput input;
    input.messages = conversation.at("messages");
    input.tools = conversation.value("tools", nlohmann::ordered_json());
    input.kwargs = golden.at("chat_template_kwargs");
    return tokenizer.render_chat(input);
  }
  fail("{} has no conversation {}", dir, golden.at("conversation").dump());
}

std::string golden_case_name(const ::testing::TestParamInfo<nlohmann::ordered_json>& info) {
  return info.param.at("id").get<std::string>();
}

// --- DeepSeek-V3.1 ---

class V31Rendering : public ::testing::TestWithParam<nlohmann::ordered_json> {};

TEST_P(V31Rendering, EqualsJinja2) {
  EXPECT_EQ(render_golden_case(v31_tokenizer(), kV31Dir, GetParam()),
            GetParam().at("rendered").get<std::string>());
}

INSTANTIATE_TEST_SUITE_P(DeepSeekV31, V31Rendering,
                         ::testing::ValuesIn(cases_of(std::string(kV31Dir) + "/renderings.json")),
                         golden_case_name);

// --- Kimi-K2 (Instruct's and Thinking's templates on the Kimi test tokenizer) ---

class KimiRendering : public ::testing::TestWithParam<nlohmann::ordered_json> {};

TEST_P(KimiRendering, EqualsJinja2) {
  const std::string template_file = GetParam().at("template").get<std::string>();
  const Tokenizer tokenizer = testing::kimi_tokenizer().with_chat_template(
      read_text(std::string(kKimiDir) + "/" + template_file));
  EXPECT_EQ(render_golden_case(tokenizer, kKimiDir, GetParam()),
            GetParam().at("rendered").get<std::string>());
}

INSTANTIATE_TEST_SUITE_P(KimiK2, KimiRendering,
                         ::testing::ValuesIn(cases_of(std::string(kKimiDir) + "/renderings.json")),
                         golden_case_name);

TEST(V31Template, ThinkingSwitchEndsThePrompt) {
  ChatInput input;
  input.messages = {{{"role", "user"}, {"content", "Hi"}}};
  EXPECT_THAT(v31_tokenizer().render_chat(input), ::testing::EndsWith("<｜Assistant｜></think>"));
  input.kwargs = {{"thinking", true}};
  EXPECT_THAT(v31_tokenizer().render_chat(input), ::testing::EndsWith("<｜Assistant｜><think>"));
  EXPECT_TRUE(v31_tokenizer().hybrid_thinking());
  EXPECT_FALSE(deepseek_v3_tokenizer().hybrid_thinking());
  EXPECT_EQ(v31_tokenizer().chat_format(), ChatFormatKind::Jinja);
}

TEST(ChatKwargs, ReservedNamesAndThinkingRule) {
  ChatInput input;
  input.messages = {{{"role", "user"}, {"content", "Hi"}}};
  input.kwargs = {{"messages", nlohmann::ordered_json::array()}};
  EXPECT_THROW(v31_tokenizer().render_chat(input), Error);
  EXPECT_TRUE(thinking_requested({{"thinking", true}}));
  EXPECT_FALSE(thinking_requested({{"thinking", false}, {"enable_thinking", true}}));
  EXPECT_TRUE(thinking_requested({{"enable_thinking", true}}));
  EXPECT_FALSE(thinking_requested(nlohmann::ordered_json::object()));
}

// --- DeepSeek-V3.2 ---

// DeepSeek's test_encoding_dsv32.py: the tools join the first message, thinking mode.
TEST(V32Encoder, DeepSeekTestVector) {
  const nlohmann::ordered_json input = read_ordered(std::string(kV32Dir) + "/test_input.json");
  nlohmann::ordered_json messages = input.at("messages");
  messages[0]["tools"] = input.at("tools");
  dsv32::EncodeOptions options;
  options.thinking_mode = dsv32::ThinkingMode::Thinking;
  EXPECT_EQ(dsv32::encode_messages(messages, options),
            rstrip(read_text(std::string(kV32Dir) + "/test_output.txt")));
}

// The same conversation through the tokenizer's chat API: request-level tools, thinking on.
TEST(V32Encoder, ThroughRenderChat) {
  const nlohmann::ordered_json input = read_ordered(std::string(kV32Dir) + "/test_input.json");
  const Tokenizer v32 = deepseek_v3_tokenizer().with_chat_template("deepseek-v32");
  EXPECT_EQ(v32.chat_format(), ChatFormatKind::DeepseekV32);
  EXPECT_TRUE(v32.hybrid_thinking());
  ChatInput chat;
  chat.messages = input.at("messages");
  chat.tools = input.at("tools");
  chat.kwargs = {{"thinking", true}};
  EXPECT_EQ(v32.render_chat(chat), rstrip(read_text(std::string(kV32Dir) + "/test_output.txt")));
  // Without a system message the tools get one of their own, first.
  chat.messages = {{{"role", "user"}, {"content", "Hi"}}};
  chat.kwargs = nlohmann::ordered_json::object();
  const std::string prompt = v32.render_chat(chat);
  EXPECT_THAT(prompt, ::testing::StartsWith(std::string(dsv32::kBos) + "\n\n## Tools\n\n"));
  EXPECT_THAT(prompt, ::testing::EndsWith("</functions>\n<｜User｜>Hi<｜Assistant｜></think>"));
}

class V32Derived : public ::testing::TestWithParam<nlohmann::ordered_json> {};

TEST_P(V32Derived, EqualsDeepSeekEncoder) {
  const nlohmann::ordered_json& expected = GetParam();
  const nlohmann::ordered_json inputs = read_ordered(std::string(kV32Dir) + "/derived_inputs.json");
  for (const auto& input : inputs.at("cases")) {
    if (input.at("id") != expected.at("id")) continue;
    dsv32::EncodeOptions options;
    options.thinking_mode = input.at("thinking_mode") == "thinking" ? dsv32::ThinkingMode::Thinking
                                                                    : dsv32::ThinkingMode::Chat;
    EXPECT_EQ(dsv32::encode_messages(input.at("messages"), options),
              expected.at("prompt").get<std::string>());
    return;
  }
  FAIL() << "no input for " << expected.at("id");
}

INSTANTIATE_TEST_SUITE_P(
    DeepSeekV32, V32Derived,
    ::testing::ValuesIn(cases_of(std::string(kV32Dir) + "/derived_outputs.json")),
    [](const auto& info) { return info.param.at("id").template get<std::string>(); });

TEST(V32Encoder, ContextRendersOnlyTheNewMessages) {
  const nlohmann::ordered_json input = read_ordered(std::string(kV32Dir) + "/test_input.json");
  nlohmann::ordered_json messages = input.at("messages");
  messages[0]["tools"] = input.at("tools");
  dsv32::EncodeOptions options;
  options.thinking_mode = dsv32::ThinkingMode::Thinking;
  const std::string whole = dsv32::encode_messages(messages, options);
  options.context = 4;
  const std::string tail = dsv32::encode_messages(messages, options);
  EXPECT_TRUE(whole.ends_with(tail));
  EXPECT_THAT(tail, ::testing::StartsWith("\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke "
                                          "name=\"get_weather\">"));
}

TEST(V32Encoder, RejectsWhatDeepSeeksEncoderRejects) {
  dsv32::EncodeOptions thinking;
  thinking.thinking_mode = dsv32::ThinkingMode::Thinking;
  const auto fails = [&](const nlohmann::ordered_json& messages, const std::string& why) {
    try {
      dsv32::encode_messages(messages, thinking);
      ADD_FAILURE() << "no error for " << messages.dump();
    } catch (const Error& error) {
      EXPECT_THAT(error.what(), HasSubstr(why));
    }
  };
  fails({{{"role", "user"}, {"content", "a"}}, {{"role", "assistant"}, {"content", "b"}}},
        "needs reasoning_content or tool_calls");
  fails({{{"role", "user"}, {"content", "a"}}, {{"role", "tool"}, {"content", "b"}}},
        "does not follow an assistant");
  fails({{{"role", "user"}, {"content", "a"}},
         {{"role", "assistant"}, {"reasoning_content", "r"}},
         {{"role", "tool"}, {"content", "b"}}},
        "answers no tool call");
  fails({{{"role", "developer"}, {"content", ""}}}, "developer message needs content");
  fails({{{"role", "robot"}, {"content", "x"}}}, "unknown role 'robot'");
  fails({{{"role", "user"}, {"content", "a"}},
         {{"role", "assistant"},
          {"tool_calls",
           {{{"type", "function"}, {"function", {{"name", "f"}, {"arguments", "[1]"}}}}}}}},
        "must be a JSON object");
}

// A model directory without a chat template whose config.json says deepseek_v32 gets the
// built-in encoder; with a template it keeps the template.
TEST(V32Encoder, ChosenByTheModelsConfig) {
  testing::TempDir dir;
  std::filesystem::copy_file(std::string(testing::kDeepSeekV3TokenizerDir) + "/tokenizer.json",
                             dir / "tokenizer.json");
  nlohmann::json config =
      testing::read_json(std::string(testing::kDeepSeekV3TokenizerDir) + "/tokenizer_config.json");
  config.erase("chat_template");
  testing::write_json(dir / "tokenizer_config.json", config);
  EXPECT_EQ(Tokenizer::load(dir.path()).chat_format(), ChatFormatKind::None);
  testing::write_json(dir / "config.json", {{"model_type", "deepseek_v32"}});
  const Tokenizer v32 = Tokenizer::load(dir.path());
  EXPECT_EQ(v32.chat_format(), ChatFormatKind::DeepseekV32);
  EXPECT_TRUE(v32.has_chat_template());
  EXPECT_EQ(
      v32.apply_chat_template(nlohmann::json::array({{{"role", "user"}, {"content", "Hi"}}}), true),
      "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜></think>");
  testing::write_json(dir / "config.json", {{"architectures", {"DeepseekV32ForCausalLM"}}});
  EXPECT_EQ(Tokenizer::load(dir.path()).chat_format(), ChatFormatKind::DeepseekV32);
  { std::ofstream(dir / "chat_template.jinja") << "{{ messages[0]['content'] }}"; }
  EXPECT_EQ(Tokenizer::load(dir.path()).chat_format(), ChatFormatKind::Jinja);
}

}  // namespace
}  // namespace mlaserve::tokenizer
