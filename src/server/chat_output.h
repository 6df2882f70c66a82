// A chat choice's generated text split into what the API returns apart: the reasoning (the text
// before "</think>", when the request's thinking is on or --reasoning-parser deepseek-r1 asks for
// it), the content, and tool calls in the model's syntax (when the request has tools:
// DeepSeek-V3's, V3.1's or V3.2's DSML, see tool_calls.h; DSML arguments come out as the JSON
// object DeepSeek's decoder makes of them). It works on text as it streams: each push returns what
// is certain so far and holds back the tail that may still become a marker. A whole message is the
// sum of its deltas, so streamed and non-streamed answers agree.
#pragma once

#include <cstddef>
#include <optional>
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

enum class ToolSyntax;

class ChatOutputParser {
 public:
  // `tool_calls`: the syntax of the calls to parse (nullopt: all text after the reasoning is
  // content).
  ChatOutputParser(bool reasoning, std::optional<ToolSyntax> tool_calls);

  // Parses the text generated since the last push.
  ChatDelta push(std::string_view text);
  // The output is complete: releases what was held back.
  ChatDelta finish();
  // A stream's update: the text generated since the last one, and when `last`, what was held
  // back too.
  ChatDelta push_update(std::string_view text, bool last) {
    ChatDelta delta = push(text);
    if (last) delta.append(finish());
    return delta;
  }

 private:
  enum class Phase {
    Reasoning,
    Content,
    Calls,
    CallHeader,
    Arguments,
    DsmlCalls,   // between DSML invokes
    DsmlInvoke,  // inside an invoke, between parameters
    DsmlValue,   // inside a parameter's value
    Trailing,
  };

  // One parsing move on pending_; false when it needs more text.
  bool step(ChatDelta& delta, bool final);
  bool reasoning_step(ChatDelta& delta, bool final);
  bool content_step(ChatDelta& delta, bool final);
  bool calls_step(ChatDelta& delta, bool final);
  bool header_step(ChatDelta& delta, bool final);
  bool arguments_step(ChatDelta& delta, bool final);
  bool dsml_calls_step(ChatDelta& delta, bool final);
  bool dsml_invoke_step(ChatDelta& delta, bool final);
  bool dsml_value_step(ChatDelta& delta, bool final);
  // The DSML element at the front of pending_ up to its closing '">', whose opening is `open`:
  // its attribute text in `attributes`. False when more text is needed (pending_ kept); sets
  // Trailing when it is malformed.
  bool dsml_element(std::string_view open, std::string& attributes, bool final, bool& malformed);
  // Leaves the current DSML call with its arguments a closed JSON object.
  void close_dsml_call(ChatDelta& delta);
  void to_trailing(ChatDelta& delta);
  // Moves pending_ up to `marker` into `out` and drops the marker; without the marker, moves all
  // but a tail that may begin it (all of it when final). True when the marker was found.
  bool take_until(std::string_view marker, std::string& out, bool final);

  std::optional<ToolSyntax> syntax_;
  Phase phase_;
  bool at_start_ = true;             // nothing generated has been parsed yet
  bool trim_leading_space_ = false;  // the content right after the reasoning
  std::string pending_;
  size_t calls_ = 0;              // tool calls begun
  bool separator_taken_ = false;  // V3: the "\n" after a call was read
  // DSML: the current call is open, has parameters, and its value is a JSON string.
  bool dsml_open_ = false;
  bool dsml_parameters_ = false;
  bool dsml_string_ = false;
};

}  // namespace mlaserve::server
