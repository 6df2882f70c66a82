// DeepSeek-V3.2's chat format. The release ships no Jinja chat template but a Python encoder
// (encoding/encoding_dsv32.py in the HuggingFace repo); this is that encoder in C++, rule for
// rule: the system prompt with the tools' JSON schemas and the DSML calling convention, user
// turns ending in "<｜Assistant｜>" and "<think>" (thinking mode, last user turn) or "</think>",
// assistant turns with their reasoning (thinking mode, after the last user turn) and their calls as
//   \n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="NAME">\n
//   <｜DSML｜parameter name="KEY"
//   string="true|false">VALUE</｜DSML｜parameter>\n...</｜DSML｜invoke> \n</｜DSML｜function_calls>
// and tool results gathered in <function_results>. tests/data/chat-v32/ holds DeepSeek's own
// test vectors, which it reproduces byte for byte.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "tokenizer/deepseek_encoding.h"

namespace mlaserve::tokenizer::dsv32 {

// The tokens and DSML elements V3.2 shares with V4 (deepseek_encoding.h), under V3.2's names.
using deepseek_encoding::kBos;
using deepseek_encoding::kEos;
using deepseek_encoding::kInvokeBegin;
using deepseek_encoding::kInvokeEnd;
using deepseek_encoding::kParameterBegin;
using deepseek_encoding::kParameterEnd;
using deepseek_encoding::kThinkBegin;
using deepseek_encoding::kThinkEnd;
using deepseek_encoding::ThinkingMode;
using deepseek_encoding::to_json;

// The block around V3.2's calls (V4 names it tool_calls).
inline constexpr std::string_view kCallsBegin = "<｜DSML｜function_calls>";
inline constexpr std::string_view kCallsEnd = "</｜DSML｜function_calls>";

struct EncodeOptions {
  ThinkingMode thinking_mode = ThinkingMode::Chat;
  // The encoder's drop_thinking: assistant reasoning before the last user turn is dropped (it is
  // never rendered there anyway, so this changes nothing in the output).
  bool drop_thinking = true;
  bool add_bos = true;  // add_default_bos_token (only when context is 0)
  // The first `context` messages are earlier turns already in the prompt: only the rest are
  // rendered (encode_messages's `context` argument).
  size_t context = 0;
};

// encode_messages(messages, thinking_mode, context, drop_thinking, add_default_bos_token):
// `messages` is a JSON array of OpenAI-style messages (system/developer with optional "tools" and
// "response_format", user, assistant with "content", "reasoning_content" and "tool_calls", tool),
// with object keys in the order the client wrote them (tool schemas are printed in that order).
// A message the Python encoder rejects is an mlaserve::Error saying why.
std::string encode_messages(const nlohmann::ordered_json& messages, const EncodeOptions& options);

}  // namespace mlaserve::tokenizer::dsv32
