// POST /v1/responses, GET and DELETE /v1/responses/{id}.
#include <algorithm>
#include <charconv>
#include <limits>
#include <utility>
#include <vector>

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
            conversation = std::move(parsed.conversation), items = std::move(parsed.input_items)](
               const nlohmann::json& finished, const nlohmann::ordered_json& reply) {
      StoredResponse stored{finished, conversation, items};
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

// OpenAI's list of a response's input items: newest first unless order=asc, `limit` (1-100,
// default 20) of them after the item `after`.
void handle_input_items(ServerContext& context, const httplib::Request& request,
                        httplib::Response& response) {
  const std::string id = request.matches[1];
  const std::optional<StoredResponse> stored = context.responses.get(id);
  if (!stored) throw not_found(id);
  const std::string order = request.has_param("order") ? request.get_param_value("order") : "desc";
  if (order != "asc" && order != "desc") {
    throw invalid_request("'order' must be 'asc' or 'desc', got '" + order + "'", "order");
  }
  int64_t limit = 20;
  if (request.has_param("limit")) {
    const std::string text = request.get_param_value("limit");
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), limit);
    if (error != std::errc() || end != text.data() + text.size() || limit < 1 || limit > 100) {
      throw invalid_request("'limit' must be an integer in [1, 100], got '" + text + "'", "limit");
    }
  }
  std::vector<nlohmann::json> items(stored->input_items.begin(), stored->input_items.end());
  if (order == "desc") std::reverse(items.begin(), items.end());
  auto first = items.begin();
  if (request.has_param("after")) {
    const std::string after = request.get_param_value("after");
    first = std::find_if(items.begin(), items.end(),
                         [&](const nlohmann::json& item) { return item["id"] == after; });
    if (first == items.end()) {
      throw invalid_request("'after' names no input item of this response", "after");
    }
    ++first;
  }
  const auto last = items.end() - first > limit ? first + limit : items.end();
  const nlohmann::json data = std::vector<nlohmann::json>(first, last);
  send_json(response, {{"object", "list"},
                       {"data", data},
                       {"first_id", data.empty() ? nlohmann::json(nullptr) : data.front()["id"]},
                       {"last_id", data.empty() ? nlohmann::json(nullptr) : data.back()["id"]},
                       {"has_more", last != items.end()}});
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
  routes.get("/v1/responses/([^/]+)/input_items",
             [&context](const httplib::Request& request, httplib::Response& response) {
               handle_input_items(context, request, response);
             });
  routes.del(kIdPattern, [&context](const httplib::Request& request, httplib::Response& response) {
    handle_delete(context, request, response);
  });
}

}  // namespace mlaserve::server
