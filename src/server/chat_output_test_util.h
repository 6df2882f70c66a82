// The chat output parser run every way a stream can cut a text, for the tool-call syntax tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/chat_output.h"
#include "server/tool_calls.h"

namespace mlaserve::server::testing {

inline ChatMessage parse(const std::vector<std::string>& pieces, bool reasoning,
                         ToolSyntax syntax) {
  ChatOutputParser parser(reasoning, syntax);
  ChatMessage message;
  for (const std::string& piece : pieces) message.add(parser.push(piece));
  message.add(parser.finish());
  return message;
}

// Ids are compared where the syntax writes them (Kimi's); the others' are made up per parse.
inline void expect_same(const ChatMessage& a, const ChatMessage& b, ToolSyntax syntax,
                        const std::string& how) {
  EXPECT_EQ(a.reasoning, b.reasoning) << how;
  EXPECT_EQ(a.content, b.content) << how;
  ASSERT_EQ(a.tool_calls.size(), b.tool_calls.size()) << how;
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    if (syntax == ToolSyntax::Kimi) {
      EXPECT_EQ(a.tool_calls[i].id, b.tool_calls[i].id) << how;
    }
    EXPECT_EQ(a.tool_calls[i].name, b.tool_calls[i].name) << how;
    EXPECT_EQ(a.tool_calls[i].arguments, b.tool_calls[i].arguments) << how;
  }
}

// The whole text at once; then every cut in two, and byte by byte, must give the same message.
inline ChatMessage parse_every_way(const std::string& text, bool reasoning, ToolSyntax syntax) {
  const ChatMessage whole = parse({text}, reasoning, syntax);
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    expect_same(whole, parse({text.substr(0, cut), text.substr(cut)}, reasoning, syntax), syntax,
                "cut at " + std::to_string(cut));
  }
  std::vector<std::string> bytes;
  for (const char c : text) bytes.emplace_back(1, c);
  expect_same(whole, parse(bytes, reasoning, syntax), syntax, "byte by byte");
  return whole;
}

}  // namespace mlaserve::server::testing
