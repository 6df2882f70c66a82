#include "tokenizer/deepseek_v32_encoding.h"

#include <fmt/format.h>

#include "core/error.h"

namespace mlaserve::tokenizer::dsv32 {

namespace {

using deepseek_encoding::dsml_calls;
using deepseek_encoding::get;
using deepseek_encoding::Json;
using deepseek_encoding::kAssistant;
using deepseek_encoding::kUserBegin;
using deepseek_encoding::last_user_index;
using deepseek_encoding::py_str;
using deepseek_encoding::response_format_section;
using deepseek_encoding::role_of;
using deepseek_encoding::str_or_empty;
using deepseek_encoding::tool_schemas;
using deepseek_encoding::truthy;

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
// The V3.2 reading of a call's function.arguments: JSON text (an error when it is not valid
// JSON), or the arguments object itself.
Json read_arguments(const Json* raw, size_t index) {
  if (raw == nullptr) return Json();
  if (!raw->is_string()) return *raw;
  try {
    return Json::parse(raw->get<std::string>());
  } catch (const Json::exception&) {
    fail("tool_calls[{}].function.arguments is not valid JSON", index);
  }
}

std::string render_tools(const Json& tools) {
  return std::string(kToolsSystemTemplate) + tool_schemas(tools) + std::string(kToolsSystemEnd);
}

std::string render_tool_calls(const Json& calls) {
  return dsml_calls(calls, kCallsBegin, kCallsEnd, read_arguments);
}

std::string render_message(size_t index, const Json& messages, ThinkingMode mode) {
  const Json& message = messages[index];
  if (!message.is_object()) fail("message {} is not an object", index);
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
    if (truthy(response_format)) prompt += "\n\n" + response_format_section(*response_format);
  } else if (role == "developer") {
    if (!truthy(content)) fail("a developer message needs content");
    std::string developer;
    if (truthy(tools)) developer += "\n\n" + render_tools(*tools);
    if (truthy(response_format)) developer += "\n\n" + response_format_section(*response_format);
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
      fail("tool message {} does not follow an assistant message", index);
    }
    const Json* calls = get(messages[static_cast<size_t>(assistant)], "tool_calls");
    const auto order = static_cast<size_t>(at - assistant);
    if (!truthy(calls) || !calls->is_array() || calls->size() < order) {
      fail("tool message {} answers no tool call", index);
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
            "in thinking mode an assistant message after the last user "
            "message needs reasoning_content or tool_calls (message {})",
            index);
      }
      thinking_part = str_or_empty(reasoning, "reasoning_content") + std::string(kThinkEnd);
    }
    prompt += thinking_part + str_or_empty(content, "an assistant message's content") + calls +
              std::string(kEos);
  } else {
    fail("unknown role '{}' (message {})", role, index);
  }
  return prompt;
}

std::string encode(const Json& messages, const EncodeOptions& options) {
  if (!messages.is_array()) fail("messages must be a list");
  if (options.context > messages.size()) {
    fail("context of {} messages, but only {} given", options.context, messages.size());
  }
  // drop_thinking removes the reasoning of assistant turns before the last user turn, which
  // render_message never prints: the output is the same either way.
  std::string prompt = options.add_bos && options.context == 0 ? std::string(kBos) : "";
  for (size_t i = options.context; i < messages.size(); ++i) {
    prompt += render_message(i, messages, options.thinking_mode);
  }
  return prompt;
}

}  // namespace

std::string encode_messages(const nlohmann::ordered_json& messages, const EncodeOptions& options) {
  // Every error, the shared helpers' included, names the format it comes from.
  try {
    return encode(messages, options);
  } catch (const Error& error) {
    fail("DeepSeek-V3.2 chat: {}", error.what());
  }
}

}  // namespace mlaserve::tokenizer::dsv32
