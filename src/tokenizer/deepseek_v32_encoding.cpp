#include "tokenizer/deepseek_v32_encoding.h"

#include <fmt/format.h>

#include "core/error.h"
#include "tokenizer/jinja_value.h"

namespace mlaserve::tokenizer::dsv32 {

namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kToolsSystemTemplate =
    "## Tools\n"
    "\n"
    "You have access to a set of tools you can use to answer the user's question.\n"
    "You can invoke functions by writing a \"<｜DSML｜function_calls>\" block like the following "
    "as part of your reply to the user:\n"
    "<｜DSML｜function_calls>\n"
    "<｜DSML｜invoke name=\"$FUNCTION_NAME\">\n"
    "<｜DSML｜parameter name=\"$PARAMETER_NAME\" "
    "string=\"true|false\">$PARAMETER_VALUE</｜DSML｜parameter>\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "<｜DSML｜invoke name=\"$FUNCTION_NAME2\">\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "</｜DSML｜function_calls>\n"
    "\n"
    "String and scalar parameters should be specified as is without any escaping or quotes, "
    "while lists and objects should use JSON format. The \"string\" attribute should be set to "
    "\"true\" for string type parameters and \"false\" for other types (numbers, booleans, "
    "arrays, objects).\n"
    "\n"
    "If the thinking_mode is enabled, then after function results you should strongly consider "
    "outputting a thinking block. Here is an example:\n"
    "\n"
    "<｜DSML｜function_calls>\n"
    "...\n"
    "</｜DSML｜function_calls>\n"
    "\n"
    "<function_results>\n"
    "...\n"
    "</function_results>\n"
    "\n"
    "<think>...thinking about results</think>\n"
    "\n"
    "Here are the functions available in JSONSchema format:\n"
    "<functions>\n";
constexpr std::string_view kToolsSystemEnd = "\n</functions>\n";
constexpr std::string_view kResponseFormat =
    "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";
constexpr std::string_view kUserBegin = "<｜User｜>";
constexpr std::string_view kAssistant = "<｜Assistant｜>";

// Python truthiness of a JSON value (a missing key reads as null).
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

// Python's "{}".format(value) for the values a message holds: str as is, None as "None", numbers
// and booleans as Python prints them. Lists and objects (Python would print their repr) are not
// valid message text.
std::string py_str(const Json* value, std::string_view what) {
  if (value == nullptr || value->is_null()) return "None";
  if (value->is_string()) return value->get<std::string>();
  if (value->is_object() || value->is_array()) fail("DeepSeek-V3.2 chat: {} must be text", what);
  return jinja::Value::from_json(*value).str();
}

// `value or ""`.
std::string str_or_empty(const Json* value, std::string_view what) {
  return truthy(value) ? py_str(value, what) : std::string();
}

std::string render_tools(const Json& tools) {
  if (!tools.is_array()) fail("DeepSeek-V3.2 chat: 'tools' must be a list");
  std::string out(kToolsSystemTemplate);
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json* function = get(tools[i], "function");
    if (function == nullptr) fail("DeepSeek-V3.2 chat: tools[{}] has no 'function'", i);
    if (i > 0) out += '\n';
    out += to_json(*function);
  }
  out += kToolsSystemEnd;
  return out;
}

std::string render_response_format(const Json& format) {
  return std::string(kResponseFormat) + to_json(format);
}

