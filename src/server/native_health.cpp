// GET /health_generate: proves the engine can still generate by running one greedy token.
#include <chrono>

#include "server/api_error.h"
#include "server/generation_batch.h"
#include "server/generation_response.h"
#include "server/native_handlers.h"
#include "server/openai_format.h"
#include "server/request_clock.h"

namespace mlaserve::server {

namespace {

constexpr std::chrono::seconds kHealthGenerateTimeout{20};

ChoicePlan one_token_plan(const ServerContext& context) {
  ChoicePlan plan;
  plan.request.prompt = {context.tokenizer.bos_id().value_or(0)};
  plan.request.max_new_tokens = 1;
  plan.request.sampling.temperature = 0.0f;
  plan.request.ignore_eos = true;
  plan.prompt_index = 0;
  plan.rid = new_request_id("health-");
  return plan;
}

}  // namespace

void handle_health_generate(ServerContext& context, const httplib::Request& request,
                            httplib::Response& response) {
  GenerationBatch batch(context, request_arrival());
  std::vector<ChoicePlan> plans;
  plans.push_back(one_token_plan(context));
  batch.submit(std::move(plans));
  const auto deadline = std::chrono::steady_clock::now() + kHealthGenerateTimeout;
  const auto done = [&] {
    return batch.all_finished() || std::chrono::steady_clock::now() >= deadline;
  };
  if (!handle_wait_result(batch.wait_until(done, ClientConnection::of(request)), response)) return;
  if (!batch.all_finished()) {
    throw ApiError(503, "The engine generated no token within 20 s", "server_error");
  }
  if (const ChoiceState* failed = batch.first_error()) {
    throw ApiError(503, "The engine failed a one-token generation: " + failed->finish()->message,
                   "server_error");
  }
  response.set_content("OK", "text/plain");
}

}  // namespace mlaserve::server
