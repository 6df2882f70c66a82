#include "tokenizer/deepseek_encoding.h"

#include <fmt/format.h>

#include "core/error.h"
#include "tokenizer/jinja_value.h"

namespace mlaserve::tokenizer::deepseek_encoding {

namespace {

constexpr std::string_view kResponseFormat =
    "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

// One call's arguments (a JSON object) as DSML parameters, one a line.
std::string dsml_parameters(const Json& arguments) {
  std::string out;
  bool first = true;
  for (const auto& [key, value] : arguments.items()) {
    if (!first) out += '\n';
    first = false;
    const bool is_string = value.is_string();
    out +=
        fmt::format("{}{}\" string=\"{}\">{}{}", kParameterBegin, key, is_string ? "true" : "false",
                    is_string ? value.get<std::string>() : to_json(value), kParameterEnd);
  }
  return out;
}

std::string dsml_invoke(const Json& call, size_t index, ArgumentsReader read_arguments) {
  const Json* function = get(call, "function");
  const Json* name = function ? get(*function, "name") : nullptr;
  if (name == nullptr) fail("tool_calls[{}] has no function name", index);
  const Json arguments = read_arguments(get(*function, "arguments"), index);
  if (!arguments.is_object()) {
    fail("tool_calls[{}].function.arguments must be a JSON object", index);
  }
  return fmt::format("{}{}\">\n{}\n{}", kInvokeBegin, py_str(name, "a tool call's name"),
                     dsml_parameters(arguments), kInvokeEnd);
}

}  // namespace

bool truthy(const Json* value) {
  if (value == nullptr || value->is_null()) return false;
  if (value->is_boolean()) return value->get<bool>();
  if (value->is_number_integer()) return value->get<int64_t>() != 0;
  if (value->is_number_unsigned()) return value->get<uint64_t>() != 0;
  if (value->is_number_float()) return value->get<double>() != 0.0;
  if (value->is_string()) return !value->get_ref<const std::string&>().empty();
  return !value->empty();
}

const Json* get(const Json& message, std::string_view key) {
  if (!message.is_object()) return nullptr;
  const auto it = message.find(key);
  return it == message.end() ? nullptr : &*it;
}

std::string role_of(const Json& message) {
  const Json* role = get(message, "role");
  return role && role->is_string() ? role->get<std::string>() : std::string();
}

std::string py_str(const Json* value, std::string_view what) {
  if (value == nullptr || value->is_null()) return "None";
  if (value->is_string()) return value->get<std::string>();
  if (value->is_object() || value->is_array()) fail("{} must be text", what);
  return jinja::Value::from_json(*value).str();
}

std::string str_or_empty(const Json* value, std::string_view what) {
  return truthy(value) ? py_str(value, what) : std::string();
}

std::string to_json(const Json& value) {
  return jinja::to_json_text(jinja::Value::from_json(value), /*indent=*/-1, /*line=*/0);
}

ptrdiff_t last_user_index(const Json& messages) {
  for (size_t i = messages.size(); i-- > 0;) {
    const std::string role = role_of(messages[i]);
    if (role == "user" || role == "developer") return static_cast<ptrdiff_t>(i);
  }
  return -1;
}

std::string tool_schemas(const Json& tools) {
  if (!tools.is_array()) fail("'tools' must be a list");
  std::string out;
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json* function = get(tools[i], "function");
    if (function == nullptr) fail("tools[{}] has no 'function'", i);
    if (i > 0) out += '\n';
    out += to_json(*function);
  }
  return out;
}

std::string response_format_section(const Json& format) {
  return std::string(kResponseFormat) + to_json(format);
}

std::string dsml_calls(const Json& calls, std::string_view begin, std::string_view end,
                       ArgumentsReader read_arguments) {
  if (!calls.is_array()) fail("'tool_calls' must be a list");
  std::string out = fmt::format("\n\n{}\n", begin);
  for (size_t i = 0; i < calls.size(); ++i) {
    if (i > 0) out += '\n';
    out += dsml_invoke(calls[i], i, read_arguments);
  }
  out += fmt::format("\n{}", end);
  return out;
}

}  // namespace mlaserve::tokenizer::deepseek_encoding
