#include "server/tool_calls.h"

#include <fmt/format.h>

#include <algorithm>

#include "server/api_error.h"
#include "server/json_fields.h"
#include "tokenizer/deepseek_v32_encoding.h"
#include "tokenizer/deepseek_v4_encoding.h"

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

// One call of `function` in V3's syntax (type, name, fenced arguments) or V3.1's (name,
// arguments): arguments valid for its parameters schema.
GrammarBuilder::Rule marker_call_rule(const ToolFunction& function, ToolSyntax syntax,
                                      const CompiledGrammars& grammars, GrammarBuilder& builder) {
  using namespace deepseek_v3;
  if (syntax == ToolSyntax::DeepseekV31) {
    return builder.sequence({builder.literal(grammars.token_literal(kCallBegin) + function.name +
                                             grammars.token_literal(kCallSep)),
                             builder.json_schema(function.parameters),
                             builder.literal(grammars.token_literal(kCallEndToken))});
  }
  const std::string head =
      fmt::format("{}function{}{}{}", grammars.token_literal(kCallBegin),
                  grammars.token_literal(kCallSep), function.name, kArgumentsBegin);
  const std::string end = std::string(kArgumentsEnd) + grammars.token_literal(kCallEndToken);
  return builder.sequence(
      {builder.literal(head), builder.json_schema(function.parameters), builder.literal(end)});
}

// Any of `bytes`' characters, one or more times.
GrammarBuilder::Rule characters(const std::string& bytes, GrammarBuilder& builder) {
  std::vector<GrammarBuilder::Rule> alternatives;
  for (const char c : bytes) alternatives.push_back(builder.literal(std::string(1, c)));
  return builder.one_or_more(builder.choice(std::move(alternatives)), builder.literal(""));
}

// One call in Kimi's syntax: the "functions.NAME:IDX" header (any index) and JSON arguments
// valid for the parameters schema.
GrammarBuilder::Rule kimi_call_rule(const ToolFunction& function, const CompiledGrammars& grammars,
                                    GrammarBuilder& builder) {
  using namespace kimi_k2;
  return builder.sequence({builder.literal(grammars.token_literal(kCallBegin) +
                                           std::string(kIdPrefix) + function.name + ":"),
                           characters("0123456789", builder),
                           builder.literal(grammars.token_literal(kArgumentsBegin)),
                           builder.json_schema(function.parameters),
                           builder.literal(grammars.token_literal(kCallEnd))});
}

// A DSML string value written raw: any UTF-8 text without '<' (which could begin the closing
// tag), possibly empty.
GrammarBuilder::Rule raw_text(GrammarBuilder& builder) {
  std::string bytes = "\t\n";
  for (int c = 0x20; c <= 0xF4; ++c) {
    if (c != '<' && c != 0x7F && c != 0xC0 && c != 0xC1) {
      bytes.push_back(static_cast<char>(c));
    }
  }
  return builder.choice({characters(bytes, builder), builder.literal("")});
}

// The raw values a string property may take, when its schema lists them (enum or const).
std::optional<std::vector<std::string>> listed_strings(const nlohmann::ordered_json& schema) {
  std::vector<std::string> values;
  if (const auto it = schema.find("const"); it != schema.end()) {
    if (!it->is_string()) return std::nullopt;
    values.push_back(it->get<std::string>());
  } else if (const auto en = schema.find("enum"); en != schema.end()) {
    if (!en->is_array() || en->empty()) return std::nullopt;
    for (const auto& value : *en) {
      if (!value.is_string()) return std::nullopt;
      values.push_back(value.get<std::string>());
    }
  } else {
    return std::nullopt;
  }
  // A value with '<' could not be told from the closing tag.
  for (const std::string& value : values) {
    if (value.find('<') != std::string::npos) return std::nullopt;
  }
  return values;
}

// A plain string property: {"type": "string"} and keywords that do not constrain the text.
bool plain_string(const nlohmann::ordered_json& schema) {
  if (schema.value("type", nlohmann::ordered_json()) != "string") return false;
  for (const auto& [key, value] : schema.items()) {
    if (key != "type" && key != "description" && key != "title" && key != "default" &&
        key != "examples")
      return false;
  }
  return true;
}

// One DSML parameter, "\n" first: raw text for a plain or listed string, else JSON.
GrammarBuilder::Rule dsml_parameter(const std::string& name, nlohmann::ordered_json schema,
                                    const nlohmann::ordered_json& root, GrammarBuilder& builder) {
  using namespace tokenizer::dsv32;
  const auto head = [&](bool raw) {
    return builder.literal(
        fmt::format("\n{}{}\" string=\"{}\">", kParameterBegin, name, raw ? "true" : "false"));
  };
  const GrammarBuilder::Rule end = builder.literal(std::string(kParameterEnd));
  if (plain_string(schema)) return builder.sequence({head(true), raw_text(builder), end});
  if (const auto values = listed_strings(schema)) {
    std::vector<GrammarBuilder::Rule> literals;
    for (const std::string& value : *values) literals.push_back(builder.literal(value));
    return builder.sequence({head(true), builder.choice(std::move(literals)), end});
  }
  // The property's schema may refer to the parameters' definitions.
  for (const char* defs : {"$defs", "definitions"}) {
    if (root.contains(defs) && !schema.contains(defs)) schema[defs] = root[defs];
  }
  return builder.sequence({head(false), builder.json_schema(schema), end});
}

