// POST /generate: SGLang's native generation API.
#include <utility>

#include "server/api_error.h"
#include "server/choice_plans.h"
#include "server/generation_response.h"
#include "server/json_fields.h"
#include "server/native_handlers.h"
#include "server/openai_format.h"
#include "server/request_clock.h"
#include "server/token_text.h"

namespace mlaserve::server {

namespace {

constexpr int64_t kDefaultMaxNewTokens = 128;  // SGLang's default

nlohmann::json finish_json(const Finish* finish, int64_t max_new_tokens) {
  if (!finish) return nullptr;
  nlohmann::json reason = {{"type", finish_kind_name(finish->kind)}};
  switch (finish->kind) {
    case FinishKind::Stop:
      reason["matched"] = finish->matched;
      break;
    case FinishKind::Length:
      reason["length"] = max_new_tokens;
      break;
    case FinishKind::Abort:
    case FinishKind::Error:
      reason["message"] = finish->message;
      break;
  }
  return reason;
}

class NativeFormat final : public GenerationFormat {
 public:
  NativeFormat(std::vector<std::string> rids, bool list_response, const GenerationOptions& options,
               const tokenizer::Tokenizer& tokenizer)
      : rids_(std::move(rids)),
        list_response_(list_response),
        logprobs_(options.logprobs),
        top_logprobs_(options.top_logprobs > 0),
        text_in_logprobs_(options.return_text_in_logprobs),
        tokenizer_(tokenizer) {}

  nlohmann::json response(const GenerationBatch& batch) const override {
    if (!list_response_) return item(batch, 0);
    nlohmann::json items = nlohmann::json::array();
    for (size_t i = 0; i < batch.choices().size(); ++i) items.push_back(item(batch, i));
    return items;
  }

  // SGLang streams carry the cumulative text and ids so far.
  std::vector<SseEvent> stream_update(const GenerationBatch& batch, size_t index,
                                      const ChoiceState::Update&) const override {
    nlohmann::json event = item(batch, index);
    if (list_response_) event["index"] = index;
    return {std::move(event)};
  }

 private:
  nlohmann::json item(const GenerationBatch& batch, size_t index) const {
    const ChoiceState& choice = batch.choices()[index];
    nlohmann::json meta = {
        {"id", rids_[choice.prompt_index()]},
        {"prompt_tokens", choice.prompt_tokens()},
        {"completion_tokens", choice.completion_tokens()},
        {"cached_tokens", choice.cached_tokens()},
        {"spec_verify_ct", choice.spec_verify_ct()},
        {"finish_reason",
         finish_json(choice.finish() ? &*choice.finish() : nullptr, choice.max_new_tokens())},
        {"e2e_latency", seconds_since_request_arrival()},
        {"timings", batch.timings(index).json_ms()},
    };
    if (logprobs_) add_logprobs(choice, meta);
    return {{"text", choice.text()}, {"output_ids", choice.output_ids()}, {"meta_info", meta}};
  }

  // SGLang's shapes: [logprob, token id, token text or null] per token.
  nlohmann::json logprob_entry(float logprob, int32_t id) const {
    return {logprob, id,
            text_in_logprobs_ ? nlohmann::json(token_display_text(tokenizer_, id)) : nullptr};
  }

  void add_logprobs(const ChoiceState& choice, nlohmann::json& meta) const {
    nlohmann::json chosen = nlohmann::json::array();
    nlohmann::json alternatives = nlohmann::json::array();
    for (const GeneratedToken& token : choice.tokens()) {
      chosen.push_back(logprob_entry(token.logprob, token.id));
      nlohmann::json top = nlohmann::json::array();
      for (const auto& alternative : token.top) {
        top.push_back(logprob_entry(alternative.logprob, alternative.id));
      }
      alternatives.push_back(std::move(top));
    }
    meta["output_token_logprobs"] = std::move(chosen);
    if (top_logprobs_) meta["output_top_logprobs"] = std::move(alternatives);
  }

  std::vector<std::string> rids_;  // per prompt
  bool list_response_;
  bool logprobs_;
  bool top_logprobs_;
  bool text_in_logprobs_;
  const tokenizer::Tokenizer& tokenizer_;
};

// "rid": a string for one prompt or a list with one per prompt; generated when absent.
std::vector<std::string> request_ids(const nlohmann::json& body, size_t prompts) {
  std::vector<std::string> rids = read_string_or_list(body, "rid");
  if (rids.empty()) {
    for (size_t i = 0; i < prompts; ++i) rids.push_back(new_request_id(""));
  }
  if (rids.size() != prompts) {
    throw invalid_request("'rid' must give one id per prompt", "rid");
  }
  return rids;
}

}  // namespace

void handle_generate(ServerContext& context, const httplib::Request& request,
                     httplib::Response& response) {
  const nlohmann::json body = parse_json_object(request.body);
  GenerationOptions options = parse_native_options(body, context.tokenizer.vocab_size());
  if (const nlohmann::json* params = field(body, "sampling_params")) {
    if (grammar::GrammarPtr grammar = native_grammar(*params, context.grammars)) {
      options.make_constraint = context.grammars.constraints(std::move(grammar));
    }
  }
  const NativePrompts prompts = native_prompts(body, context.tokenizer);
  const std::vector<std::string> rids = request_ids(body, prompts.prompts.size());
  const TokenBudget budget{kDefaultMaxNewTokens, context.engine.context_length(), "max_new_tokens"};
  std::vector<ChoicePlan> plans = plan_choices(prompts.prompts, options, rids, budget);
  auto batch = std::make_unique<GenerationBatch>(context, request_arrival());
  batch->submit(std::move(plans));
  auto format = std::make_shared<NativeFormat>(rids, prompts.batch || options.n > 1, options,
                                               context.tokenizer);
  respond_with_generation(context, request, response, std::move(batch), std::move(format),
                          options.stream);
}

}  // namespace mlaserve::server
