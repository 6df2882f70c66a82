#include "server/prompt_input.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "server/api_error.h"
#include "server/json_fields.h"

namespace mlaserve::server {

namespace {

Prompt encode_text(const std::string& text, const tokenizer::Tokenizer& tokenizer,
                   const char* param) {
  if (text.empty()) throw invalid_request(fmt::format("'{}' must not be empty", param), param);
  try {
    return {tokenizer.encode(text, /*add_special_tokens=*/true), text};
  } catch (const Error& error) {
    throw invalid_request(fmt::format("'{}' cannot be tokenized: {}", param, error.what()), param);
  }
}

Prompt id_prompt(const nlohmann::json& ids, const tokenizer::Tokenizer& tokenizer,
                 const char* param) {
  Prompt prompt{read_token_ids(ids, param, tokenizer.vocab_size()), std::nullopt};
  if (prompt.ids.empty()) {
    throw invalid_request(fmt::format("'{}' must not be empty", param), param);
  }
  return prompt;
}

bool all_of_type(const nlohmann::json& list, bool (nlohmann::json::*is_type)() const noexcept) {
  return std::all_of(list.begin(), list.end(),
                     [&](const nlohmann::json& item) { return (item.*is_type)(); });
}

// A string, a list of strings, a list of ids or a list of id lists, as prompts.
std::vector<Prompt> prompts_of(const nlohmann::json& value, const tokenizer::Tokenizer& tokenizer,
                               const char* param) {
  if (value.is_string()) return {encode_text(value.get<std::string>(), tokenizer, param)};
  if (!value.is_array() || value.empty()) {
    throw invalid_request(fmt::format("'{}' must be a non-empty string, list of strings, list of "
                                      "token ids or list of token id lists",
                                      param),
                          param);
  }
  std::vector<Prompt> prompts;
  if (all_of_type(value, &nlohmann::json::is_string)) {
    for (const auto& text : value) prompts.push_back(encode_text(text, tokenizer, param));
  } else if (all_of_type(value, &nlohmann::json::is_number)) {
    prompts.push_back(id_prompt(value, tokenizer, param));
  } else if (all_of_type(value, &nlohmann::json::is_array)) {
    for (const auto& ids : value) prompts.push_back(id_prompt(ids, tokenizer, param));
  } else {
    throw invalid_request(fmt::format("'{}' mixes strings, token ids and lists", param), param);
  }
  return prompts;
}

// The template expects string contents; OpenAI also allows a list of {"type": "text"} parts.
nlohmann::json content_as_text(const nlohmann::json& content) {
  if (content.is_null() || content.is_string()) return content;
  if (!content.is_array()) {
    throw invalid_request("message 'content' must be a string or a list of parts", "messages");
  }
  std::string text;
  for (const nlohmann::json& part : content) {
    // (value() would throw for a "type" that is not a string.)
    const nlohmann::json* type = part.is_object() ? field(part, "type") : nullptr;
    if (!type || *type != "text" || !part.contains("text") || !part["text"].is_string()) {
      throw invalid_request(
          "only text content parts ({\"type\": \"text\", \"text\": ...}) are "
          "supported",
          "messages");
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

}  // namespace

nlohmann::ordered_json chat_messages(const nlohmann::json& body) {
  const nlohmann::json* messages = field(body, "messages");
  if (!messages || !messages->is_array() || messages->empty()) {
    throw invalid_request("'messages' must be a non-empty list", "messages");
  }
  nlohmann::json normalized = nlohmann::json::array();
  for (const nlohmann::json& message : *messages) {
    if (!message.is_object() || !message.contains("role") || !message["role"].is_string()) {
      throw invalid_request("each message must be an object with a string 'role'", "messages");
    }
    nlohmann::json copy = message;
    copy["content"] = content_as_text(message.value("content", nlohmann::json()));
    normalized.push_back(std::move(copy));
  }
  return nlohmann::ordered_json::parse(normalized.dump());
}

std::vector<Prompt> completion_prompts(const nlohmann::json& body,
                                       const tokenizer::Tokenizer& tokenizer) {
  const nlohmann::json* prompt = field(body, "prompt");
  if (!prompt) throw invalid_request("'prompt' is required", "prompt");
  return prompts_of(*prompt, tokenizer, "prompt");
}

nlohmann::ordered_json chat_template_kwargs(const nlohmann::json& body,
                                            const OrderedBody& ordered) {
  const nlohmann::json* kwargs = field(body, "chat_template_kwargs");
  if (!kwargs || kwargs->is_null()) return nlohmann::ordered_json::object();
  if (!kwargs->is_object()) {
    throw invalid_request(
        fmt::format("'chat_template_kwargs' must be an object, got {}", kwargs->type_name()),
        "chat_template_kwargs");
  }
  for (const auto& [name, value] : kwargs->items()) {
    const std::string param = "chat_template_kwargs." + name;
    if (tokenizer::is_reserved_chat_variable(name)) {
      throw invalid_request(
          fmt::format("'{}' is not allowed: the server passes '{}' to the chat template itself",
                      param, name),
          param);
    }
    if ((name == "thinking" || name == "enable_thinking") && !value.is_boolean()) {
      throw invalid_request(fmt::format("'{}' must be a boolean, got {}", param, value.type_name()),
                            param);
    }
  }
  return ordered.at("/chat_template_kwargs");
}

Prompt chat_prompt(const nlohmann::ordered_json& messages, const tokenizer::Tokenizer& tokenizer,
                   const nlohmann::ordered_json& tools, const nlohmann::ordered_json& kwargs) {
  if (!tokenizer.has_chat_template()) {
    throw invalid_request("The model's tokenizer has no chat template; use /v1/completions",
                          "messages");
  }
  std::string rendered;
  try {
    tokenizer::ChatInput input;
    input.messages = messages;
    input.tools = tools;
    input.kwargs = kwargs;
    rendered = tokenizer.render_chat(input);
    return {tokenizer.encode(rendered, /*add_special_tokens=*/false), std::nullopt};
  } catch (const Error& error) {
    throw invalid_request(fmt::format("'messages' cannot be rendered: {}", error.what()),
                          "messages");
  }
}

NativePrompts native_prompts(const nlohmann::json& body, const tokenizer::Tokenizer& tokenizer) {
  const nlohmann::json* text = field(body, "text");
  const nlohmann::json* input_ids = field(body, "input_ids");
  if ((text == nullptr) == (input_ids == nullptr)) {
    throw invalid_request("Give exactly one of 'text' and 'input_ids'",
                          text ? "text" : "input_ids");
  }
  if (text) {
    if (!text->is_string() && !text->is_array()) {
      throw invalid_request("'text' must be a string or a list of strings", "text");
    }
    if (text->is_array() && !all_of_type(*text, &nlohmann::json::is_string)) {
      throw invalid_request("'text' must be a string or a list of strings", "text");
    }
    return {prompts_of(*text, tokenizer, "text"), text->is_array()};
  }
  if (!input_ids->is_array() || input_ids->empty()) {
    throw invalid_request("'input_ids' must be a non-empty list of token ids or of lists",
                          "input_ids");
  }
  const bool batch = (*input_ids)[0].is_array();
  if (!batch && !all_of_type(*input_ids, &nlohmann::json::is_number)) {
    throw invalid_request("'input_ids' must be a list of token ids or of lists", "input_ids");
  }
  return {prompts_of(*input_ids, tokenizer, "input_ids"), batch};
}

int64_t resolve_max_new_tokens(size_t prompt_tokens, std::optional<int64_t> requested,
                               int64_t default_tokens, int64_t context_length,
                               const std::string& param) {
  const auto prompt = static_cast<int64_t>(prompt_tokens);
  if (requested) {
    if (*requested > context_length - prompt) {
      throw ApiError(400,
                     fmt::format("This model's maximum context length is {} tokens. However, you "
                                 "requested {} tokens ({} in the prompt, {} for the completion). "
                                 "Please reduce the prompt or '{}'.",
                                 context_length,
                                 static_cast<uint64_t>(prompt) + static_cast<uint64_t>(*requested),
                                 prompt, *requested, param),
                     "invalid_request_error", param, "context_length_exceeded");
    }
    return *requested;
  }
  if (prompt >= context_length) {
    throw ApiError(400,
                   fmt::format("This model's maximum context length is {} tokens. However, the "
                               "prompt has {} tokens, leaving no room for a completion.",
                               context_length, prompt),
                   "invalid_request_error", "prompt", "context_length_exceeded");
  }
  return std::min(default_tokens, context_length - prompt);
}

}  // namespace mlaserve::server
