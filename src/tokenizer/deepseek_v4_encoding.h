// DeepSeek-V4's chat format. Like V3.2 (deepseek_v32_encoding.h), the release ships no Jinja chat
// template but a Python encoder, encoding/encoding_dsv4.py; this is that encoder in C++, rule for
// rule. What V4 does its own way:
// - tools are described in the system (or developer) message with V4's own text, and an
//   assistant's calls are a <｜DSML｜tool_calls> block (V3.2: function_calls) of the same
//   invoke/parameter elements (deepseek_encoding.h);
// - there is no tool role: tool results join a user turn as <tool_result>...</tool_result>
//   blocks (in the order of the calls they answer), and consecutive user turns merge, their parts
//   separated by a blank line;
// - in thinking mode, unless some message has tools, the reasoning of assistant turns before the
//   last user turn is dropped along with the developer messages there, and only the last user
//   turn opens "<think>"; with tools every turn keeps its reasoning and opens "<think>";
// - reasoning_effort "max" puts an instruction to think exhaustively first (thinking mode);
// - the roles latest_reminder (<｜latest_reminder｜>) and developer, and the per-message "task"
//   (DeepSeek's quick-instruction tokens) and "wo_eos" (no end of sentence after an assistant).
// tests/data/chat-v4/ holds DeepSeek's own test vectors and more cases encoded by DeepSeek's
// encoder, which this reproduces byte for byte.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "tokenizer/deepseek_encoding.h"

namespace mlaserve::tokenizer::dsv4 {

using deepseek_encoding::kBos;
using deepseek_encoding::kEos;
using deepseek_encoding::ThinkingMode;

// The block around V4's calls.
inline constexpr std::string_view kCallsBegin = "<｜DSML｜tool_calls>";
inline constexpr std::string_view kCallsEnd = "</｜DSML｜tool_calls>";

// The encoder's reasoning_effort: None and "high" add nothing to the prompt; "max" puts DeepSeek's
// maximum-effort instruction before the first message in thinking mode.
enum class ReasoningEffort { Unset, High, Max };

struct EncodeOptions {
  ThinkingMode thinking_mode = ThinkingMode::Chat;
  // The encoder's drop_thinking (in thinking mode, when no message has tools): drops the
  // reasoning of assistant turns and the developer messages before the last user turn.
  bool drop_thinking = true;
  bool add_bos = true;  // add_default_bos_token (only when context is 0)
  // The first `context` messages are earlier turns already in the prompt: only the rest are
  // rendered (encode_messages's `context` argument).
  size_t context = 0;
  ReasoningEffort reasoning_effort = ReasoningEffort::Unset;
};

// encode_messages(messages, thinking_mode, context, drop_thinking, add_default_bos_token,
// reasoning_effort): `messages` is a JSON array of OpenAI-style messages (system/developer with
// optional "tools" and "response_format", user, assistant with "content", "reasoning_content" and
// "tool_calls", tool with "tool_call_id", latest_reminder), with object keys in the order the
// client wrote them (tool schemas are printed in that order). A message the Python encoder
// rejects is an mlaserve::Error saying why.
std::string encode_messages(const nlohmann::ordered_json& messages, const EncodeOptions& options);

// chat_template_kwargs' "reasoning_effort": absent or null is Unset, "high" and "max" are
// themselves, OpenAI's lighter "minimal", "low" and "medium" are Unset (V4's default); anything
// else is an Error.
ReasoningEffort reasoning_effort_of(const nlohmann::ordered_json& kwargs);

}  // namespace mlaserve::tokenizer::dsv4
