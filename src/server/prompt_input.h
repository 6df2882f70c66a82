// Prompts of the three generation APIs as token ids, and the token budget they leave.
// Text prompts get BOS like HF/SGLang (encode with special tokens); a rendered chat already
// begins with BOS, so it is encoded without; token-id prompts are used as given.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/structured_output.h"
#include "tokenizer/tokenizer.h"

namespace mlaserve::server {

struct Prompt {
  std::vector<int32_t> ids;
  std::optional<std::string> text;  // when given as text
};

// "prompt" of /v1/completions: a string, a list of strings, a list of ids or a list of id lists.
std::vector<Prompt> completion_prompts(const nlohmann::json& body,
                                       const tokenizer::Tokenizer& tokenizer);
// "chat_template_kwargs" of a chat body (extra chat-template variables, keys in the client's
// order): an empty object when absent. 400 naming the field when it is not an object, sets a
// variable the server passes itself (messages, tools, ...), or gives "thinking" or
// "enable_thinking" a value that is not a boolean.
nlohmann::ordered_json chat_template_kwargs(const nlohmann::json& body, const OrderedBody& ordered);
// "messages" of /v1/chat/completions as the chat template takes them: each an object with a
// string "role", its "content" a string or null (a list of text parts joined). 400 otherwise.
nlohmann::ordered_json chat_messages(const nlohmann::json& body);
// Chat messages rendered with the tokenizer's chat format, the request's tools (null: none; keys
// in the client's order) and its chat_template_kwargs.
Prompt chat_prompt(const nlohmann::ordered_json& messages, const tokenizer::Tokenizer& tokenizer,
                   const nlohmann::ordered_json& tools = nullptr,
                   const nlohmann::ordered_json& kwargs = nlohmann::ordered_json::object());

// "text" (a string or list) or "input_ids" (a list or list of lists) of /generate.
struct NativePrompts {
  std::vector<Prompt> prompts;
  bool batch = false;  // given as a list: the response is a list
};
NativePrompts native_prompts(const nlohmann::json& body, const tokenizer::Tokenizer& tokenizer);

// The tokens a choice may generate: `requested` if the context holds prompt + requested
// (400 naming both numbers otherwise), else `default_tokens` capped by the room left.
int64_t resolve_max_new_tokens(size_t prompt_tokens, std::optional<int64_t> requested,
                               int64_t default_tokens, int64_t context_length,
                               const std::string& param);

}  // namespace mlaserve::server
