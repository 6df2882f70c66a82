// POST /v1/chat/completions.
#include <limits>
#include <utility>

#include "server/json_fields.h"
#include "server/openai_format.h"
#include "server/openai_handlers.h"

namespace mlaserve::server {

namespace {

// Like vLLM: without max_tokens a chat may use all the context the prompt leaves.
constexpr int64_t kDefaultMaxTokens = std::numeric_limits<int64_t>::max();

class ChatFormat final : public GenerationFormat {
 public:
  ChatFormat(OpenAiResponseHeader header, const GenerationOptions& options,
             const tokenizer::Tokenizer& tokenizer)
      : header_(std::move(header)),
        include_usage_(options.include_usage),
        logprobs_(options.logprobs),
        tokenizer_(tokenizer) {}

  nlohmann::json response(const GenerationBatch& batch) const override {
    nlohmann::json body = header_.json("chat.completion");
    nlohmann::json choices = nlohmann::json::array();
    for (size_t i = 0; i < batch.choices().size(); ++i) {
      const ChoiceState& choice = batch.choices()[i];
      choices.push_back({{"index", i},
                         {"message", {{"role", "assistant"}, {"content", choice.text()}}},
                         {"logprobs", logprobs_json(choice.tokens())},
                         {"finish_reason", finish_reason_json(&*choice.finish())},
                         {"matched_stop", choice.finish()->matched}});
    }
    body["choices"] = std::move(choices);
    body["usage"] = usage_json(batch);
    return body;
  }

  // The first delta of each choice carries its role, as OpenAI streams do.
  std::vector<nlohmann::json> stream_start(const GenerationBatch& batch) const override {
    std::vector<nlohmann::json> events;
    for (size_t i = 0; i < batch.choices().size(); ++i) {
      events.push_back(chunk({{"index", i},
                              {"delta", {{"role", "assistant"}, {"content", ""}}},
                              {"logprobs", nullptr},
                              {"finish_reason", nullptr}}));
    }
    return events;
  }

  nlohmann::json stream_update(const GenerationBatch&, size_t index,
                               const ChoiceState::Update& update) const override {
    nlohmann::json delta = nlohmann::json::object();
    if (!update.text.empty() || !update.finish) delta["content"] = std::string(update.text);
    return chunk({{"index", index},
                  {"delta", std::move(delta)},
                  {"logprobs", logprobs_json(update.tokens)},
                  {"finish_reason", finish_reason_json(update.finish)}});
  }

  std::vector<nlohmann::json> stream_end(const GenerationBatch& batch) const override {
    if (!include_usage_) return {};
    nlohmann::json last = header_.json("chat.completion.chunk");
    last["choices"] = nlohmann::json::array();
    last["usage"] = usage_json(batch);
    return {last};
  }

 private:
  nlohmann::json logprobs_json(std::span<const GeneratedToken> tokens) const {
    return logprobs_ ? chat_logprobs_json(tokenizer_, tokens) : nlohmann::json(nullptr);
  }

  nlohmann::json chunk(nlohmann::json choice) const {
    nlohmann::json event = header_.json("chat.completion.chunk");
    event["choices"] = nlohmann::json::array({std::move(choice)});
    if (include_usage_) event["usage"] = nullptr;
    return event;
  }

  OpenAiResponseHeader header_;
  bool include_usage_;
  bool logprobs_;
  const tokenizer::Tokenizer& tokenizer_;
};

}  // namespace

void handle_chat_completions(ServerContext& context, const httplib::Request& request,
                             httplib::Response& response) {
  const nlohmann::json body = parse_json_object(request.body);
  check_model(body, context);
  const GenerationOptions options =
      parse_openai_options(body, Api::Chat, context.tokenizer.vocab_size());
  const std::vector<Prompt> prompts = {chat_prompt(body, context.tokenizer)};
  const OpenAiResponseHeader header{new_request_id("chatcmpl-"), unix_time_now(),
                                    context.served_model_name()};
  run_openai_generation(context, request, response, prompts, options, kDefaultMaxTokens, header.id,
                        std::make_shared<ChatFormat>(header, options, context.tokenizer));
}

}  // namespace mlaserve::server
