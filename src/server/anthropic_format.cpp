// Anthropic's reply shapes: a message with content blocks (thinking, text, tool_use) and
// stop_reason, or its stream: message_start, ping, per block content_block_start / _delta /
// _stop, message_delta (stop_reason, usage), message_stop.
#include <spdlog/spdlog.h>

#include <utility>

#include "server/anthropic.h"

namespace mlaserve::server {

namespace {

// A call's input is a JSON object. A forced call's always is (its grammar); one the model wrote
// freely may not be, and then the block holds {} (logged).
nlohmann::json tool_input(const ToolCall& call) {
  nlohmann::json input = nlohmann::json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
  if (input.is_object()) return input;
  spdlog::warn("tool call '{}' has arguments that are not a JSON object: {}", call.name,
               call.arguments);
  return nlohmann::json::object();
}

nlohmann::json text_block(std::string text) {
  return {{"type", "text"}, {"text", std::move(text)}};
}

nlohmann::json thinking_block(std::string thinking) {
  return {{"type", "thinking"}, {"thinking", std::move(thinking)}, {"signature", ""}};
}

nlohmann::json tool_use_block(const std::string& id, const std::string& name,
                              nlohmann::json input) {
  return {{"type", "tool_use"}, {"id", id}, {"name", name}, {"input", std::move(input)}};
}

// "end_turn", "max_tokens", "stop_sequence" (a stop string matched) or "tool_use" (a reply that
// called tools and stopped).
const char* stop_reason(const Finish& finish, bool called_tools) {
  if (finish.kind == FinishKind::Length) return "max_tokens";
  if (finish.kind == FinishKind::Stop && finish.matched.is_string()) return "stop_sequence";
  if (finish.kind == FinishKind::Stop && called_tools) return "tool_use";
  return "end_turn";
}

nlohmann::json stop_sequence(const Finish& finish) {
  return finish.matched.is_string() ? finish.matched : nlohmann::json(nullptr);
}

// Anthropic counts prompt tokens read from the cache apart from the rest.
nlohmann::json usage_json(const ChoiceState& choice) {
  return {{"input_tokens", choice.prompt_tokens() - choice.cached_tokens()},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", choice.cached_tokens()},
          {"output_tokens", choice.completion_tokens()}};
}

class AnthropicFormat final : public GenerationFormat {
 public:
  AnthropicFormat(std::string id, std::string model, const ChatParsing& parsing)
      : id_(std::move(id)), model_(std::move(model)), parsing_(parsing) {}

  nlohmann::json response(const GenerationBatch& batch) const override {
    const ChoiceState& choice = batch.choices().at(0);
    const ChatMessage message = parsing_.parse(choice.text());
    nlohmann::json content = nlohmann::json::array();
    if (!message.reasoning.empty()) content.push_back(thinking_block(message.reasoning));
    if (!message.content.empty() || message.tool_calls.empty()) {
      content.push_back(text_block(message.content));
    }
    for (const ToolCall& call : message.tool_calls) {
      content.push_back(tool_use_block(call.id, call.name, tool_input(call)));
    }
    nlohmann::json body = message_json(std::move(content), usage_json(choice));
    body["stop_reason"] = stop_reason(*choice.finish(), !message.tool_calls.empty());
    body["stop_sequence"] = stop_sequence(*choice.finish());
    return body;
  }

  std::vector<SseEvent> stream_start(const GenerationBatch& batch) const override {
    parser_.emplace(parsing_.parser());
    nlohmann::json usage = usage_json(batch.choices().at(0));
    usage["output_tokens"] = 0;
    return {event("message_start", {{"message", message_json(nlohmann::json::array(), usage)}}),
            event("ping", nlohmann::json::object())};
  }

