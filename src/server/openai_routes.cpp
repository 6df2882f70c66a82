#include "server/openai_routes.h"

#include <chrono>

#include "server/api_error.h"
#include "server/choice_plans.h"
#include "server/generation_response.h"
#include "server/http_response.h"
#include "server/json_fields.h"
#include "server/openai_format.h"
#include "server/openai_handlers.h"
#include "server/request_clock.h"

namespace mlaserve::server {

namespace {

void handle_models(const ServerContext& context, httplib::Response& response) {
  const auto created =
      std::chrono::duration_cast<std::chrono::seconds>(context.started.time_since_epoch()).count();
  nlohmann::json model = {{"id", context.served_model_name()},
                          {"object", "model"},
                          {"created", created},
                          {"owned_by", "mlaserve"},
                          {"root", context.options.model_path},
                          {"max_model_len", context.engine.context_length()}};
  send_json(response, {{"object", "list"}, {"data", {model}}});
}

}  // namespace

void check_model(const nlohmann::json& body, const ServerContext& context) {
  const std::optional<std::string> model = read_string(body, "model");
  if (!model || context.is_served_model(*model)) return;
  throw ApiError(404,
                 "The model '" + *model + "' does not exist; this server serves '" +
                     context.served_model_name() + "'",
                 "invalid_request_error", "model", "model_not_found");
}

nlohmann::json OpenAiResponseHeader::json(const char* object) const {
  return {{"id", id}, {"object", object}, {"created", created}, {"model", model}};
}

void run_openai_generation(ServerContext& context, const httplib::Request& request,
                           httplib::Response& response, const std::vector<Prompt>& prompts,
                           const GenerationOptions& options, int64_t default_max_tokens,
                           const std::string& id, std::shared_ptr<const GenerationFormat> format,
                           const std::string& budget_param) {
  const TokenBudget budget{default_max_tokens, context.engine.context_length(), budget_param};
  std::vector<ChoicePlan> plans =
      plan_choices(prompts, options, std::vector<std::string>(prompts.size(), id), budget);
  auto batch = std::make_unique<GenerationBatch>(context, request_arrival());
  batch->submit(std::move(plans));
  respond_with_generation(context, request, response, std::move(batch), std::move(format),
                          options.stream);
}

void add_openai_routes(RouteTable& routes, ServerContext& context) {
  routes.get("/v1/models", [&context](const httplib::Request&, httplib::Response& response) {
    handle_models(context, response);
  });
  routes.post("/v1/completions",
              [&context](const httplib::Request& request, httplib::Response& response) {
                handle_completions(context, request, response);
              });
  routes.post("/v1/chat/completions",
              [&context](const httplib::Request& request, httplib::Response& response) {
                handle_chat_completions(context, request, response);
              });
}

}  // namespace mlaserve::server
