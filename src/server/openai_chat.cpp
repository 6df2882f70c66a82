// POST /v1/chat/completions.
#include <limits>
#include <optional>
#include <utility>

#include "server/chat_output.h"
#include "server/chat_request.h"
#include "server/json_fields.h"
#include "server/openai_format.h"
#include "server/openai_handlers.h"
#include "server/prompt_input.h"
#include "server/tool_calls.h"

namespace mlaserve::server {

namespace {

// Like vLLM: without max_tokens a chat may use all the context the prompt leaves.
constexpr int64_t kDefaultMaxTokens = std::numeric_limits<int64_t>::max();

// A choice that called tools and then stopped finishes with "tool_calls", as OpenAI's do.
nlohmann::json chat_finish_reason(const Finish* finish, bool called_tools) {
  if (finish && finish->kind == FinishKind::Stop && called_tools) return "tool_calls";
  return finish_reason_json(finish);
}

nlohmann::json tool_call_json(const ToolCall& call) {
  return {{"id", call.id},
          {"type", "function"},
          {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

// The first piece of a call names it; later pieces carry only arguments.
nlohmann::json tool_call_delta_json(const ToolCallDelta& call) {
  nlohmann::json function = {{"arguments", call.arguments}};
  nlohmann::json json = {{"index", call.index}};
  if (!call.name.empty()) {
    function["name"] = call.name;
    json["id"] = call.id;
    json["type"] = "function";
  }
  json["function"] = std::move(function);
  return json;
}

nlohmann::json message_json(const ChatMessage& message, bool reasoning) {
  nlohmann::json json = {{"role", "assistant"}};
  // With calls and no text, OpenAI sends content null.
  json["content"] = message.content.empty() && !message.tool_calls.empty()
                        ? nlohmann::json(nullptr)
                        : nlohmann::json(message.content);
  if (reasoning) {
    json["reasoning_content"] =
        message.reasoning.empty() ? nlohmann::json(nullptr) : nlohmann::json(message.reasoning);
  }
  if (!message.tool_calls.empty()) {
    json["tool_calls"] = nlohmann::json::array();
    for (const ToolCall& call : message.tool_calls)
      json["tool_calls"].push_back(tool_call_json(call));
  }
  return json;
}

class ChatFormat final : public GenerationFormat {
 public:
  ChatFormat(OpenAiResponseHeader header, const GenerationOptions& options,
             const tokenizer::Tokenizer& tokenizer, ChatParsing parsing)
      : header_(std::move(header)),
        include_usage_(options.include_usage),
        logprobs_(options.logprobs),
        timings_(options.return_timings),
        tokenizer_(tokenizer),
        parsing_(parsing) {}

  nlohmann::json response(const GenerationBatch& batch) const override {
    nlohmann::json body = header_.json("chat.completion");
    nlohmann::json choices = nlohmann::json::array();
    for (size_t i = 0; i < batch.choices().size(); ++i) {
      const ChoiceState& choice = batch.choices()[i];
      const ChatMessage message = parsing_.parse(choice.text());
      choices.push_back(
          {{"index", i},
           {"message", message_json(message, parsing_.reasoning)},
           {"logprobs", logprobs_json(choice.tokens())},
           {"finish_reason", chat_finish_reason(&*choice.finish(), !message.tool_calls.empty())},
           {"matched_stop", choice.finish()->matched}});
      if (timings_) choices.back()["timings"] = batch.timings(i).json_ms();
    }
    body["choices"] = std::move(choices);
    body["usage"] = usage_json(batch);
    return body;
  }

  // The first delta of each choice carries its role, as OpenAI streams do.
  std::vector<SseEvent> stream_start(const GenerationBatch& batch) const override {
    std::vector<SseEvent> events;
    streams_.assign(batch.choices().size(), {parsing_.parser(), false});
    for (size_t i = 0; i < batch.choices().size(); ++i) {
      events.push_back(chunk({{"index", i},
                              {"delta", {{"role", "assistant"}, {"content", ""}}},
                              {"logprobs", nullptr},
                              {"finish_reason", nullptr}}));
    }
    return events;
  }

  std::vector<SseEvent> stream_update(const GenerationBatch& batch, size_t index,
                                      const ChoiceState::Update& update) const override {
    ChoiceStream& stream = streams_[index];
    const ChatDelta parsed = stream.parser.push_update(update.text, update.finish != nullptr);
    stream.called_tools = stream.called_tools || !parsed.tool_calls.empty();
    nlohmann::json choice = {
        {"index", index},
        {"delta", delta_json(parsed, update.finish != nullptr)},
        {"logprobs", logprobs_json(update.tokens)},
        {"finish_reason", chat_finish_reason(update.finish, stream.called_tools)}};
    if (timings_ && update.finish) choice["timings"] = batch.timings(index).json_ms();
    return {chunk(std::move(choice))};
  }

  std::vector<SseEvent> stream_end(const GenerationBatch& batch) const override {
    if (!include_usage_) return {};
    nlohmann::json last = header_.json("chat.completion.chunk");
    last["choices"] = nlohmann::json::array();
    last["usage"] = usage_json(batch);
    return {last};
  }

 private:
  struct ChoiceStream {
    ChatOutputParser parser;
    bool called_tools;
  };

  // An update without parsed text still says "content": "" (but the last, which only finishes).
  static nlohmann::json delta_json(const ChatDelta& parsed, bool finishing) {
    nlohmann::json delta = nlohmann::json::object();
    if (!parsed.reasoning.empty()) delta["reasoning_content"] = parsed.reasoning;
    if (!parsed.content.empty() || (parsed.empty() && !finishing))
      delta["content"] = parsed.content;
    if (!parsed.tool_calls.empty()) {
      delta["tool_calls"] = nlohmann::json::array();
      for (const ToolCallDelta& call : parsed.tool_calls) {
        delta["tool_calls"].push_back(tool_call_delta_json(call));
      }
    }
    return delta;
  }

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
  bool timings_;  // return_timings: each finished choice says where its time went
  const tokenizer::Tokenizer& tokenizer_;
  ChatParsing parsing_;
  // A stream's per-choice parsing state (a format serves one request, on its handler's thread).
  mutable std::vector<ChoiceStream> streams_;
};

}  // namespace

ChatRequest parse_chat_completions_request(const nlohmann::json& body, const OrderedBody& ordered,
                                           const tokenizer::Tokenizer& tokenizer) {
  ChatRequest chat;
  chat.options = parse_openai_options(body, Api::Chat, tokenizer.vocab_size());
  chat.template_kwargs = chat_template_kwargs(body, ordered);
  // OpenAI's reasoning_effort goes to the template (as vLLM passes it), unless the kwargs set it.
  if (const std::optional<std::string> effort = read_string(body, "reasoning_effort")) {
    if (!chat.template_kwargs.contains("reasoning_effort")) {
      chat.template_kwargs["reasoning_effort"] = *effort;
    }
  }
  chat.tools = parse_tool_request(body, ordered, tokenizer);
  chat.output_format = response_format(body, ordered);
  chat.messages = chat_messages(body);
  return chat;
}

void handle_chat_completions(ServerContext& context, const httplib::Request& request,
                             httplib::Response& response) {
  const nlohmann::json body = parse_json_object(request.body);
  check_model(body, context);
  ChatRequest chat =
      parse_chat_completions_request(body, OrderedBody(request.body), context.tokenizer);
  const OpenAiResponseHeader header{new_request_id("chatcmpl-"), unix_time_now(),
                                    context.served_model_name()};
  run_chat(context, request, response, std::move(chat), header.id, kDefaultMaxTokens,
           [&](const ChatRequest& sent, const ChatParsing& parsing) {
             return std::make_shared<ChatFormat>(header, sent.options, context.tokenizer, parsing);
           });
}

}  // namespace mlaserve::server
