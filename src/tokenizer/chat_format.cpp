#include "tokenizer/chat_format.h"

#include "tokenizer/jinja_value.h"

namespace mlaserve::tokenizer {

bool is_reserved_chat_variable(std::string_view name) {
  for (const std::string_view reserved : {"messages", "tools", "add_generation_prompt", "bos_token",
                                          "eos_token", "pad_token", "unk_token"}) {
    if (name == reserved) return true;
  }
  return false;
}

ChatFormatKind builtin_chat_format(std::string_view name) {
  if (name == kDeepseekV32FormatName) return ChatFormatKind::DeepseekV32;
  if (name == kDeepseekV4FormatName) return ChatFormatKind::DeepseekV4;
  return ChatFormatKind::None;
}

bool thinking_requested(const nlohmann::ordered_json& kwargs) {
  if (!kwargs.is_object()) return false;
  for (const char* name : {"thinking", "enable_thinking"}) {
    const auto it = kwargs.find(name);
    if (it != kwargs.end()) return jinja::Value::from_json(*it).truthy();
  }
  return false;
}

}  // namespace mlaserve::tokenizer
