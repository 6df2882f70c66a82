// POST /v1/completions.
#include <utility>

#include "server/json_fields.h"
#include "server/openai_format.h"
#include "server/openai_handlers.h"

namespace mlaserve::server {

namespace {

constexpr int64_t kDefaultMaxTokens = 16;  // OpenAI's default for completions

class CompletionFormat final : public GenerationFormat {
 public:
  CompletionFormat(OpenAiResponseHeader header, const GenerationOptions& options,
                   std::vector<std::string> echoed_prompts, const tokenizer::Tokenizer& tokenizer)
      : header_(std::move(header)),
        include_usage_(options.include_usage),
        logprobs_(options.logprobs),
        alternatives_(options.top_logprobs > 0),
        timings_(options.return_timings),
        echoed_prompts_(std::move(echoed_prompts)),
        tokenizer_(tokenizer) {}

  nlohmann::json response(const GenerationBatch& batch) const override {
    nlohmann::json body = header_.json("text_completion");
    nlohmann::json choices = nlohmann::json::array();
    for (size_t i = 0; i < batch.choices().size(); ++i) {
      const ChoiceState& choice = batch.choices()[i];
      nlohmann::json item =
          choice_json(i, echo_of(choice) + choice.text(), choice.tokens(), &*choice.finish());
      item["matched_stop"] = choice.finish()->matched;
      if (timings_) item["timings"] = batch.timings(i).json_ms();
      choices.push_back(std::move(item));
    }
    body["choices"] = std::move(choices);
    body["usage"] = usage_json(batch);
    return body;
  }

  std::vector<SseEvent> stream_start(const GenerationBatch& batch) const override {
    std::vector<SseEvent> events;
    if (echoed_prompts_.empty()) return events;
    for (size_t i = 0; i < batch.choices().size(); ++i) {
      events.push_back(chunk(choice_json(i, echo_of(batch.choices()[i]), {}, nullptr)));
    }
    return events;
  }

  std::vector<SseEvent> stream_update(const GenerationBatch& batch, size_t index,
                                      const ChoiceState::Update& update) const override {
    nlohmann::json item =
        choice_json(index, std::string(update.text), update.tokens, update.finish);
    if (timings_ && update.finish) item["timings"] = batch.timings(index).json_ms();
    return {chunk(std::move(item))};
  }

  std::vector<SseEvent> stream_end(const GenerationBatch& batch) const override {
    if (!include_usage_) return {};
    nlohmann::json last = header_.json("text_completion");
    last["choices"] = nlohmann::json::array();
    last["usage"] = usage_json(batch);
    return {last};
  }

 private:
  nlohmann::json choice_json(size_t index, std::string text, std::span<const GeneratedToken> tokens,
                             const Finish* finish) const {
    return {{"index", index},
            {"text", std::move(text)},
            {"logprobs", logprobs_ ? completion_logprobs_json(tokenizer_, tokens, alternatives_)
                                   : nlohmann::json(nullptr)},
            {"finish_reason", finish_reason_json(finish)}};
  }

  nlohmann::json chunk(nlohmann::json choice) const {
    nlohmann::json event = header_.json("text_completion");
    event["choices"] = nlohmann::json::array({std::move(choice)});
    if (include_usage_) event["usage"] = nullptr;
    return event;
  }

  std::string echo_of(const ChoiceState& choice) const {
    return echoed_prompts_.empty() ? std::string() : echoed_prompts_[choice.prompt_index()];
  }

  OpenAiResponseHeader header_;
  bool include_usage_;
  bool logprobs_;
  bool alternatives_;
  bool timings_;  // return_timings: each finished choice says where its time went
  std::vector<std::string> echoed_prompts_;  // per prompt; empty unless "echo"
  const tokenizer::Tokenizer& tokenizer_;
};

std::vector<std::string> echoed_prompts(const std::vector<Prompt>& prompts,
                                        const tokenizer::Tokenizer& tokenizer) {
  std::vector<std::string> texts;
  for (const Prompt& prompt : prompts) {
    texts.push_back(prompt.text ? *prompt.text
                                : tokenizer.decode(prompt.ids, /*skip_special_tokens=*/true));
  }
  return texts;
}

}  // namespace

void handle_completions(ServerContext& context, const httplib::Request& request,
                        httplib::Response& response) {
  const nlohmann::json body = parse_json_object(request.body);
  check_model(body, context);
  GenerationOptions options =
      parse_openai_options(body, Api::Completions, context.tokenizer.vocab_size());
  if (grammar::GrammarPtr grammar = output_format_grammar(
          response_format(body, OrderedBody(request.body)), context.grammars, "response_format")) {
    options.make_constraint = context.grammars.constraints(std::move(grammar));
  }
  const std::vector<Prompt> prompts = completion_prompts(body, context.tokenizer);
  const OpenAiResponseHeader header{new_request_id("cmpl-"), unix_time_now(),
                                    context.served_model_name()};
  auto format = std::make_shared<CompletionFormat>(
      header, options,
      options.echo ? echoed_prompts(prompts, context.tokenizer) : std::vector<std::string>(),
      context.tokenizer);
  run_openai_generation(context, request, response, prompts, options, kDefaultMaxTokens, header.id,
                        std::move(format));
}

}  // namespace mlaserve::server
