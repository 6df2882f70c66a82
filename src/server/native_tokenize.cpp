// POST /tokenize and POST /detokenize.
#include "core/error.h"
#include "server/api_error.h"
#include "server/http_response.h"
#include "server/json_fields.h"
#include "server/native_handlers.h"
#include "server/prompt_input.h"

namespace mlaserve::server {

namespace {

// "text" or "prompt" (SGLang and vLLM spell it differently), or chat "messages" (with the
// request's tools and chat_template_kwargs, as the chat API renders them).
std::vector<int32_t> tokens_of(const nlohmann::json& body, const std::string& text_body,
                               const tokenizer::Tokenizer& tokenizer) {
  if (field(body, "messages")) {
    const OrderedBody ordered(text_body);
    const nlohmann::json* tools = field(body, "tools");
    return chat_prompt(chat_messages(body), tokenizer,
                       tools && tools->is_array() ? ordered.at("/tools") : nullptr,
                       chat_template_kwargs(body, ordered))
        .ids;
  }
  std::optional<std::string> text = read_string(body, "text");
  if (!text) text = read_string(body, "prompt");
  if (!text) throw invalid_request("Give 'text' (or 'prompt') or 'messages'", "text");
  const bool add_special_tokens = read_bool(body, "add_special_tokens").value_or(true);
  try {
    return tokenizer.encode(*text, add_special_tokens);
  } catch (const Error& error) {
    throw invalid_request(std::string("'text' cannot be tokenized: ") + error.what(), "text");
  }
}

}  // namespace

void handle_tokenize(const ServerContext& context, const httplib::Request& request,
                     httplib::Response& response) {
  const nlohmann::json body = parse_json_object(request.body);
  const std::vector<int32_t> tokens = tokens_of(body, request.body, context.tokenizer);
  send_json(response, {{"tokens", tokens},
                       {"count", tokens.size()},
                       {"max_model_len", context.engine.context_length()}});
}

void handle_detokenize(const ServerContext& context, const httplib::Request& request,
                       httplib::Response& response) {
  const nlohmann::json body = parse_json_object(request.body);
  const nlohmann::json* tokens = field(body, "tokens");
  if (!tokens) throw invalid_request("'tokens' is required", "tokens");
  const std::vector<int32_t> ids =
      read_token_ids(*tokens, "tokens", context.tokenizer.vocab_size());
  const bool skip_special_tokens = read_bool(body, "skip_special_tokens").value_or(false);
  try {
    send_json(response, {{"text", context.tokenizer.decode(ids, skip_special_tokens)}});
  } catch (const Error& error) {
    throw invalid_request(std::string("'tokens' cannot be decoded: ") + error.what(), "tokens");
  }
}

}  // namespace mlaserve::server