// One call in DSML: the invoke element with a parameter per property of the schema, in its order
// (the required ones always, the others optionally); a schema without properties takes any.
GrammarBuilder::Rule dsml_call_rule(const ToolFunction& function, GrammarBuilder& builder) {
  using namespace tokenizer::dsv32;
  const nlohmann::ordered_json& schema = function.parameters;
  const std::string begin = fmt::format("{}{}\">", kInvokeBegin, function.name);
  const std::string end = fmt::format("\n{}", kInvokeEnd);
  const auto properties = schema.find("properties");
  if (properties == schema.end() || !properties->is_object()) {
    // Any parameters: NAME string="false" with any JSON value.
    const GrammarBuilder::Rule name =
        characters("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.", builder);
    const GrammarBuilder::Rule any =
        builder.sequence({builder.literal(fmt::format("\n{}", kParameterBegin)), name,
                          builder.literal("\" string=\"false\">"),
                          builder.json_schema(nlohmann::ordered_json::object()),
                          builder.literal(std::string(kParameterEnd))});
    return builder.sequence(
        {builder.literal(begin),
         builder.choice({builder.one_or_more(any, builder.literal("")), builder.literal("\n")}),
         builder.literal(end)});
  }
  if (properties->empty()) return builder.literal(begin + "\n" + end);
  std::vector<std::string> required;
  if (const auto list = schema.find("required"); list != schema.end() && list->is_array()) {
    for (const auto& name : *list) {
      if (name.is_string()) required.push_back(name.get<std::string>());
    }
  }
  std::vector<GrammarBuilder::Rule> parts = {builder.literal(begin)};
  for (const auto& [name, property] : properties->items()) {
    GrammarBuilder::Rule parameter = dsml_parameter(name, property, schema, builder);
    const bool is_required = std::find(required.begin(), required.end(), name) != required.end();
    parts.push_back(is_required ? parameter : builder.choice({parameter, builder.literal("")}));
  }
  parts.push_back(builder.literal(end));
  return builder.sequence(std::move(parts));
}

GrammarBuilder::Rule calls_rule(const ToolRequest& tools, const CompiledGrammars& grammars,
                                GrammarBuilder& builder) {
  std::vector<GrammarBuilder::Rule> calls;
  for (const ToolFunction& function : tools.functions) {
    if (tools.choice != ToolChoice::Function || function.name == tools.function) {
      calls.push_back(is_dsml(tools.syntax) ? dsml_call_rule(function, builder)
                      : tools.syntax == ToolSyntax::Kimi
                          ? kimi_call_rule(function, grammars, builder)
                          : marker_call_rule(function, tools.syntax, grammars, builder));
    }
  }
  GrammarBuilder::Rule call = builder.choice(std::move(calls));
  if (is_dsml(tools.syntax)) {
    if (tools.parallel && tools.choice != ToolChoice::Function) {
      call = builder.one_or_more(call, builder.literal("\n"));
    }
    return builder.sequence(
        {builder.literal(fmt::format("\n\n{}\n", dsml_calls_begin(tools.syntax))), call,
         builder.literal(fmt::format("\n{}", dsml_calls_end(tools.syntax)))});
  }
  if (tools.parallel && tools.choice != ToolChoice::Function) {
    call = builder.one_or_more(
        call,
        builder.literal(tools.syntax == ToolSyntax::DeepseekV3 ? deepseek_v3::kCallSeparator : ""));
  }
  const bool kimi = tools.syntax == ToolSyntax::Kimi;
  return builder.sequence({builder.literal(grammars.token_literal(kimi ? kimi_k2::kCallsBegin
                                                                       : deepseek_v3::kCallsBegin)),
                           call,
                           builder.literal(grammars.token_literal(kimi ? kimi_k2::kCallsEnd
                                                                       : deepseek_v3::kCallsEnd))});
}

// Kimi-K2's template: it writes Kimi's calls section, or declares tools as Kimi does.
bool kimi_template(const std::string& source) {
  return source.find(kimi_k2::kCallsBegin) != std::string::npos ||
         source.find("<|im_system|>tool_declare<|im_middle|>") != std::string::npos;
}

}  // namespace

std::string_view kimi_k2::call_id(std::string_view header) {
  const size_t begin = header.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return {};
  return header.substr(begin, header.find_last_not_of(" \t\r\n") + 1 - begin);
}

