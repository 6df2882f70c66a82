// Tool calls in the chat API: the request's "tools", "tool_choice" and "parallel_tool_calls",
// and the grammar that makes the model write a call when the request demands one.
//
// DeepSeek-V3's chat template writes an assistant's calls as
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGUMENTS\n```<｜tool▁call▁end｜>
// with further calls after a "\n", and <｜tool▁calls▁end｜> after the last; a model trained on
// it answers in the same syntax, which chat_output.h parses back.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/structured_output.h"
#include "tokenizer/tokenizer.h"

namespace mlaserve::server {

namespace deepseek_v3 {
inline constexpr std::string_view kCallsBegin = "<｜tool▁calls▁begin｜>";
inline constexpr std::string_view kCallsEnd = "<｜tool▁calls▁end｜>";
inline constexpr std::string_view kCallBegin = "<｜tool▁call▁begin｜>";
inline constexpr std::string_view kCallSep = "<｜tool▁sep｜>";
inline constexpr std::string_view kCallEndToken = "<｜tool▁call▁end｜>";
inline constexpr std::string_view kArgumentsBegin = "\n```json\n";
inline constexpr std::string_view kArgumentsEnd = "\n```";
inline constexpr std::string_view kCallEnd = "\n```<｜tool▁call▁end｜>";  // the two above
inline constexpr std::string_view kCallSeparator = "\n";
// The markers that are tokens of their own in the vocabulary: a forced call writes each as that
// one token (see CompiledGrammars::token_literal).
inline constexpr std::string_view kMarkerTokens[] = {kCallsBegin, kCallsEnd, kCallBegin, kCallSep,
                                                     kCallEndToken};
}  // namespace deepseek_v3

// OpenAI's tool_choice: "none" (answer in text), "auto" (the model decides), "required" (at least
// one call), or {"type": "function", "function": {"name": ...}} (exactly that call).
enum class ToolChoice { None, Auto, Required, Function };

struct ToolFunction {
  std::string name;
  // A JSON schema for the arguments, in the client's key order ({"type": "object"} if not given).
  nlohmann::ordered_json parameters;
};

struct ToolRequest {
  nlohmann::json tools;  // as given: the chat template renders them
  std::vector<ToolFunction> functions;
  ToolChoice choice = ToolChoice::Auto;
  std::string function;  // ToolChoice::Function: the one to call
  bool parallel = true;  // parallel_tool_calls: may a forced answer hold several calls

  // The output is parsed for calls (with "none" the model is asked not to call: text stays text).
  bool parses_calls() const { return choice != ToolChoice::None; }
};

// The tool fields of a chat body: nullopt without "tools". 400 for a malformed tool, a
// tool_choice without tools or naming an unknown function, and a model whose chat template has
// no tool-call syntax.
std::optional<ToolRequest> parse_tool_request(const nlohmann::json& body,
                                              const OrderedBody& ordered,
                                              const tokenizer::Tokenizer& tokenizer);

// The grammar of the choice's output: for "required" or a named function, one call (or, with
// parallel_tool_calls, one or more) of the allowed functions with arguments valid for their
// schemas; for "auto" with a response_format, a call or the format; otherwise the
// response_format's grammar (null for none).
grammar::GrammarPtr chat_output_grammar(const std::optional<ToolRequest>& tools,
                                        const nlohmann::json& body, const OrderedBody& ordered,
                                        CompiledGrammars& grammars);

}  // namespace mlaserve::server
