// POST /v1/messages and POST /v1/messages/count_tokens.
#include "server/anthropic.h"
#include "server/http_response.h"
#include "server/json_fields.h"
#include "server/openai_format.h"
#include "server/openai_handlers.h"

namespace mlaserve::server {

namespace {

// Anthropic's replies have no context-independent default length: max_tokens is required.
constexpr int64_t kNoDefaultMaxTokens = 0;

void handle_messages(ServerContext& context, const httplib::Request& request,
                     httplib::Response& response) {
  const nlohmann::json body = parse_json_object(request.body);
  check_model(body, context);
  ChatRequest chat = parse_anthropic_request(body, OrderedBody(request.body), context.tokenizer,
                                             /*count_only=*/false);
  const std::string id = new_request_id("msg_");
  run_chat(context, request, response, std::move(chat), id, kNoDefaultMaxTokens,
           [&](const ChatRequest&, const ChatParsing& parsing) {
             return anthropic_format(id, context.served_model_name(), parsing);
           });
}

// The prompt tokens /v1/messages would count for the same body.
void handle_count_tokens(ServerContext& context, const httplib::Request& request,
                         httplib::Response& response) {
  const nlohmann::json body = parse_json_object(request.body);
  check_model(body, context);
  const ChatRequest chat = parse_anthropic_request(body, OrderedBody(request.body),
                                                   context.tokenizer, /*count_only=*/true);
  send_json(response, {{"input_tokens", render_chat_request(chat, context.tokenizer).ids.size()}});
}

}  // namespace

void add_anthropic_routes(RouteTable& routes, ServerContext& context) {
  routes.post(
      "/v1/messages",
      [&context](const httplib::Request& request, httplib::Response& response) {
        handle_messages(context, request, response);
      },
      ApiDialect::Anthropic);
  routes.post(
      "/v1/messages/count_tokens",
      [&context](const httplib::Request& request, httplib::Response& response) {
        handle_count_tokens(context, request, response);
      },
      ApiDialect::Anthropic);
}

}  // namespace mlaserve::server
