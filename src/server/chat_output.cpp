#include "server/chat_output.h"

#include <fmt/format.h>

#include <algorithm>

#include "server/openai_format.h"
#include "server/tool_calls.h"
#include "tokenizer/deepseek_v32_encoding.h"
#include "tokenizer/jinja_value.h"

namespace mlaserve::server {

namespace {

constexpr std::string_view kThinkBegin = "<think>";
constexpr std::string_view kThinkEnd = "</think>";
// A call's "TYPE<｜tool▁sep｜>NAME" is short; a longer header is not a call.
constexpr size_t kMaxCallHeader = 512;

// The markers of the V3, V3.1 and Kimi syntaxes (tool_calls.h): the calls are between
// calls_begin and calls_end, each begins with call_begin; its header (V3: its type, the separator
// token and its name; V3.1: its name; Kimi: "functions.NAME:IDX") ends at header_end, its
// arguments at call_end, and `separator` may come between calls.
struct MarkerSyntax {
  std::string_view calls_begin, calls_end, call_begin, header_end, call_end, separator;
};

MarkerSyntax marker_syntax(ToolSyntax syntax) {
  if (syntax == ToolSyntax::Kimi) {
    using namespace kimi_k2;
    return {kCallsBegin, kCallsEnd, kCallBegin, kArgumentsBegin, kCallEnd, ""};
  }
  using namespace deepseek_v3;
  if (syntax == ToolSyntax::DeepseekV31) {
    return {kCallsBegin, kCallsEnd, kCallBegin, kCallSep, kCallEndToken, ""};
  }
  return {kCallsBegin, kCallsEnd, kCallBegin, kArgumentsBegin, kCallEnd, kCallSeparator};
}

// A DSML attribute's longest plausible text; a longer one is not DSML.
constexpr size_t kMaxDsmlAttributes = 512;

// What DeepSeek's decoder makes of a string="true" value: the JSON escape of its characters.
using tokenizer::jinja::json_escaped;

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

ChatOutputParser::ChatOutputParser(bool reasoning, std::optional<ToolSyntax> tool_calls)
    : syntax_(tool_calls), phase_(reasoning ? Phase::Reasoning : Phase::Content) {}

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
  close_dsml_call(delta);  // the output ended inside a call
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
    case Phase::DsmlCalls:
      return dsml_calls_step(delta, final);
    case Phase::DsmlInvoke:
      return dsml_invoke_step(delta, final);
    case Phase::DsmlValue:
      return dsml_value_step(delta, final);
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
  if (!syntax_) {
    delta.content += pending_;
    pending_.clear();
    return false;
  }
  if (!is_dsml(*syntax_)) {
    if (!take_until(marker_syntax(*syntax_).calls_begin, delta.content, final)) return false;
    phase_ = Phase::Calls;
    return true;
  }
  // DSML calls follow the content after "\n\n", which is not content: newlines before a
  // possible marker are held back too.
  const std::string_view marker = dsml_calls_begin(*syntax_);
  const size_t at = pending_.find(marker);
  size_t end = at != std::string::npos ? at
               : final                 ? pending_.size()
                                       : pending_.size() - marker_tail(pending_, marker);
  if (!final || at != std::string::npos) {
    while (end > 0 && pending_[end - 1] == '\n') --end;
  }
  delta.content.append(pending_, 0, end);
  if (at == std::string::npos) {
    pending_.erase(0, end);
    return false;
  }
  pending_.erase(0, at + marker.size());
  phase_ = Phase::DsmlCalls;
  return true;
}

// Between calls: the next call, or the end of the calls.
bool ChatOutputParser::calls_step(ChatDelta&, bool final) {
  const MarkerSyntax syntax = marker_syntax(*syntax_);
  const std::string_view call_begin = syntax.call_begin;
  const std::string_view calls_end = syntax.calls_end;
  // One separator between calls (taken once, however the text arrives).
  if (!separator_taken_ && !syntax.separator.empty() && pending_.starts_with(syntax.separator)) {
    pending_.erase(0, syntax.separator.size());
    separator_taken_ = true;
  }
  if (pending_.starts_with(call_begin)) {
    pending_.erase(0, call_begin.size());
    separator_taken_ = false;
    phase_ = Phase::CallHeader;
    return true;
  }
  if (pending_.starts_with(calls_end)) {
    pending_.erase(0, calls_end.size());
    phase_ = Phase::Trailing;
    return true;
  }
  if (pending_.empty()) return false;
  if (!final && (call_begin.starts_with(pending_) || calls_end.starts_with(pending_))) {
    return false;
  }
  phase_ = Phase::Trailing;
  return true;
}

// V3: "TYPE<｜tool▁sep｜>NAME" up to the arguments' opening fence; V3.1: "NAME" up to the
// separator token; Kimi: "functions.NAME:IDX", which is also the call's id. The call begins.
bool ChatOutputParser::header_step(ChatDelta& delta, bool final) {
  using namespace deepseek_v3;
  const MarkerSyntax syntax = marker_syntax(*syntax_);
  // A header is at most kMaxCallHeader bytes, however the text arrives (whole or streamed).
  const size_t at = pending_.find(syntax.header_end);
  if (at == std::string::npos || at > kMaxCallHeader) {
    if (at == std::string::npos && !final &&
        pending_.size() < kMaxCallHeader + syntax.header_end.size()) {
      return false;
    }
    phase_ = Phase::Trailing;
    return true;
  }
  const std::string_view header = std::string_view(pending_).substr(0, at);
  if (*syntax_ == ToolSyntax::Kimi) {
    delta.tool_calls.push_back({calls_,
                                std::string(kimi_k2::call_id(header)),
                                std::string(kimi_k2::function_name(header)),
                                {}});
  } else {
    const size_t sep = header.find(kCallSep);
    const std::string_view name =
        sep == std::string_view::npos ? header : header.substr(sep + kCallSep.size());
    delta.tool_calls.push_back({calls_, new_request_id("call_"), std::string(name), {}});
  }
  calls_ += 1;
  pending_.erase(0, at + syntax.header_end.size());
  phase_ = Phase::Arguments;
  return true;
}

bool ChatOutputParser::arguments_step(ChatDelta& delta, bool final) {
  std::string arguments;
  const bool ended = take_until(marker_syntax(*syntax_).call_end, arguments, final);
  if (!arguments.empty()) add_arguments(delta.tool_calls, calls_ - 1, arguments);
  if (!ended) return false;
  phase_ = Phase::Calls;
  return true;
}

void ChatOutputParser::close_dsml_call(ChatDelta& delta) {
  if (!dsml_open_) return;
  std::string end = dsml_string_ ? "\"" : "";
  end += dsml_parameters_ ? "}" : "{}";
  add_arguments(delta.tool_calls, calls_ - 1, end);
  dsml_open_ = dsml_parameters_ = dsml_string_ = false;
}

void ChatOutputParser::to_trailing(ChatDelta& delta) {
  close_dsml_call(delta);
  phase_ = Phase::Trailing;
}

bool ChatOutputParser::dsml_element(std::string_view open, std::string& attributes, bool final,
                                    bool& malformed) {
  malformed = false;
  const size_t close = pending_.find("\">", open.size());
  if (close == std::string::npos || close - open.size() > kMaxDsmlAttributes) {
    if (!final && pending_.size() <= open.size() + kMaxDsmlAttributes + 2) return false;
    malformed = true;
    return false;
  }
  attributes.assign(pending_, open.size(), close - open.size());
  pending_.erase(0, close + 2);
  return true;
}

// Between invokes: whitespace, then the next invoke or the end of the calls.
bool ChatOutputParser::dsml_calls_step(ChatDelta& delta, bool final) {
  using namespace tokenizer::dsv32;
  pending_.erase(0, std::min(pending_.find_first_not_of(" \t\r\n"), pending_.size()));
  if (pending_.starts_with(kInvokeBegin)) {
    std::string name;
    bool malformed = false;
    if (!dsml_element(kInvokeBegin, name, final, malformed)) {
      if (malformed) to_trailing(delta);
      return malformed;
    }
    delta.tool_calls.push_back({calls_, new_request_id("call_"), name, {}});
    calls_ += 1;
    dsml_open_ = true;
    phase_ = Phase::DsmlInvoke;
    return true;
  }
  const std::string_view calls_end = dsml_calls_end(*syntax_);
  if (pending_.starts_with(calls_end)) {
    pending_.erase(0, calls_end.size());
    to_trailing(delta);
    return true;
  }
  if (pending_.empty()) return false;
  if (!final && (kInvokeBegin.starts_with(pending_) || calls_end.starts_with(pending_))) {
    return false;
  }
  to_trailing(delta);
  return true;
}

// Inside an invoke: whitespace, then a parameter (its name and quoting) or the invoke's end.
bool ChatOutputParser::dsml_invoke_step(ChatDelta& delta, bool final) {
  using namespace tokenizer::dsv32;
  pending_.erase(0, std::min(pending_.find_first_not_of(" \t\r\n"), pending_.size()));
  if (pending_.starts_with(kParameterBegin)) {
    std::string attributes;
    bool malformed = false;
    if (!dsml_element(kParameterBegin, attributes, final, malformed)) {
      if (malformed) to_trailing(delta);
      return malformed;
    }
    // NAME" string="true|false
    constexpr std::string_view kString = "\" string=\"";
    const size_t at = attributes.find(kString);
    const std::string_view quoting =
        at == std::string::npos ? "" : std::string_view(attributes).substr(at + kString.size());
    if (quoting != "true" && quoting != "false") {
      to_trailing(delta);
      return true;
    }
    const std::string name = attributes.substr(0, at);
    dsml_string_ = quoting == "true";
    add_arguments(delta.tool_calls, calls_ - 1,
                  fmt::format("{}\"{}\": {}", dsml_parameters_ ? ", " : "{", json_escaped(name),
                              dsml_string_ ? "\"" : ""));
    dsml_parameters_ = true;
    phase_ = Phase::DsmlValue;
    return true;
  }
  if (pending_.starts_with(kInvokeEnd)) {
    pending_.erase(0, kInvokeEnd.size());
    close_dsml_call(delta);
    phase_ = Phase::DsmlCalls;
    return true;
  }
  if (pending_.empty()) return false;
  if (!final && (kParameterBegin.starts_with(pending_) || kInvokeEnd.starts_with(pending_))) {
    return false;
  }
  to_trailing(delta);
  return true;
}

// A parameter's value up to its closing tag: a string="true" value JSON-escaped, another as is.
bool ChatOutputParser::dsml_value_step(ChatDelta& delta, bool final) {
  std::string value;
  const bool ended = take_until(tokenizer::dsv32::kParameterEnd, value, final);
  if (dsml_string_) value = json_escaped(value);
  if (ended && dsml_string_) value += '"';
  if (!value.empty()) add_arguments(delta.tool_calls, calls_ - 1, value);
  if (!ended) return false;
  dsml_string_ = false;
  phase_ = Phase::DsmlInvoke;
  return true;
}

}  // namespace mlaserve::server
