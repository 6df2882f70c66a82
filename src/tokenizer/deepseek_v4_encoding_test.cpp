// The built-in DeepSeek-V4 encoder against DeepSeek's own test vectors and against cases encoded
// by DeepSeek's encoding_dsv4.py (tests/data/chat-v4), byte for byte; how a tokenizer picks it
// and passes it a request's tools and chat_template_kwargs.
#include <gmock/gmock.h>

#include <filesystem>
#include <fstream>
#include <utility>

#include "core/error.h"
#include "tokenizer/deepseek_v4_encoding.h"
#include "tokenizer/tokenizer_test_util.h"

namespace mlaserve::tokenizer {
namespace {

using testing::deepseek_v3_tokenizer;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using testing::read_text;
using ::testing::StartsWith;
using Json = nlohmann::ordered_json;

constexpr const char* kV4Dir = "tests/data/chat-v4";
constexpr std::string_view kEffortMax = "Reasoning Effort: Absolute maximum";

Json read_ordered(const std::string& path) {
  return Json::parse(read_text(path));
}

std::string data(const std::string& name) {
  return std::string(kV4Dir) + "/" + name;
}

dsv4::EncodeOptions in_mode(std::string_view mode) {
  dsv4::EncodeOptions options;
  options.thinking_mode =
      mode == "thinking" ? dsv4::ThinkingMode::Thinking : dsv4::ThinkingMode::Chat;
  return options;
}

// --- DeepSeek's test vectors, as test_encoding_dsv4.py encodes them ---

TEST(V4Encoder, DeepSeekVectorToolsInTheFirstMessage) {
  const Json input = read_ordered(data("test_input_1.json"));
  Json messages = input.at("messages");
  messages[0]["tools"] = input.at("tools");
  EXPECT_EQ(dsv4::encode_messages(messages, in_mode("thinking")),
            read_text(data("test_output_1.txt")));
}

TEST(V4Encoder, DeepSeekVectorsOfMessageLists) {
  const std::pair<const char*, const char*> cases[] = {
      {"2", "thinking"}, {"3", "thinking"}, {"4", "chat"}};
  for (const auto& [number, mode] : cases) {
    EXPECT_EQ(dsv4::encode_messages(read_ordered(data(fmt::format("test_input_{}.json", number))),
                                    in_mode(mode)),
              read_text(data(fmt::format("test_output_{}.txt", number))))
        << "case " << number;
  }
}

// --- more conversations, encoded by DeepSeek's encoder (make_expected.py) ---

std::vector<Json> derived_outputs() {
  const Json file = read_ordered(data("derived_outputs.json"));
  return {file.at("cases").begin(), file.at("cases").end()};
}

dsv4::EncodeOptions options_of(const Json& input) {
  dsv4::EncodeOptions options = in_mode(input.at("thinking_mode").get<std::string>());
  options.drop_thinking = input.value("drop_thinking", true);
  options.context = input.value("context", size_t{0});
  options.reasoning_effort = dsv4::reasoning_effort_of(input);
  return options;
}

class V4Derived : public ::testing::TestWithParam<Json> {};

TEST_P(V4Derived, EqualsDeepSeekEncoder) {
  const Json& expected = GetParam();
  const Json inputs = read_ordered(data("derived_inputs.json"));
  for (const auto& input : inputs.at("cases")) {
    if (input.at("id") != expected.at("id")) continue;
    EXPECT_EQ(dsv4::encode_messages(input.at("messages"), options_of(input)),
              expected.at("prompt").get<std::string>());
    return;
  }
  FAIL() << "no input for " << expected.at("id");
}

INSTANTIATE_TEST_SUITE_P(DeepSeekV4, V4Derived, ::testing::ValuesIn(derived_outputs()),
                         [](const auto& info) {
                           return info.param.at("id").template get<std::string>();
                         });

// --- through the tokenizer ---

const Tokenizer& v4_tokenizer() {
  static const Tokenizer tokenizer = deepseek_v3_tokenizer().with_chat_template("deepseek-v4");
  return tokenizer;
}

// Request-level tools join the system message; {"thinking": true} is thinking mode.
TEST(V4Encoder, ThroughRenderChat) {
  const Json input = read_ordered(data("test_input_1.json"));
  EXPECT_EQ(v4_tokenizer().chat_format(), ChatFormatKind::DeepseekV4);
  EXPECT_TRUE(v4_tokenizer().hybrid_thinking());
  ChatInput chat;
  chat.messages = input.at("messages");
  chat.tools = input.at("tools");
  chat.kwargs = {{"thinking", true}};
  EXPECT_EQ(v4_tokenizer().render_chat(chat), read_text(data("test_output_1.txt")));
  // Without a system message the tools get one of their own, first.
  chat.messages = {{{"role", "user"}, {"content", "Hi"}}};
  chat.kwargs = Json::object();
  const std::string prompt = v4_tokenizer().render_chat(chat);
  EXPECT_THAT(prompt, StartsWith(std::string(dsv4::kBos) + "\n\n## Tools\n\n"));
  EXPECT_THAT(prompt, EndsWith("tool calls.\n<｜User｜>Hi<｜Assistant｜></think>"));
}

TEST(V4Encoder, ReasoningEffortFromTheKwargs) {
  ChatInput chat;
  chat.messages = {{{"role", "user"}, {"content", "Hi"}}};
  chat.kwargs = {{"thinking", true}, {"reasoning_effort", "max"}};
  EXPECT_THAT(v4_tokenizer().render_chat(chat),
              StartsWith(std::string(dsv4::kBos) + std::string(kEffortMax)));
  chat.kwargs = {{"thinking", true}, {"reasoning_effort", "high"}};
  EXPECT_EQ(v4_tokenizer().render_chat(chat),
            std::string(dsv4::kBos) + "<｜User｜>Hi<｜Assistant｜><think>");
  // OpenAI's lighter efforts are V4's default.
  chat.kwargs = {{"thinking", true}, {"reasoning_effort", "low"}};
  EXPECT_EQ(v4_tokenizer().render_chat(chat),
            std::string(dsv4::kBos) + "<｜User｜>Hi<｜Assistant｜><think>");
  chat.kwargs = {{"thinking", true}, {"reasoning_effort", "extreme"}};
  try {
    (void)v4_tokenizer().render_chat(chat);
    ADD_FAILURE() << "reasoning_effort extreme accepted";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(),
                HasSubstr("reasoning_effort must be minimal, low, medium, high or max"));
  }
}

TEST(V4Encoder, RejectsWhatDeepSeeksEncoderRejects) {
  const auto fails = [](const Json& messages, const std::string& why) {
    try {
      dsv4::encode_messages(messages, in_mode("thinking"));
      ADD_FAILURE() << "no error for " << messages.dump();
    } catch (const Error& error) {
      EXPECT_THAT(error.what(), HasSubstr("DeepSeek-V4 chat: "));
      EXPECT_THAT(error.what(), HasSubstr(why));
    }
  };
  fails({{{"role", "developer"}, {"content", ""}}}, "developer message needs content");
  fails({{{"role", "robot"}, {"content", "x"}}}, "unknown role 'robot'");
  fails({{{"role", "user"}, {"content", nullptr}}}, "a user message's content must be text");
  fails({{{"role", "user"}, {"content", "a"}, {"task", "poem"}}}, "invalid task \"poem\"");
  fails({{{"role", "user"}, {"content", "a"}},
         {{"role", "assistant"},
          {"tool_calls",
           {{{"type", "function"}, {"function", {{"name", "f"}, {"arguments", "[1]"}}}}}}}},
        "must be a JSON object");
  fails({{{"role", "user"}, {"content", "a"}},
         {{"role", "assistant"},
          {"tool_calls", {{{"type", "function"}, {"function", Json::object()}}}}}},
        "tool_calls[0] has no function name");
  fails({{{"role", "system"}, {"content", "s"}, {"tools", {{{"type", "function"}}}}}},
        "tools[0] has no 'function'");
  fails({42}, "message 0 is not an object");
}

// A model directory without a chat template whose config.json says deepseek_v4 gets the
// built-in encoder; with a template it keeps the template.
TEST(V4Encoder, ChosenByTheModelsConfig) {
  testing::TempDir dir;
  std::filesystem::copy_file(std::string(testing::kDeepSeekV3TokenizerDir) + "/tokenizer.json",
                             dir / "tokenizer.json");
  nlohmann::json config =
      testing::read_json(std::string(testing::kDeepSeekV3TokenizerDir) + "/tokenizer_config.json");
  config.erase("chat_template");
  testing::write_json(dir / "tokenizer_config.json", config);
  testing::write_json(dir / "config.json", {{"model_type", "deepseek_v4"}});
  const Tokenizer v4 = Tokenizer::load(dir.path());
  EXPECT_EQ(v4.chat_format(), ChatFormatKind::DeepseekV4);
  EXPECT_TRUE(v4.has_chat_template());
  EXPECT_EQ(
      v4.apply_chat_template(nlohmann::json::array({{{"role", "user"}, {"content", "Hi"}}}), true),
      "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜></think>");
  testing::write_json(dir / "config.json", {{"architectures", {"DeepseekV4ForCausalLM"}}});
  EXPECT_EQ(Tokenizer::load(dir.path()).chat_format(), ChatFormatKind::DeepseekV4);
  testing::write_json(dir / "config.json", {{"model_type", "deepseek_v3"}});
  EXPECT_EQ(Tokenizer::load(dir.path()).chat_format(), ChatFormatKind::None);
  testing::write_json(dir / "config.json", {{"model_type", "deepseek_v4"}});
  { std::ofstream(dir / "chat_template.jinja") << "{{ messages[0]['content'] }}"; }
  EXPECT_EQ(Tokenizer::load(dir.path()).chat_format(), ChatFormatKind::Jinja);
}

}  // namespace
}  // namespace mlaserve::tokenizer