std::string_view kimi_k2::function_name(std::string_view header) {
  header = call_id(header);
  const size_t colon = header.rfind(':');
  if (!header.starts_with(kIdPrefix) || colon == std::string_view::npos ||
      colon + 1 == header.size() ||
      header.find_first_not_of("0123456789", colon + 1) != std::string_view::npos) {
    return header;
  }
  return header.substr(kIdPrefix.size(), colon - kIdPrefix.size());
}

bool is_dsml(ToolSyntax syntax) {
  return syntax == ToolSyntax::Dsml || syntax == ToolSyntax::DsmlV4;
}

std::string_view dsml_calls_begin(ToolSyntax syntax) {
  return syntax == ToolSyntax::DsmlV4 ? tokenizer::dsv4::kCallsBegin
                                      : tokenizer::dsv32::kCallsBegin;
}

std::string_view dsml_calls_end(ToolSyntax syntax) {
  return syntax == ToolSyntax::DsmlV4 ? tokenizer::dsv4::kCallsEnd : tokenizer::dsv32::kCallsEnd;
}

std::optional<ToolSyntax> tool_syntax(const tokenizer::Tokenizer& tokenizer) {
  if (tokenizer.chat_format() == tokenizer::ChatFormatKind::DeepseekV32) return ToolSyntax::Dsml;
  if (tokenizer.chat_format() == tokenizer::ChatFormatKind::DeepseekV4) return ToolSyntax::DsmlV4;
  const std::string& source = tokenizer.chat_template_source();
  if (source.find("｜DSML｜") != std::string::npos) return ToolSyntax::Dsml;
  const auto is_token = [&](std::string_view marker) {
    return tokenizer.token_to_id(marker).has_value();
  };
  if (kimi_template(source) &&
      std::all_of(std::begin(kimi_k2::kMarkerTokens), std::end(kimi_k2::kMarkerTokens), is_token)) {
    return ToolSyntax::Kimi;
  }
  if (source.find(deepseek_v3::kCallsBegin) == std::string::npos ||
      !std::all_of(std::begin(deepseek_v3::kMarkerTokens), std::end(deepseek_v3::kMarkerTokens),
                   is_token)) {
    return std::nullopt;
  }
  return source.find("```json") != std::string::npos ? ToolSyntax::DeepseekV3
                                                     : ToolSyntax::DeepseekV31;
}

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
  ToolRequest request;
  request.syntax = required_tool_syntax(tokenizer, "tools");
  request.tools = ordered.at("/tools");
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

ToolSyntax required_tool_syntax(const tokenizer::Tokenizer& tokenizer, const std::string& param) {
  const std::optional<ToolSyntax> syntax = tool_syntax(tokenizer);
  if (!syntax) {
    throw invalid_request(
        "This model's chat template and vocabulary have no tool-call syntax (DeepSeek-V3's, "
        "V3.1's, V3.2's DSML or Kimi-K2's), so it cannot call tools",
        param);
  }
  return *syntax;
}

nlohmann::ordered_json chat_tool_json(const ToolFunction& function,
                                      const std::optional<std::string>& description) {
  nlohmann::ordered_json json = {{"name", function.name}};
  if (description) json["description"] = *description;
  json["parameters"] = function.parameters;
  return {{"type", "function"}, {"function", std::move(json)}};
}

grammar::GrammarPtr chat_output_grammar(const std::optional<ToolRequest>& tools,
                                        const std::optional<OutputFormat>& format,
                                        CompiledGrammars& grammars) {
  const bool forced =
      tools && (tools->choice == ToolChoice::Required || tools->choice == ToolChoice::Function);
  const bool call_or_format = tools && tools->choice == ToolChoice::Auto && format;
  if (!forced && !call_or_format) return output_format_grammar(format, grammars, "response_format");
  // The key holds everything the grammar is built from.
  nlohmann::ordered_json key = {{"choice", static_cast<int>(tools->choice)},
                                {"syntax", static_cast<int>(tools->syntax)},
                                {"thinking", tools->thinking},
                                {"function", tools->function},
                                {"parallel", tools->parallel},
                                {"format", forced ? "" : output_format_key(*format)}};
  for (const ToolFunction& function : tools->functions) {
    key["functions"].push_back({function.name, function.parameters});
  }
  return grammars.get(
      "tools:" + key.dump(),
      [&] {
        GrammarBuilder builder;
        GrammarBuilder::Rule root = calls_rule(*tools, grammars, builder);
        if (!forced) root = builder.choice({root, add_output_format(*format, builder)});
        // The prompt opened a thinking block: the answer closes it first.
        if (tools->thinking) root = builder.sequence({builder.literal("</think>"), root});
        return std::move(builder).build(root);
      },
      "tools");
}

}  // namespace mlaserve::server
