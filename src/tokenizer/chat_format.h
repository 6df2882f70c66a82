// How a tokenizer turns a chat into a prompt: the model's Jinja chat template, or, for a model
// that ships none, a format built in here (DeepSeek-V3.2's or V4's encoder, chosen by
// config.json's model_type). What a request passes to either: the messages, the tools and the
// request's chat_template_kwargs (extra template variables, such as V3.1's {"thinking": true}).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace mlaserve::tokenizer {

enum class ChatFormatKind {
  None,         // no chat template
  Jinja,        // tokenizer_config.json's chat_template, chat_template.jinja or --chat-template
  DeepseekV32,  // the built-in DeepSeek-V3.2 encoder (deepseek_v32_encoding.h)
  DeepseekV4,   // the built-in DeepSeek-V4 encoder (deepseek_v4_encoding.h)
};

// The names --chat-template takes for the built-in encoders.
inline constexpr std::string_view kDeepseekV32FormatName = "deepseek-v32";
inline constexpr std::string_view kDeepseekV4FormatName = "deepseek-v4";

// The built-in format `name` (one of the names above) stands for; None for any other text.
ChatFormatKind builtin_chat_format(std::string_view name);

// One conversation to render. Keys keep the order the client wrote them in (tool schemas are
// printed in that order).
struct ChatInput {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;  // null: no tools
  // chat_template_kwargs: variables for the template (a JSON object).
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  bool add_generation_prompt = true;
};

// The variables a template already gets, which chat_template_kwargs may not set.
bool is_reserved_chat_variable(std::string_view name);

// Whether chat_template_kwargs turn thinking on, as DeepSeek-V3.1's template reads them:
// "thinking" when given, else "enable_thinking", else off (Python truthiness).
bool thinking_requested(const nlohmann::ordered_json& kwargs);

}  // namespace mlaserve::tokenizer
