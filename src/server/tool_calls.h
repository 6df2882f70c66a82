// Tool calls in the chat API: the request's "tools", "tool_choice" and "parallel_tool_calls",
// and the grammar that makes the model write a call when the request demands one, in the
// tool-call syntax of the model's chat format (ToolSyntax). A model answers in the syntax its chat
// format writes calls in, which chat_output.h parses back.
//
// DeepSeek-V3's chat template writes an assistant's calls as
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGUMENTS\n```<｜tool▁call▁end｜>
// with further calls after a "\n", and <｜tool▁calls▁end｜> after the last. DeepSeek-V3.1's drops
// the type and the fence:
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGUMENTS<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
// with nothing between calls. DeepSeek-V3.2's encoder writes DSML (deepseek_v32_encoding.h): each
// argument a <｜DSML｜parameter> element, strings raw (string="true"), other values as JSON.
// Kimi-K2 writes
//   <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>ARGUMENTS<|tool_call_end|>...<|tool_calls_section_end|>
// with nothing between calls; "functions.NAME:IDX" (IDX counts the conversation's calls) is also
// the call's OpenAI id, as Kimi's own parsers (vLLM's kimi_k2) return it.
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

namespace kimi_k2 {
inline constexpr std::string_view kCallsBegin = "<|tool_calls_section_begin|>";
inline constexpr std::string_view kCallsEnd = "<|tool_calls_section_end|>";
inline constexpr std::string_view kCallBegin = "<|tool_call_begin|>";
inline constexpr std::string_view kArgumentsBegin = "<|tool_call_argument_begin|>";
inline constexpr std::string_view kCallEnd = "<|tool_call_end|>";
inline constexpr std::string_view kIdPrefix = "functions.";
inline constexpr std::string_view kMarkerTokens[] = {kCallsBegin, kCallsEnd, kCallBegin,
                                                     kArgumentsBegin, kCallEnd};
// A call's header "functions.NAME:IDX" without the spaces around it: the call's id.
std::string_view call_id(std::string_view header);
// The function's name in a call's header, or the id itself when it does not have that shape.
std::string_view function_name(std::string_view header);
}  // namespace kimi_k2

// How the model's chat format writes tool calls, told from the chat template's text (the built-in
// DeepSeek-V3.2 format, or a template that writes "｜DSML｜": DSML; a template that writes
// <｜tool▁calls▁begin｜> with a ```json fence: V3's, without one: V3.1's; Kimi-K2's, which
// writes <|tool_calls_section_begin|> or, as Kimi-K2-Instruct's first template, only declares
// the tools to "tool_declare": Kimi's). V3, V3.1 and Kimi need their markers to be tokens of
// the vocabulary. nullopt: the model cannot call tools.
// DeepSeek-V4's encoder writes the same DSML invokes inside a <｜DSML｜tool_calls> block
// (DsmlV4) where V3.2's writes <｜DSML｜function_calls>.
enum class ToolSyntax { DeepseekV3, DeepseekV31, Dsml, DsmlV4, Kimi };
std::optional<ToolSyntax> tool_syntax(const tokenizer::Tokenizer& tokenizer);

// The DSML syntaxes: their calls block's opening and closing tags.
bool is_dsml(ToolSyntax syntax);
std::string_view dsml_calls_begin(ToolSyntax syntax);
std::string_view dsml_calls_end(ToolSyntax syntax);

// OpenAI's tool_choice: "none" (answer in text), "auto" (the model decides), "required" (at least
// one call), or {"type": "function", "function": {"name": ...}} (exactly that call).
enum class ToolChoice { None, Auto, Required, Function };

struct ToolFunction {
  std::string name;
  // A JSON schema for the arguments, in the client's key order ({"type": "object"} if not given).
  nlohmann::ordered_json parameters;
};

struct ToolRequest {
  // OpenAI chat's tools ({"type": "function", "function": {...}}, keys in the client's order):
  // the chat template renders them.
  nlohmann::ordered_json tools;
  ToolSyntax syntax = ToolSyntax::DeepseekV3;
  // The prompt opened the model's thinking (set by run_chat): a forced call comes after
  // "</think>" (with no reasoning).
  bool thinking = false;
  std::vector<ToolFunction> functions;
  ToolChoice choice = ToolChoice::Auto;
  std::string function;  // ToolChoice::Function: the one to call
  bool parallel = true;  // parallel_tool_calls: may a forced answer hold several calls

  // The output is parsed for calls (with "none" the model is asked not to call: text stays text).
  bool parses_calls() const { return choice != ToolChoice::None; }
};

// The tool fields of a chat body: nullopt without "tools". 400 for a malformed tool, a
// tool_choice without tools or naming an unknown function, and a model whose chat format has
// no tool-call syntax.
std::optional<ToolRequest> parse_tool_request(const nlohmann::json& body,
                                              const OrderedBody& ordered,
                                              const tokenizer::Tokenizer& tokenizer);
// The syntax the model writes calls in; a 400 naming `param` when its chat format has none.
ToolSyntax required_tool_syntax(const tokenizer::Tokenizer& tokenizer, const std::string& param);
// The OpenAI chat tool the template renders for `function` (with its description, if any).
nlohmann::ordered_json chat_tool_json(const ToolFunction& function,
                                      const std::optional<std::string>& description);

// The grammar of the choice's output: for "required" or a named function, one call (or, with
// parallel_tool_calls, one or more) of the allowed functions with arguments valid for their
// schemas, in the request's syntax; for "auto" with a response_format, a call or the format;
// otherwise the response_format's grammar (null for none). In DSML a string property without
// enum, const or other constraints is written raw (string="true", any text without '<'); an enum
// or const of strings raw too; any other property as JSON valid for its schema (string="false").
grammar::GrammarPtr chat_output_grammar(const std::optional<ToolRequest>& tools,
                                        const std::optional<OutputFormat>& format,
                                        CompiledGrammars& grammars);

}  // namespace mlaserve::server
