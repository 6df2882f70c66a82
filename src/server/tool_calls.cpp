#include "server/tool_calls.h"

#include <fmt/format.h>

#include <algorithm>

#include "server/api_error.h"
#include "server/json_fields.h"

namespace mlaserve::server {

namespace {

using grammar::GrammarBuilder;

ToolFunction parse_tool(const nlohmann::json& tool, size_t index, const OrderedBody& ordered) {
  const std::string param = fmt::format("tools[{}]", index);
  if (!tool.is_object() || read_string(tool, "type").value_or("") != "function") {
    throw invalid_request(fmt::format("'{}' must be an object with \"type\": \"function\"", param),
                          param);
  }
  const nlohmann::json* function = field(tool, "function");
  if (!function || !function->is_object()) {
    throw invalid_request(fmt::format("'{}.function' must be an object", param), param);
  }
  const std::optional<std::string> name = read_string(*function, "name");
  if (!name || name->empty()) {
    throw invalid_request(fmt::format("'{}.function.name' must be a non-empty string", param),
                          param);
  }
  const nlohmann::json* parameters = field(*function, "parameters");
  if (parameters && !parameters->is_object()) {
    throw invalid_request(
        fmt::format("'{}.function.parameters' must be a JSON schema object", param), param);
  }
  if (!parameters) return {*name, nlohmann::ordered_json{{"type", "object"}}};
  return {*name, ordered.at(fmt::format("/tools/{}/function/parameters", index))};
}

// tool_choice: a string mode or {"type": "function", "function": {"name": ...}}.
void parse_tool_choice(const nlohmann::json& body, ToolRequest& request) {
  const nlohmann::json* choice = field(body, "tool_choice");
  if (!choice) return;
  if (choice->is_string()) {
    const std::string mode = choice->get<std::string>();
    if (mode == "none")
      request.choice = ToolChoice::None;
    else if (mode == "auto")
      request.choice = ToolChoice::Auto;
    else if (mode == "required")
      request.choice = ToolChoice::Required;
    else {
      throw invalid_request(
          fmt::format("'tool_choice' must be 'none', 'auto', 'required' or a function, got '{}'",
                      mode),
          "tool_choice");
    }
    return;
  }
  const nlohmann::json* function = choice->is_object() ? field(*choice, "function") : nullptr;
  const std::optional<std::string> name =
      function && function->is_object() ? read_string(*function, "name") : std::nullopt;
  if (!name) {
    throw invalid_request(
        "'tool_choice' must be a string or {\"type\": \"function\", \"function\": {\"name\": ...}}",
        "tool_choice");
  }
  const auto& functions = request.functions;
  if (std::none_of(functions.begin(), functions.end(),
                   [&](const ToolFunction& f) { return f.name == *name; })) {
    throw invalid_request(
        fmt::format("'tool_choice' names function '{}', which is not in 'tools'", *name),
        "tool_choice");
  }
  request.choice = ToolChoice::Function;
  request.function = *name;
}

// One call of `function`: its name, then arguments valid for its parameters schema.
GrammarBuilder::Rule call_rule(const ToolFunction& function, const CompiledGrammars& grammars,
                               GrammarBuilder& builder) {
  using namespace deepseek_v3;
  const std::string head =
      fmt::format("{}function{}{}{}", grammars.token_literal(kCallBegin),
                  grammars.token_literal(kCallSep), function.name, kArgumentsBegin);
  const std::string end = std::string(kArgumentsEnd) + grammars.token_literal(kCallEndToken);
  return builder.sequence(
      {builder.literal(head), builder.json_schema(function.parameters), builder.literal(end)});
}

GrammarBuilder::Rule calls_rule(const ToolRequest& tools, const CompiledGrammars& grammars,
                                GrammarBuilder& builder) {
  std::vector<GrammarBuilder::Rule> calls;
  for (const ToolFunction& function : tools.functions) {
    if (tools.choice != ToolChoice::Function || function.name == tools.function) {
      calls.push_back(call_rule(function, grammars, builder));
    }
  }
  GrammarBuilder::Rule call = builder.choice(std::move(calls));
  if (tools.parallel && tools.choice != ToolChoice::Function) {
    call = builder.one_or_more(call, builder.literal(deepseek_v3::kCallSeparator));
  }
  return builder.sequence({builder.literal(grammars.token_literal(deepseek_v3::kCallsBegin)), call,
                           builder.literal(grammars.token_literal(deepseek_v3::kCallsEnd))});
}

}  // namespace

std::optional<ToolRequest> parse_tool_request(const nlohmann::json& body,
                                              const OrderedBody& ordered,
                                              const tokenizer::Tokenizer& tokenizer) {
  const nlohmann::json* tools = field(body, "tools");
  if (!tools) {
    if (field(body, "tool_choice")) {
      throw invalid_request("'tool_choice' is only allowed when 'tools' are given", "tool_choice");
    }
    return std::nullopt;
  }
  if (!tools->is_array()) throw invalid_request("'tools' must be a list", "tools");
  const auto is_token = [&](std::string_view marker) {
    return tokenizer.token_to_id(marker).has_value();
  };
  if (tokenizer.chat_template_source().find(deepseek_v3::kCallsBegin) == std::string::npos ||
      !std::all_of(std::begin(deepseek_v3::kMarkerTokens), std::end(deepseek_v3::kMarkerTokens),
                   is_token)) {
    throw invalid_request(
        "This model's chat template and vocabulary have no tool-call syntax (DeepSeek-V3's), so "
        "it cannot call tools",
        "tools");
  }
  ToolRequest request;
  request.tools = *tools;
  for (size_t i = 0; i < tools->size(); ++i)
    request.functions.push_back(parse_tool((*tools)[i], i, ordered));
  request.choice = tools->empty() ? ToolChoice::None : ToolChoice::Auto;
  parse_tool_choice(body, request);
  if (request.functions.empty() && request.choice == ToolChoice::Required) {
    throw invalid_request("'tool_choice' 'required' needs at least one tool", "tool_choice");
  }
  request.parallel = read_bool(body, "parallel_tool_calls").value_or(true);
  return request;
}

grammar::GrammarPtr chat_output_grammar(const std::optional<ToolRequest>& tools,
                                        const nlohmann::json& body, const OrderedBody& ordered,
                                        CompiledGrammars& grammars) {
  const bool forced =
      tools && (tools->choice == ToolChoice::Required || tools->choice == ToolChoice::Function);
  const nlohmann::json* format = response_format(body);
  const bool call_or_format = tools && tools->choice == ToolChoice::Auto && format;
  if (!forced && !call_or_format) return response_format_grammar(body, ordered, grammars);
  // The key holds everything the grammar is built from.
  nlohmann::ordered_json key = {{"choice", static_cast<int>(tools->choice)},
                                {"function", tools->function},
                                {"parallel", tools->parallel},
                                {"format", forced ? "" : response_format_key(*format, ordered)}};
  for (const ToolFunction& function : tools->functions) {
    key["functions"].push_back({function.name, function.parameters});
  }
  return grammars.get(
      "tools:" + key.dump(),
      [&] {
        GrammarBuilder builder;
        GrammarBuilder::Rule root = calls_rule(*tools, grammars, builder);
        if (!forced) root = builder.choice({root, add_response_format(*format, ordered, builder)});
        return std::move(builder).build(root);
      },
      "tools");
}

}  // namespace mlaserve::server
