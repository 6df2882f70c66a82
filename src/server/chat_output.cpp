#include "server/chat_output.h"

#include <algorithm>

#include "server/openai_format.h"
#include "server/tool_calls.h"

namespace mlaserve::server {

namespace {

constexpr std::string_view kThinkBegin = "<think>";
constexpr std::string_view kThinkEnd = "</think>";
// A call's "TYPE<｜tool▁sep｜>NAME" is short; a longer header is not a call.
constexpr size_t kMaxCallHeader = 512;

// The longest tail of `text` that is a proper prefix of `marker`.
size_t marker_tail(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

void add_arguments(std::vector<ToolCallDelta>& calls, size_t index, std::string_view arguments) {
  if (!calls.empty() && calls.back().index == index) {
    calls.back().arguments += arguments;
  } else {
    calls.push_back({index, {}, {}, std::string(arguments)});
  }
}

}  // namespace

void ChatDelta::append(ChatDelta&& more) {
  reasoning += more.reasoning;
  content += more.content;
  for (ToolCallDelta& call : more.tool_calls) {
    if (call.name.empty() && !tool_calls.empty() && tool_calls.back().index == call.index) {
      tool_calls.back().arguments += call.arguments;
    } else {
      tool_calls.push_back(std::move(call));
    }
  }
}

void ChatMessage::add(const ChatDelta& delta) {
  reasoning += delta.reasoning;
  content += delta.content;
  for (const ToolCallDelta& call : delta.tool_calls) {
    if (call.index >= tool_calls.size()) tool_calls.resize(call.index + 1);
    ToolCall& whole = tool_calls[call.index];
    if (!call.name.empty()) {
      whole.id = call.id;
      whole.name = call.name;
    }
    whole.arguments += call.arguments;
  }
}

ChatOutputParser::ChatOutputParser(bool reasoning, bool tool_calls)
    : tool_calls_(tool_calls), phase_(reasoning ? Phase::Reasoning : Phase::Content) {}

ChatDelta ChatOutputParser::push(std::string_view text) {
  pending_ += text;
  ChatDelta delta;
  while (step(delta, /*final=*/false)) {
  }
  return delta;
}

ChatDelta ChatOutputParser::finish() {
  ChatDelta delta;
  while (step(delta, /*final=*/true)) {
  }
  return delta;
}

bool ChatOutputParser::step(ChatDelta& delta, bool final) {
  switch (phase_) {
    case Phase::Reasoning:
      return reasoning_step(delta, final);
    case Phase::Content:
      return content_step(delta, final);
    case Phase::Calls:
      return calls_step(delta, final);
    case Phase::CallHeader:
      return header_step(delta, final);
    case Phase::Arguments:
      return arguments_step(delta, final);
    case Phase::Trailing:  // text after the calls, or what did not parse as one, stays content
      delta.content += pending_;
      pending_.clear();
      return false;
  }
  return false;
}

bool ChatOutputParser::take_until(std::string_view marker, std::string& out, bool final) {
  const size_t at = pending_.find(marker);
  if (at != std::string::npos) {
    out.append(pending_, 0, at);
    pending_.erase(0, at + marker.size());
    return true;
  }
  const size_t keep = final ? 0 : marker_tail(pending_, marker);
  out.append(pending_, 0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return false;
}

// DeepSeek-R1 thinks first: the text up to "</think>" is reasoning (with or without the opening
// "<think>", which newer chat templates put in the prompt). Without "</think>" it is all reasoning.
bool ChatOutputParser::reasoning_step(ChatDelta& delta, bool final) {
  if (at_start_) {
    if (!final && kThinkBegin.starts_with(pending_)) return false;
    if (pending_.starts_with(kThinkBegin)) pending_.erase(0, kThinkBegin.size());
    at_start_ = false;
  }
  if (!take_until(kThinkEnd, delta.reasoning, final)) return false;
  phase_ = Phase::Content;
  trim_leading_space_ = true;
  return true;
}

bool ChatOutputParser::content_step(ChatDelta& delta, bool final) {
  if (trim_leading_space_) {
    const size_t text = pending_.find_first_not_of(" \t\r\n");
    pending_.erase(0, text == std::string::npos ? pending_.size() : text);
    if (pending_.empty()) return false;
    trim_leading_space_ = false;
  }
  if (!tool_calls_) {
    delta.content += pending_;
    pending_.clear();
    return false;
  }
  if (!take_until(deepseek_v3::kCallsBegin, delta.content, final)) return false;
  phase_ = Phase::Calls;
  return true;
}

// Between calls: the next call, or the end of the calls.
bool ChatOutputParser::calls_step(ChatDelta&, bool final) {
  using namespace deepseek_v3;
  if (pending_.starts_with(kCallSeparator)) pending_.erase(0, kCallSeparator.size());
  if (pending_.starts_with(kCallBegin)) {
    pending_.erase(0, kCallBegin.size());
    phase_ = Phase::CallHeader;
    return true;
  }
  if (pending_.starts_with(kCallsEnd)) {
    pending_.erase(0, kCallsEnd.size());
    phase_ = Phase::Trailing;
    return true;
  }
  if (pending_.empty()) return false;
  if (!final && (kCallBegin.starts_with(pending_) || kCallsEnd.starts_with(pending_))) {
    return false;
  }
  phase_ = Phase::Trailing;
  return true;
}

// "TYPE<｜tool▁sep｜>NAME" up to the arguments' opening fence: the call begins.
bool ChatOutputParser::header_step(ChatDelta& delta, bool final) {
  using namespace deepseek_v3;
  const size_t at = pending_.find(kArgumentsBegin);
  if (at == std::string::npos) {
    if (!final && pending_.size() <= kMaxCallHeader) return false;
    phase_ = Phase::Trailing;
    return true;
  }
  const std::string_view header = std::string_view(pending_).substr(0, at);
  const size_t sep = header.find(kCallSep);
  const std::string_view name =
      sep == std::string_view::npos ? header : header.substr(sep + kCallSep.size());
  delta.tool_calls.push_back({calls_, new_request_id("call_"), std::string(name), {}});
  calls_ += 1;
  pending_.erase(0, at + kArgumentsBegin.size());
  phase_ = Phase::Arguments;
  return true;
}

bool ChatOutputParser::arguments_step(ChatDelta& delta, bool final) {
  std::string arguments;
  const bool ended = take_until(deepseek_v3::kCallEnd, arguments, final);
  if (!arguments.empty()) add_arguments(delta.tool_calls, calls_ - 1, arguments);
  if (!ended) return false;
  phase_ = Phase::Calls;
  return true;
}

}  // namespace mlaserve::server
