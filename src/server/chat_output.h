// A chat choice's generated text split into what the API returns apart: the reasoning (with
// --reasoning-parser deepseek-r1: the text before "</think>"), the content, and tool calls in
// DeepSeek-V3's syntax (when the request has tools). It works on text as it streams: each push
// returns what is certain so far and holds back the tail that may still become a marker. A whole
// message is the sum of its deltas, so streamed and non-streamed answers agree.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace mlaserve::server {

// A piece of the call at `index`: the first piece of a call carries its id and name.
struct ToolCallDelta {
  size_t index = 0;
  std::string id, name;
  std::string arguments;
};

struct ChatDelta {
  std::string reasoning, content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
  void append(ChatDelta&& more);
};

struct ToolCall {
  std::string id, name, arguments;
};

// The sum of a choice's deltas.
struct ChatMessage {
  std::string reasoning, content;
  std::vector<ToolCall> tool_calls;
  void add(const ChatDelta& delta);
};

class ChatOutputParser {
 public:
  ChatOutputParser(bool reasoning, bool tool_calls);

  // Parses the text generated since the last push.
  ChatDelta push(std::string_view text);
  // The output is complete: releases what was held back.
  ChatDelta finish();

 private:
  enum class Phase { Reasoning, Content, Calls, CallHeader, Arguments, Trailing };

  // One parsing move on pending_; false when it needs more text.
  bool step(ChatDelta& delta, bool final);
  bool reasoning_step(ChatDelta& delta, bool final);
  bool content_step(ChatDelta& delta, bool final);
  bool calls_step(ChatDelta& delta, bool final);
  bool header_step(ChatDelta& delta, bool final);
  bool arguments_step(ChatDelta& delta, bool final);
  // Moves pending_ up to `marker` into `out` and drops the marker; without the marker, moves all
  // but a tail that may begin it (all of it when final). True when the marker was found.
  bool take_until(std::string_view marker, std::string& out, bool final);

  bool tool_calls_;
  Phase phase_;
  bool at_start_ = true;             // nothing generated has been parsed yet
  bool trim_leading_space_ = false;  // the content right after the reasoning
  std::string pending_;
  size_t calls_ = 0;  // tool calls begun
};

}  // namespace mlaserve::server