  std::vector<SseEvent> stream_update(const GenerationBatch& batch, size_t,
                                      const ChoiceState::Update& update) const override {
    std::vector<SseEvent> events;
    const ChatDelta parsed = parser_->push_update(update.text, update.finish != nullptr);
    if (!parsed.reasoning.empty()) {
      open(Block::Thinking, thinking_block(""), events);
      delta({{"type", "thinking_delta"}, {"thinking", parsed.reasoning}}, events);
    }
    if (!parsed.content.empty()) {
      open(Block::Text, text_block(""), events);
      delta({{"type", "text_delta"}, {"text", parsed.content}}, events);
    }
    for (const ToolCallDelta& call : parsed.tool_calls) {
      if (!call.name.empty()) {
        open_new(Block::ToolUse, tool_use_block(call.id, call.name, nlohmann::json::object()),
                 events);
        called_tools_ = true;
      }
      if (!call.arguments.empty()) {
        delta({{"type", "input_json_delta"}, {"partial_json", call.arguments}}, events);
      }
    }
    if (update.finish) finish(*update.finish, batch.choices().at(0), events);
    return events;
  }

  std::vector<SseEvent> stream_error(const ApiError& error) const override {
    return {SseEvent("error", error.to_json(ApiDialect::Anthropic))};
  }

  std::string_view stream_terminator() const override { return ""; }

 private:
  enum class Block { None, Thinking, Text, ToolUse };

  static SseEvent event(const char* type, nlohmann::json data) {
    data["type"] = type;
    return SseEvent(type, std::move(data));
  }

  nlohmann::json message_json(nlohmann::json content, nlohmann::json usage) const {
    return {{"id", id_},
            {"type", "message"},
            {"role", "assistant"},
            {"model", model_},
            {"content", std::move(content)},
            {"stop_reason", nullptr},
            {"stop_sequence", nullptr},
            {"usage", std::move(usage)}};
  }

  // Continues the open block of `kind`, or closes the open one and starts `start`.
  void open(Block kind, nlohmann::json start, std::vector<SseEvent>& events) const {
    if (open_ != kind) open_new(kind, std::move(start), events);
  }

  void open_new(Block kind, nlohmann::json start, std::vector<SseEvent>& events) const {
    close(events);
    events.push_back(
        event("content_block_start", {{"index", blocks_}, {"content_block", std::move(start)}}));
    open_ = kind;
    ++blocks_;
  }

  void close(std::vector<SseEvent>& events) const {
    if (open_ == Block::None) return;
    events.push_back(event("content_block_stop", {{"index", blocks_ - 1}}));
    open_ = Block::None;
  }

  void delta(nlohmann::json delta, std::vector<SseEvent>& events) const {
    events.push_back(event("content_block_delta", {{"index", blocks_ - 1}, {"delta", delta}}));
  }

  // A reply with no block still has its (empty) text block, as the non-streamed one does.
  void finish(const Finish& finish, const ChoiceState& choice,
              std::vector<SseEvent>& events) const {
    if (blocks_ == 0) open(Block::Text, text_block(""), events);
    close(events);
    events.push_back(
        event("message_delta", {{"delta",
                                 {{"stop_reason", stop_reason(finish, called_tools_)},
                                  {"stop_sequence", stop_sequence(finish)}}},
                                {"usage", {{"output_tokens", choice.completion_tokens()}}}}));
    events.push_back(event("message_stop", nlohmann::json::object()));
  }

  std::string id_;
  std::string model_;
  ChatParsing parsing_;
  // A stream's state (a format serves one request, on its handler's thread).
  mutable std::optional<ChatOutputParser> parser_;
  mutable Block open_ = Block::None;
  mutable size_t blocks_ = 0;  // blocks started
  mutable bool called_tools_ = false;
};

}  // namespace

std::shared_ptr<const GenerationFormat> anthropic_format(std::string id, std::string model,
                                                         const ChatParsing& parsing) {
  return std::make_shared<AnthropicFormat>(std::move(id), std::move(model), parsing);
}

}  // namespace mlaserve::server