// One call's arguments (a JSON object, or its text) as DSML parameters, one per line.
std::string arguments_to_dsml(const Json& call, size_t index) {
  const Json* function = get(call, "function");
  const Json* raw = function ? get(*function, "arguments") : nullptr;
  Json arguments;
  if (raw && raw->is_string()) {
    try {
      arguments = Json::parse(raw->get<std::string>());
    } catch (const Json::exception&) {
      fail("DeepSeek-V3.2 chat: tool_calls[{}].function.arguments is not valid JSON", index);
    }
  } else if (raw) {
    arguments = *raw;
  }
  if (!arguments.is_object()) {
    fail("DeepSeek-V3.2 chat: tool_calls[{}].function.arguments must be a JSON object", index);
  }
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

std::string render_tool_calls(const Json& calls) {
  if (!calls.is_array()) fail("DeepSeek-V3.2 chat: 'tool_calls' must be a list");
  std::string out = fmt::format("\n\n{}\n", kCallsBegin);
  for (size_t i = 0; i < calls.size(); ++i) {
    const Json* function = get(calls[i], "function");
    const Json* name = function ? get(*function, "name") : nullptr;
    if (name == nullptr) fail("DeepSeek-V3.2 chat: tool_calls[{}] has no function name", i);
    if (i > 0) out += '\n';
    out += fmt::format("{}{}\">\n{}\n{}", kInvokeBegin, py_str(name, "a tool call's name"),
                       arguments_to_dsml(calls[i], i), kInvokeEnd);
  }
  out += fmt::format("\n{}", kCallsEnd);
  return out;
}

ptrdiff_t last_user_index(const Json& messages) {
  for (size_t i = messages.size(); i-- > 0;) {
    const std::string role = role_of(messages[i]);
    if (role == "user" || role == "developer") return static_cast<ptrdiff_t>(i);
  }
  return -1;
}

std::string render_message(size_t index, const Json& messages, ThinkingMode mode) {
  const Json& message = messages[index];
  if (!message.is_object()) fail("DeepSeek-V3.2 chat: message {} is not an object", index);
  const bool thinking = mode == ThinkingMode::Thinking;
  const ptrdiff_t last_user = last_user_index(messages);
  const auto at = static_cast<ptrdiff_t>(index);
  const std::string role = role_of(message);
  const Json* content = get(message, "content");
  const Json* tools = get(message, "tools");
  const Json* response_format = get(message, "response_format");
  const Json* tool_calls = get(message, "tool_calls");
  const Json* reasoning = get(message, "reasoning_content");

  std::string prompt;
  if (role == "system") {
    prompt += str_or_empty(content, "a system message's content");
    if (truthy(tools)) prompt += "\n\n" + render_tools(*tools);
    if (truthy(response_format)) prompt += "\n\n" + render_response_format(*response_format);
  } else if (role == "developer") {
    if (!truthy(content)) fail("DeepSeek-V3.2 chat: a developer message needs content");
    std::string developer;
    if (truthy(tools)) developer += "\n\n" + render_tools(*tools);
    if (truthy(response_format)) developer += "\n\n" + render_response_format(*response_format);
    developer += "\n\n# The user's message is: " + py_str(content, "a developer message's content");
    prompt += fmt::format("{}{}{}", kUserBegin, developer, kAssistant);
    prompt += at == last_user && thinking ? kThinkBegin : kThinkEnd;
  } else if (role == "user") {
    prompt +=
        fmt::format("{}{}{}", kUserBegin, py_str(content, "a user message's content"), kAssistant);
    prompt += at == last_user && thinking ? kThinkBegin : kThinkEnd;
  } else if (role == "tool") {
    // The assistant turn whose calls these results answer, and which call this one answers.
    ptrdiff_t assistant = at - 1;
    while (assistant >= 0 && role_of(messages[static_cast<size_t>(assistant)]) == "tool") {
      --assistant;
    }
    if (assistant < 0 || role_of(messages[static_cast<size_t>(assistant)]) != "assistant") {
      fail("DeepSeek-V3.2 chat: tool message {} does not follow an assistant message", index);
    }
    const Json* calls = get(messages[static_cast<size_t>(assistant)], "tool_calls");
    const auto order = static_cast<size_t>(at - assistant);
    if (!truthy(calls) || !calls->is_array() || calls->size() < order) {
      fail("DeepSeek-V3.2 chat: tool message {} answers no tool call", index);
    }
    if (order == 1) prompt += "\n\n<function_results>";
    prompt += "\n<result>" + py_str(content, "a tool message's content") + "</result>";
    if (order == calls->size()) {
      prompt += "\n</function_results>\n\n";
      prompt += at >= last_user && thinking ? kThinkBegin : kThinkEnd;
    }
  } else if (role == "assistant") {
    const std::string calls = truthy(tool_calls) ? render_tool_calls(*tool_calls) : std::string();
    std::string thinking_part;
    if (thinking && at > last_user) {
      if (!truthy(reasoning) && !truthy(tool_calls)) {
        fail(
            "DeepSeek-V3.2 chat: in thinking mode an assistant message after the last user "
            "message needs reasoning_content or tool_calls (message {})",
            index);
      }
      thinking_part = str_or_empty(reasoning, "reasoning_content") + std::string(kThinkEnd);
    }
    prompt += thinking_part + str_or_empty(content, "an assistant message's content") + calls +
              std::string(kEos);
  } else {
    fail("DeepSeek-V3.2 chat: unknown role '{}' (message {})", role, index);
  }
  return prompt;
}

}  // namespace

std::string to_json(const nlohmann::ordered_json& value) {
  return jinja::to_json_text(jinja::Value::from_json(value), /*indent=*/-1, /*line=*/0);
}

std::string encode_messages(const nlohmann::ordered_json& messages, const EncodeOptions& options) {
  if (!messages.is_array()) fail("DeepSeek-V3.2 chat: messages must be a list");
  if (options.context > messages.size()) {
    fail("DeepSeek-V3.2 chat: context of {} messages, but only {} given", options.context,
         messages.size());
  }
  // drop_thinking removes the reasoning of assistant turns before the last user turn, which
  // render_message never prints: the output is the same either way.
  std::string prompt = options.add_bos && options.context == 0 ? std::string(kBos) : "";
  for (size_t i = options.context; i < messages.size(); ++i) {
    prompt += render_message(i, messages, options.thinking_mode);
  }
  return prompt;
}

}  // namespace mlaserve::tokenizer::dsv32
