// What DeepSeek's two chat encoders (V3.2's encoding_dsv32.py and V4's encoding_dsv4.py, ported in
// deepseek_v32_encoding.h and deepseek_v4_encoding.h) have in common: the special tokens, Python's
// view of the values a message holds (truthiness, str(), json.dumps), the response-format section
// and the DSML elements of an assistant's calls. Both write each call as
//   <｜DSML｜invoke name="NAME">\n<｜DSML｜parameter name="KEY" string="true|false">VALUE
//   </｜DSML｜parameter>\n...</｜DSML｜invoke>
// and differ only in the block around the calls (V3.2 function_calls, V4 tool_calls). What each
// version does its own way stays in its file.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace mlaserve::tokenizer::deepseek_encoding {

using Json = nlohmann::ordered_json;

inline constexpr std::string_view kBos = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";
inline constexpr std::string_view kThinkBegin = "<think>";
inline constexpr std::string_view kThinkEnd = "</think>";
inline constexpr std::string_view kUserBegin = "<｜User｜>";
inline constexpr std::string_view kAssistant = "<｜Assistant｜>";
// The DSML markers as the model writes them (plain text, not tokens of their own).
inline constexpr std::string_view kInvokeBegin = "<｜DSML｜invoke name=\"";
inline constexpr std::string_view kInvokeEnd = "</｜DSML｜invoke>";
inline constexpr std::string_view kParameterBegin = "<｜DSML｜parameter name=\"";
inline constexpr std::string_view kParameterEnd = "</｜DSML｜parameter>";

enum class ThinkingMode { Chat, Thinking };

// Python truthiness of a JSON value (a missing key, nullptr, reads as None).
bool truthy(const Json* value);

// message.get(key): nullptr when `message` is not an object or lacks the key.
const Json* get(const Json& message, std::string_view key);

// The message's "role", "" when it has none that is text.
std::string role_of(const Json& message);

// Python's "{}".format(value) for the values a message holds: str as is, None as "None", numbers
// and booleans as Python prints them. Lists and objects (Python would print their repr) are not
// valid message text: an Error saying `what` must be text.
std::string py_str(const Json* value, std::string_view what);

// `value or ""`, formatted as py_str does.
std::string str_or_empty(const Json* value, std::string_view what);

// Python's json.dumps(value, ensure_ascii=False), the encoders' to_json.
std::string to_json(const Json& value);

// The index of the last user or developer message, -1 when there is none.
ptrdiff_t last_user_index(const Json& messages);

// An OpenAI tool list's function definitions as JSON, one a line (render_tools's tool_schemas).
std::string tool_schemas(const Json& tools);

// The section a message's response_format adds after "\n\n".
std::string response_format_section(const Json& format);

// A call's arguments as the version's encoder reads them: `raw` is the call's
// function.arguments (nullptr when it has none), `index` the call's place for error messages.
using ArgumentsReader = Json (*)(const Json* raw, size_t index);

// An assistant's OpenAI tool_calls in DSML: "\n\n", `begin`, "\n", the invokes one a line, "\n",
// `end`. Each argument of the object `read_arguments` returns is a parameter: a string raw with
// string="true", any other value as JSON with string="false".
std::string dsml_calls(const Json& calls, std::string_view begin, std::string_view end,
                       ArgumentsReader read_arguments);

}  // namespace mlaserve::tokenizer::deepseek_encoding
