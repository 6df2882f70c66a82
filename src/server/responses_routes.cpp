// POST /v1/responses, GET and DELETE /v1/responses/{id}.
#include <limits>
#include <utility>

#include "server/api_error.h"
#include "server/http_response.h"
#include "server/json_fields.h"
#include "server/openai_format.h"
#include "server/openai_handlers.h"
#include "server/responses.h"

namespace mlaserve::server {

namespace {

// Like chat: without max_output_tokens a reply may use all the context the prompt leaves.
constexpr int64_t kDefaultMaxTokens = std::numeric_limits<int64_t>::max();
constexpr const char* kIdPattern = "/v1/responses/([^/]+)";

ApiError not_found(const std::string& id) {
  return ApiError(404, "Response with id '" + id + "' not found", "invalid_request_error", "id",
                  "response_not_found");
}

void handle_create(ServerContext& context, const httplib::Request& request,
                   httplib::Response& response) {
  const nlohmann::json body = parse_json_object(request.body);
  check_model(body, context);
  ResponsesRequest parsed =
      parse_responses_request(body, OrderedBody(request.body), context.tokenizer,
                              [&](const std::string& id) -> std::optional<nlohmann::ordered_json> {
                                std::optional<StoredResponse> stored = context.responses.get(id);
                                if (!stored) return std::nullopt;
                                return std::move(stored->conversation);
                              });
  ResponseHeader header{new_request_id("resp_"), unix_time_now(), context.served_model_name(),
                        std::move(parsed.echo)};
  ResponseDone done;
  if (parsed.store) {
    done = [&store = context.responses, id = header.id,
            conversation = std::move(parsed.conversation)](const nlohmann::json& finished,
                                                           const nlohmann::ordered_json& reply) {
      StoredResponse stored{finished, conversation};
      stored.conversation.push_back(reply);
      store.put(id, std::move(stored));
    };
  }
  const std::string id = header.id;
  run_chat(context, request, response, std::move(parsed.chat), id, kDefaultMaxTokens,
           [&](const ChatRequest&, const ChatParsing& parsing) {
             return responses_format(std::move(header), parsing, std::move(done));
           });
}

void handle_get(ServerContext& context, const httplib::Request& request,
                httplib::Response& response) {
  const std::string id = request.matches[1];
  const std::optional<StoredResponse> stored = context.responses.get(id);
  if (!stored) throw not_found(id);
  send_json(response, stored->response);
}

void handle_delete(ServerContext& context, const httplib::Request& request,
                   httplib::Response& response) {
  const std::string id = request.matches[1];
  if (!context.responses.erase(id)) throw not_found(id);
  send_json(response, {{"id", id}, {"object", "response"}, {"deleted", true}});
}

}  // namespace

void add_responses_routes(RouteTable& routes, ServerContext& context) {
  routes.post("/v1/responses",
              [&context](const httplib::Request& request, httplib::Response& response) {
                handle_create(context, request, response);
              });
  routes.get(kIdPattern, [&context](const httplib::Request& request, httplib::Response& response) {
    handle_get(context, request, response);
  });
  routes.del(kIdPattern, [&context](const httplib::Request& request, httplib::Response& response) {
    handle_delete(context, request, response);
  });
}

}  // namespace mlaserve::server
