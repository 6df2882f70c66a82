// The chat output parser: reasoning, content and DeepSeek-V3 tool calls, whole and streamed in
// pieces of every size (a stream must add up to the whole message, whatever the cuts).
#include "server/chat_output.h"

#include <gtest/gtest.h>

#include <string>

#include "server/tool_calls.h"

namespace mlaserve::server {
namespace {

// DeepSeek-V3's call syntax when the request has tools.
std::optional<ToolSyntax> v3_calls(bool tools) {
  return tools ? std::optional(ToolSyntax::DeepseekV3) : std::nullopt;
}

const std::string kCall = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>";

std::string call_text(const std::string& name, const std::string& arguments) {
  return kCall + name + "\n```json\n" + arguments + "\n```<｜tool▁call▁end｜>";
}

ChatMessage parse_whole(const std::string& text, bool reasoning, bool tools) {
  ChatOutputParser parser(reasoning, v3_calls(tools));
  ChatMessage message;
  message.add(parser.push(text));
  message.add(parser.finish());
  return message;
}

// The text pushed `piece` bytes at a time (cuts may fall inside UTF-8 characters and markers).
ChatMessage parse_in_pieces(const std::string& text, size_t piece, bool reasoning, bool tools) {
  ChatOutputParser parser(reasoning, v3_calls(tools));
  ChatMessage message;
  for (size_t at = 0; at < text.size(); at += piece)
    message.add(parser.push(text.substr(at, piece)));
  message.add(parser.finish());
  return message;
}

void expect_same(const ChatMessage& a, const ChatMessage& b, size_t piece) {
  EXPECT_EQ(a.reasoning, b.reasoning) << "piece " << piece;
  EXPECT_EQ(a.content, b.content) << "piece " << piece;
  ASSERT_EQ(a.tool_calls.size(), b.tool_calls.size()) << "piece " << piece;
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    EXPECT_EQ(a.tool_calls[i].name, b.tool_calls[i].name) << "piece " << piece;
    EXPECT_EQ(a.tool_calls[i].arguments, b.tool_calls[i].arguments) << "piece " << piece;
  }
}

void expect_streams_agree(const std::string& text, bool reasoning, bool tools) {
  const ChatMessage whole = parse_whole(text, reasoning, tools);
  for (size_t piece = 1; piece <= text.size(); ++piece) {
    expect_same(parse_in_pieces(text, piece, reasoning, tools), whole, piece);
  }
}

TEST(ChatOutput, PlainTextIsContent) {
  const ChatMessage m = parse_whole("Hello <think> there", false, false);
  EXPECT_EQ(m.content, "Hello <think> there");
  EXPECT_TRUE(m.reasoning.empty());
  EXPECT_TRUE(m.tool_calls.empty());
}

TEST(ChatOutput, ReasoningEndsAtThinkEnd) {
  const std::string text = "<think>\nLet me see.</think>\n\nThe answer is 4.";
  const ChatMessage m = parse_whole(text, true, false);
  EXPECT_EQ(m.reasoning, "\nLet me see.");
  EXPECT_EQ(m.content, "The answer is 4.");
  expect_streams_agree(text, true, false);
}

TEST(ChatOutput, ReasoningWithoutOpeningTagOrEnd) {
  EXPECT_EQ(parse_whole("thinking</think>done", true, false).reasoning, "thinking");
  EXPECT_EQ(parse_whole("thinking</think>done", true, false).content, "done");
  // A model that never closes its thinking: all of it is reasoning.
  const ChatMessage open = parse_whole("<think>still going </thi", true, false);
  EXPECT_EQ(open.reasoning, "still going </thi");
  EXPECT_TRUE(open.content.empty());
  expect_streams_agree("<think>still going </thi", true, false);
}

TEST(ChatOutput, ToolCallsAfterContent) {
  const std::string text = "Checking. <｜tool▁calls▁begin｜>" +
                           call_text("get_weather", R"({"city": "Paris"})") + "\n" +
                           call_text("get_time", "{}") + "<｜tool▁calls▁end｜>";
  const ChatMessage m = parse_whole(text, false, true);
  EXPECT_EQ(m.content, "Checking. ");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[0].name, "get_weather");
  EXPECT_EQ(m.tool_calls[0].arguments, R"({"city": "Paris"})");
  EXPECT_EQ(m.tool_calls[1].name, "get_time");
  EXPECT_EQ(m.tool_calls[1].arguments, "{}");
  EXPECT_EQ(m.tool_calls[0].id.rfind("call_", 0), 0u);
  EXPECT_NE(m.tool_calls[0].id, m.tool_calls[1].id);
  expect_streams_agree(text, false, true);
  // With a reasoning parser too.
  expect_streams_agree("<think>plan</think>" + text, true, true);
  EXPECT_EQ(parse_whole("<think>plan</think>" + text, true, true).tool_calls.size(), 2u);
}

TEST(ChatOutput, TheFirstPieceOfACallNamesIt) {
  ChatOutputParser parser(false, ToolSyntax::DeepseekV3);
  ChatDelta head = parser.push("<｜tool▁calls▁begin｜>" + kCall + "f\n```json\n{\"a\"");
  ASSERT_EQ(head.tool_calls.size(), 1u);
  EXPECT_EQ(head.tool_calls[0].name, "f");
  EXPECT_EQ(head.tool_calls[0].arguments, "{\"a\"");
  ChatDelta rest = parser.push(": 1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
  ASSERT_EQ(rest.tool_calls.size(), 1u);
  EXPECT_TRUE(rest.tool_calls[0].name.empty());
  EXPECT_EQ(rest.tool_calls[0].arguments, ": 1}");
  EXPECT_TRUE(parser.finish().empty());
}

TEST(ChatOutput, WithoutToolsTheMarkersAreText) {
  const std::string text = "<｜tool▁calls▁begin｜>" + call_text("f", "{}");
  EXPECT_EQ(parse_whole(text, false, false).content, text);
}

TEST(ChatOutput, ATruncatedCallKeepsItsArgumentsSoFar) {
  const std::string text = "<｜tool▁calls▁begin｜>" + kCall + "f\n```json\n{\"city\": \"Par";
  const ChatMessage m = parse_whole(text, false, true);
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].arguments, "{\"city\": \"Par");
  expect_streams_agree(text, false, true);
}

TEST(ChatOutput, WhatIsNotACallStaysContent) {
  const std::string text = "<｜tool▁calls▁begin｜>not a call";
  const ChatMessage m = parse_whole(text, false, true);
  EXPECT_EQ(m.content, "not a call");
  EXPECT_TRUE(m.tool_calls.empty());
  expect_streams_agree(text, false, true);
}

}  // namespace
}  // namespace mlaserve::server
