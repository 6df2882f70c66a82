// The tool-call syntaxes of DeepSeek-V3.1 and V3.2 (DSML) through the chat output parser: whole,
// cut in two at every byte and pushed byte by byte (a stream must add up to the whole message),
// and DeepSeek's own V3.2 test conversation rendered by the encoder and parsed back.
#include <gtest/gtest.h>

#include <string>

#include "server/chat_output.h"
#include "server/chat_output_test_util.h"
#include "server/tool_calls.h"
#include "support/files.h"
#include "tokenizer/deepseek_v32_encoding.h"

namespace mlaserve::server {
namespace {

namespace dsv32 = tokenizer::dsv32;

std::string v31_call(const std::string& name, const std::string& arguments) {
  return "<｜tool▁call▁begin｜>" + name + "<｜tool▁sep｜>" + arguments + "<｜tool▁call▁end｜>";
}

std::string v31_calls(const std::string& calls) {
  return "<｜tool▁calls▁begin｜>" + calls + "<｜tool▁calls▁end｜>";
}

std::string dsml_parameter(const std::string& name, bool string, const std::string& value) {
  return std::string(dsv32::kParameterBegin) + name + "\" string=\"" + (string ? "true" : "false") +
         "\">" + value + std::string(dsv32::kParameterEnd);
}

std::string dsml_invoke(const std::string& name, const std::string& parameters) {
  return std::string(dsv32::kInvokeBegin) + name + "\">\n" + parameters + "\n" +
         std::string(dsv32::kInvokeEnd);
}

// A calls block: V3.2's <｜DSML｜function_calls>, or V4's <｜DSML｜tool_calls>.
std::string dsml_calls(const std::string& invokes, ToolSyntax syntax = ToolSyntax::Dsml) {
  return "\n\n" + std::string(dsml_calls_begin(syntax)) + "\n" + invokes + "\n" +
         std::string(dsml_calls_end(syntax));
}

using testing::parse;
using testing::parse_every_way;

// --- DeepSeek-V3.1 ---

TEST(V31Calls, ContentThenTwoCalls) {
  const std::string text =
      "Checking both." +
      v31_calls(v31_call("get_weather", R"({"city": "Paris"})") + v31_call("get_time", "{}"));
  const ChatMessage message = parse_every_way(text, false, ToolSyntax::DeepseekV31);
  EXPECT_EQ(message.content, "Checking both.");
  ASSERT_EQ(message.tool_calls.size(), 2u);
  EXPECT_EQ(message.tool_calls[0].name, "get_weather");
  EXPECT_EQ(message.tool_calls[0].arguments, R"({"city": "Paris"})");
  EXPECT_EQ(message.tool_calls[1].name, "get_time");
  EXPECT_EQ(message.tool_calls[1].arguments, "{}");
  EXPECT_NE(message.tool_calls[0].id, message.tool_calls[1].id);
}

TEST(V31Calls, AfterReasoning) {
  const std::string text = "I should call it.</think>" + v31_calls(v31_call("f", R"({"a": 1})"));
  const ChatMessage message = parse_every_way(text, true, ToolSyntax::DeepseekV31);
  EXPECT_EQ(message.reasoning, "I should call it.");
  EXPECT_EQ(message.content, "");
  ASSERT_EQ(message.tool_calls.size(), 1u);
  EXPECT_EQ(message.tool_calls[0].arguments, R"({"a": 1})");
}

// A header longer than 512 bytes is no call, whether the text comes whole or streamed (a fuzzing
// finding: streamed, the parser gave up on the header that the whole text still parsed).
TEST(V31Calls, AnOverlongHeaderIsNoCall) {
  const std::string text = v31_calls(v31_call(std::string(600, 'x'), "{}"));
  const ChatMessage message = parse_every_way(text, false, ToolSyntax::DeepseekV31);
  EXPECT_TRUE(message.tool_calls.empty());
  EXPECT_EQ(parse_every_way(v31_calls(v31_call(std::string(500, 'x'), "{}")), false,
                            ToolSyntax::DeepseekV31)
                .tool_calls.size(),
            1u);
}

TEST(V31Calls, V3SyntaxIsNotV31s) {
  // V3's fenced call read as V3.1: the header runs into the fence, so the name is "function".
  const ChatMessage message =
      parse({"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{}\n```"
             "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
            false, ToolSyntax::DeepseekV31);
  ASSERT_EQ(message.tool_calls.size(), 1u);
  EXPECT_EQ(message.tool_calls[0].name, "function");
}

// V3's "\n" between calls is taken once, whole or streamed (a fuzzing finding: pushed a byte at
// a time, every newline was taken as a separator).
TEST(V3Calls, OneSeparatorBetweenCalls) {
  const std::string text = "<｜tool▁calls▁begin｜>\n\n\nrest";
  const ChatMessage message = parse_every_way(text, false, ToolSyntax::DeepseekV3);
  EXPECT_TRUE(message.tool_calls.empty());
  EXPECT_EQ(message.content, "\n\nrest");
}

// --- DeepSeek-V3.2 (DSML) ---

TEST(DsmlCalls, TypedParametersBecomeAJsonObject) {
  const std::string text =
      "Setting it." +
      dsml_calls(dsml_invoke("set_alarm", dsml_parameter("time", true, "07:00 \"sharp\"\n\\ok") +
                                              "\n" + dsml_parameter("repeat", false, "5") + "\n" +
                                              dsml_parameter("loud", false, "true") + "\n" +
                                              dsml_parameter("days", false, R"(["mon", "tue"])") +
                                              "\n" + dsml_parameter("label", true, "réveil ⏰")));
  const ChatMessage message = parse_every_way(text, false, ToolSyntax::Dsml);
  EXPECT_EQ(message.content, "Setting it.");
  ASSERT_EQ(message.tool_calls.size(), 1u);
  EXPECT_EQ(message.tool_calls[0].name, "set_alarm");
  EXPECT_EQ(message.tool_calls[0].arguments,
            R"({"time": "07:00 \"sharp\"\n\\ok", "repeat": 5, "loud": true, )"
            R"("days": ["mon", "tue"], "label": "réveil ⏰"})");
  EXPECT_EQ(nlohmann::json::parse(message.tool_calls[0].arguments)["time"],
            "07:00 \"sharp\"\n\\ok");
}

TEST(DsmlCalls, SeveralInvokesAndNoParameters) {
  const std::string text = dsml_calls(dsml_invoke("get_time", "") + "\n" +
                                      dsml_invoke("get_date", dsml_parameter("tz", true, "UTC")));
  const ChatMessage message = parse_every_way(text, false, ToolSyntax::Dsml);
  EXPECT_EQ(message.content, "");
  ASSERT_EQ(message.tool_calls.size(), 2u);
  EXPECT_EQ(message.tool_calls[0].arguments, "{}");
  EXPECT_EQ(message.tool_calls[1].arguments, R"({"tz": "UTC"})");
}

TEST(DsmlCalls, NewlinesOnlyBeforeTheCallsAreDropped) {
  EXPECT_EQ(parse_every_way("Line one.\n\nLine two.\n", false, ToolSyntax::Dsml).content,
            "Line one.\n\nLine two.\n");
  EXPECT_EQ(
      parse_every_way("a\n\n" + std::string(dsv32::kCallsBegin), false, ToolSyntax::Dsml).content,
      "a");
}

// DeepSeek-V4 writes the same invokes in a block named tool_calls: each syntax parses its own
// block, and the other's block is text.
TEST(DsmlCalls, V4BlocksAreParsedUnderV4sSyntaxOnly) {
  const std::string invoke = dsml_invoke("get_date", dsml_parameter("tz", true, "UTC"));
  const ChatMessage v4 = parse_every_way("Checking." + dsml_calls(invoke, ToolSyntax::DsmlV4),
                                         false, ToolSyntax::DsmlV4);
  EXPECT_EQ(v4.content, "Checking.");
  ASSERT_EQ(v4.tool_calls.size(), 1u);
  EXPECT_EQ(v4.tool_calls[0].name, "get_date");
  EXPECT_EQ(v4.tool_calls[0].arguments, R"({"tz": "UTC"})");
  const std::string v32_block = dsml_calls(invoke, ToolSyntax::Dsml);
  EXPECT_TRUE(parse_every_way(v32_block, false, ToolSyntax::DsmlV4).tool_calls.empty());
  EXPECT_TRUE(parse_every_way(dsml_calls(invoke, ToolSyntax::DsmlV4), false, ToolSyntax::Dsml)
                  .tool_calls.empty());
}

TEST(DsmlCalls, ATruncatedCallStillClosesItsArguments) {
  const std::string text = "\n\n" + std::string(dsv32::kCallsBegin) + "\n" +
                           std::string(dsv32::kInvokeBegin) + "f\">\n" +
                           std::string(dsv32::kParameterBegin) + "q\" string=\"true\">half a val";
  const ChatMessage message = parse_every_way(text, false, ToolSyntax::Dsml);
  ASSERT_EQ(message.tool_calls.size(), 1u);
  EXPECT_EQ(message.tool_calls[0].arguments, R"({"q": "half a val"})");
}

TEST(DsmlCalls, WhatIsNotDsmlStaysContent) {
  const std::string text = "\n\n" + std::string(dsv32::kCallsBegin) + "\nnot an invoke";
  const ChatMessage message = parse_every_way(text, false, ToolSyntax::Dsml);
  EXPECT_TRUE(message.tool_calls.empty());
  EXPECT_EQ(message.content, "not an invoke");
  const std::string bad_quoting = "\n\n" + std::string(dsv32::kCallsBegin) + "\n" +
                                  std::string(dsv32::kInvokeBegin) + "f\">\n" +
                                  std::string(dsv32::kParameterBegin) + "a\" string=\"yes\">1";
  const ChatMessage bad = parse_every_way(bad_quoting, false, ToolSyntax::Dsml);
  ASSERT_EQ(bad.tool_calls.size(), 1u);
  EXPECT_EQ(bad.tool_calls[0].arguments, "{}");
  EXPECT_EQ(bad.content, "1");
}

// DeepSeek's test: the assistant turns of its conversation, as the encoder writes them (the
// model's output, without the end-of-sentence token), parse back to the turns' calls.
TEST(DsmlCalls, DeepSeeksConversationParsesBack) {
  const nlohmann::ordered_json input = nlohmann::ordered_json::parse(
      mlaserve::testing::read_text("tests/data/chat-v32/test_input.json"));
  nlohmann::ordered_json messages = input.at("messages");
  messages[0]["tools"] = input.at("tools");
  for (const size_t turn : {size_t{2}, size_t{4}, size_t{9}}) {
    dsv32::EncodeOptions options;
    options.thinking_mode = dsv32::ThinkingMode::Thinking;
    options.context = turn;
    const nlohmann::ordered_json upto(messages.begin(),
                                      messages.begin() + static_cast<ptrdiff_t>(turn) + 1);
    std::string text = dsv32::encode_messages(upto, options);
    ASSERT_TRUE(text.ends_with(dsv32::kEos));
    text.resize(text.size() - dsv32::kEos.size());
    // As in DeepSeek's test, each turn is the last after a user message: it carries its
    // reasoning (the prompt opened "<think>").
    const ChatMessage message = parse_every_way(text, true, ToolSyntax::Dsml);
    const nlohmann::ordered_json& expected = messages[turn];
    EXPECT_EQ(message.reasoning, expected.at("reasoning_content").get<std::string>());
    EXPECT_EQ(message.content, "");
    ASSERT_EQ(message.tool_calls.size(), expected.at("tool_calls").size());
    for (size_t i = 0; i < message.tool_calls.size(); ++i) {
      const auto& function = expected.at("tool_calls")[i].at("function");
      EXPECT_EQ(message.tool_calls[i].name, function.at("name").get<std::string>());
      EXPECT_EQ(message.tool_calls[i].arguments, function.at("arguments").get<std::string>());
    }
  }
}

}  // namespace
}  // namespace mlaserve::server
