// Kimi-K2's tool-call syntax (tool_calls.h) through the chat output parser: whole, cut in two
// and byte by byte, and the assistant turns of Kimi-K2-Thinking's template as Python jinja2
// rendered them (tests/data/chat-kimi) parsed back to the conversation's calls.
#include <gtest/gtest.h>

#include <string>

#include "server/chat_output.h"
#include "server/chat_output_test_util.h"
#include "server/tool_calls.h"
#include "support/files.h"
#include "support/tokenizers.h"

namespace mlaserve::server {
namespace {

ChatMessage parse_every_way(const std::string& text, bool reasoning) {
  return testing::parse_every_way(text, reasoning, ToolSyntax::Kimi);
}

std::string kimi_call(const std::string& header, const std::string& arguments) {
  return std::string(kimi_k2::kCallBegin) + header + std::string(kimi_k2::kArgumentsBegin) +
         arguments + std::string(kimi_k2::kCallEnd);
}

std::string kimi_calls(const std::string& calls) {
  return std::string(kimi_k2::kCallsBegin) + calls + std::string(kimi_k2::kCallsEnd);
}

TEST(KimiCalls, ContentThenTwoCallsWithKimisIds) {
  const std::string text =
      "Checking both." + kimi_calls(kimi_call("functions.get_weather:0", R"({"city": "Paris"})") +
                                    kimi_call(" functions.get_time:12 ", "{}"));
  const ChatMessage message = parse_every_way(text, false);
  EXPECT_EQ(message.content, "Checking both.");
  ASSERT_EQ(message.tool_calls.size(), 2u);
  EXPECT_EQ(message.tool_calls[0].id, "functions.get_weather:0");
  EXPECT_EQ(message.tool_calls[0].name, "get_weather");
  EXPECT_EQ(message.tool_calls[0].arguments, R"({"city": "Paris"})");
  EXPECT_EQ(message.tool_calls[1].id, "functions.get_time:12");
  EXPECT_EQ(message.tool_calls[1].name, "get_time");
}

// A header not shaped "functions.NAME:IDX" names the function by itself (and is its id).
TEST(KimiCalls, OtherHeadersAreTheName) {
  for (const std::string header : {"get_weather", "functions.f", "functions.f:x", "f:1"}) {
    const ChatMessage message = parse_every_way(kimi_calls(kimi_call(header, "{}")), false);
    ASSERT_EQ(message.tool_calls.size(), 1u) << header;
    EXPECT_EQ(message.tool_calls[0].name, header);
    EXPECT_EQ(message.tool_calls[0].id, header);
  }
  EXPECT_EQ(kimi_k2::function_name("functions.a.b:3"), "a.b");
}

TEST(KimiCalls, TextAfterTheSectionAndUnclosedCalls) {
  const ChatMessage after =
      parse_every_way(kimi_calls(kimi_call("functions.f:0", "{}")) + " done", false);
  EXPECT_EQ(after.content, " done");
  const ChatMessage truncated =
      parse_every_way(std::string(kimi_k2::kCallsBegin) + kimi_k2::kCallBegin.data(), false);
  EXPECT_TRUE(truncated.tool_calls.empty());
}

// The template's tools: Kimi's syntax where the markers are tokens (the Kimi test tokenizer),
// none where they are not (DeepSeek-V3's vocabulary).
TEST(KimiCalls, TheSyntaxIsToldFromTemplateAndVocabulary) {
  for (const char* file : {"k2_instruct.jinja", "k2_thinking.jinja"}) {
    const std::string source =
        mlaserve::testing::read_text(std::string("tests/data/chat-kimi/") + file);
    EXPECT_EQ(tool_syntax(mlaserve::testing::kimi_tokenizer().with_chat_template(source)),
              ToolSyntax::Kimi)
        << file;
    EXPECT_EQ(tool_syntax(mlaserve::testing::deepseek_v3_tokenizer().with_chat_template(source)),
              std::nullopt)
        << file;
  }
  const std::string v31 = mlaserve::testing::read_text("tests/data/chat-v31/chat_template.jinja");
  EXPECT_EQ(tool_syntax(mlaserve::testing::kimi_tokenizer().with_chat_template(v31)), std::nullopt);
}

// Each assistant turn with calls that Kimi-K2-Thinking's template rendered (jinja2), parsed as
// the model's output, gives that turn's reasoning, content and calls back.
TEST(KimiCalls, ThinkingTemplateTurnsParseBack) {
  const auto renderings = nlohmann::json::parse(
      mlaserve::testing::read_text("tests/data/chat-kimi/renderings.json"))["cases"];
  const auto conversations = nlohmann::json::parse(
      mlaserve::testing::read_text("tests/data/chat-kimi/conversations.json"))["conversations"];
  constexpr std::string_view kTurn = "<|im_assistant|>assistant<|im_middle|>";
  size_t checked = 0;
  for (const auto& conversation : conversations) {
    std::string rendered;
    for (const auto& c : renderings) {
      if (c["template"] == "k2_thinking.jinja" && c["conversation"] == conversation["id"]) {
        rendered = c["rendered"];
      }
    }
    size_t from = 0;
    for (const auto& expected : conversation["messages"]) {
      if (expected["role"] != "assistant") continue;
      const size_t begin = rendered.find(kTurn, from) + kTurn.size();
      const size_t end = rendered.find("<|im_end|>", begin);
      from = end;
      if (!expected.contains("tool_calls")) continue;
      const ChatMessage message = parse_every_way(rendered.substr(begin, end - begin), true);
      // Turns before the last plain answer were rendered without their reasoning.
      const std::string reasoning = expected.value("reasoning_content", "");
      EXPECT_TRUE(message.reasoning == reasoning || message.reasoning.empty());
      EXPECT_EQ(message.content, expected["content"].is_string() ? expected["content"] : "");
      ASSERT_EQ(message.tool_calls.size(), expected["tool_calls"].size());
      for (size_t i = 0; i < message.tool_calls.size(); ++i) {
        const auto& call = expected["tool_calls"][i];
        const auto& arguments = call["function"]["arguments"];
        EXPECT_EQ(message.tool_calls[i].id, call["id"]);
        EXPECT_EQ(message.tool_calls[i].name, call["function"]["name"]);
        EXPECT_EQ(nlohmann::json::parse(message.tool_calls[i].arguments),
                  arguments.is_string() ? nlohmann::json::parse(arguments.get<std::string>())
                                        : arguments);
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 3u);
}

}  // namespace
}  // namespace mlaserve::server
