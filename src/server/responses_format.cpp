// The Responses API's reply: a response object whose output holds a reasoning item, a message
// item (one output_text part) and function_call items, in the order the model wrote them; or
// the stream of named events that builds the same object: response.created,
// response.in_progress, per item output_item.added / its deltas / its .done events /
// output_item.done, and response.completed (response.incomplete when max_output_tokens cut the
// reply). Every event carries a sequence_number.
#include <utility>

#include "server/openai_format.h"
#include "server/responses.h"

namespace mlaserve::server {

namespace {

enum class ItemKind { None, Reasoning, Message, FunctionCall };

// One output item as it is streamed: its id and what it holds so far.
struct OutputItem {
  ItemKind kind;
  std::string id;
  std::string text;  // reasoning, message text or call arguments
  std::string call_id, name;

  nlohmann::json json(const char* status) const {
    switch (kind) {
      case ItemKind::Reasoning:
        return {{"id", id},
                {"type", "reasoning"},
                {"summary", nlohmann::json::array()},
                {"content", {{{"type", "reasoning_text"}, {"text", text}}}}};
      case ItemKind::Message:
        return {{"id", id},
                {"type", "message"},
                {"role", "assistant"},
                {"status", status},
                {"content", {text_part()}}};
      case ItemKind::FunctionCall:
      case ItemKind::None:
        break;
    }
    return {{"id", id},     {"type", "function_call"}, {"call_id", call_id},
            {"name", name}, {"arguments", text},       {"status", status}};
  }

  nlohmann::json text_part() const {
    return {{"type", "output_text"},
            {"text", text},
            {"annotations", nlohmann::json::array()},
            {"logprobs", nlohmann::json::array()}};
  }
};

// The items of a whole reply, as a stream would have built them.
std::vector<OutputItem> output_items(const ChatMessage& message) {
  std::vector<OutputItem> items;
  if (!message.reasoning.empty()) {
    items.push_back({ItemKind::Reasoning, new_request_id("rs_"), message.reasoning, "", ""});
  }
  if (!message.content.empty() || message.tool_calls.empty()) {
    items.push_back({ItemKind::Message, new_request_id("msg_"), message.content, "", ""});
  }
  for (const ToolCall& call : message.tool_calls) {
    items.push_back(
        {ItemKind::FunctionCall, new_request_id("fc_"), call.arguments, call.id, call.name});
  }
  return items;
}

// The chat message the reply adds to the stored conversation.
nlohmann::ordered_json reply_message(const std::vector<OutputItem>& items) {
  nlohmann::ordered_json message = {{"role", "assistant"}, {"content", ""}};
  for (const OutputItem& item : items) {
    if (item.kind == ItemKind::Reasoning) message["reasoning_content"] = item.text;
    if (item.kind == ItemKind::Message) message["content"] = item.text;
    if (item.kind == ItemKind::FunctionCall) {
      message["tool_calls"].push_back(
          {{"id", item.call_id},
           {"type", "function"},
           {"function", {{"name", item.name}, {"arguments", item.text}}}});
    }
  }
  return message;
}

nlohmann::json usage_json(const ChoiceState& choice) {
  return {{"input_tokens", choice.prompt_tokens()},
          {"input_tokens_details", {{"cached_tokens", choice.cached_tokens()}}},
          {"output_tokens", choice.completion_tokens()},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", choice.prompt_tokens() + choice.completion_tokens()}};
}

class ResponsesFormat final : public GenerationFormat {
 public:
  ResponsesFormat(ResponseHeader header, const ChatParsing& parsing, ResponseDone done)
      : header_(std::move(header)), parsing_(parsing), done_(std::move(done)) {}

  nlohmann::json response(const GenerationBatch& batch) const override {
    const ChoiceState& choice = batch.choices().at(0);
    const ChatMessage message = parsing_.parse(choice.text());
    return finished(choice, output_items(message));
  }

  std::vector<SseEvent> stream_start(const GenerationBatch&) const override {
    parser_.emplace(parsing_.parser());
    const nlohmann::json response = response_json("in_progress", nlohmann::json::array());
    return {event("response.created", {{"response", response}}),
            event("response.in_progress", {{"response", response}})};
  }

  std::vector<SseEvent> stream_update(const GenerationBatch& batch, size_t,
                                      const ChoiceState::Update& update) const override {
    std::vector<SseEvent> events;
    const ChatDelta parsed = parser_->push_update(update.text, update.finish != nullptr);
    if (!parsed.reasoning.empty()) {
      open(ItemKind::Reasoning, events);
      append(parsed.reasoning, "response.reasoning_text.delta", events);
    }
    if (!parsed.content.empty()) {
      open(ItemKind::Message, events);
      append(parsed.content, "response.output_text.delta", events);
    }
    for (const ToolCallDelta& call : parsed.tool_calls) {
      if (!call.name.empty()) {
        close(events);
        items_.push_back({ItemKind::FunctionCall, new_request_id("fc_"), "", call.id, call.name});
        added(events);
      }
      if (!call.arguments.empty()) {
        append(call.arguments, "response.function_call_arguments.delta", events);
      }
    }
    if (update.finish) {
      // A reply with no item still has its (empty) message, as the non-streamed one does.
      if (items_.empty()) open(ItemKind::Message, events);
      close(events, update.finish->kind == FinishKind::Length ? "incomplete" : "completed");
      const nlohmann::json response = finished(batch.choices().at(0), items_);
      events.push_back(
          event(response["status"] == "incomplete" ? "response.incomplete" : "response.completed",
                {{"response", response}}));
    }
    return events;
  }

  std::vector<SseEvent> stream_error(const ApiError& error) const override {
    nlohmann::json failed = response_json("failed", nlohmann::json::array());
    failed["error"] = {{"code", "server_error"}, {"message", error.what()}};
    nlohmann::json body = error.to_json()["error"];
    return {event("error", std::move(body)), event("response.failed", {{"response", failed}})};
  }

  std::string_view stream_terminator() const override { return ""; }

 private:
  SseEvent event(const char* type, nlohmann::json data) const {
    data["type"] = type;
    data["sequence_number"] = sequence_++;
    return SseEvent(type, std::move(data));
  }

  nlohmann::json response_json(const char* status, nlohmann::json output) const {
    nlohmann::json response = header_.echo;
    response.update({{"id", header_.id},
                     {"object", "response"},
                     {"created_at", header_.created_at},
                     {"model", header_.model},
                     {"status", status},
                     {"error", nullptr},
                     {"incomplete_details", nullptr},
                     {"output", std::move(output)},
                     {"usage", nullptr}});
    return response;
  }

  // The response object of a finished reply; stored when the request asked for it.
  nlohmann::json finished(const ChoiceState& choice, const std::vector<OutputItem>& items) const {
    const bool cut = choice.finish()->kind == FinishKind::Length;
    nlohmann::json output = nlohmann::json::array();
    for (const OutputItem& item : items)
      output.push_back(item.json(cut ? "incomplete" : "completed"));
    nlohmann::json response = response_json(cut ? "incomplete" : "completed", std::move(output));
    if (cut) response["incomplete_details"] = {{"reason", "max_output_tokens"}};
    response["usage"] = usage_json(choice);
    if (done_) done_(response, reply_message(items));
    return response;
  }

  // Continues the open item of `kind`, or closes the open one and adds a new one.
  void open(ItemKind kind, std::vector<SseEvent>& events) const {
    if (!items_.empty() && open_ && items_.back().kind == kind) return;
    close(events);
    const char* prefix = kind == ItemKind::Reasoning ? "rs_" : "msg_";
    items_.push_back({kind, new_request_id(prefix), "", "", ""});
    added(events);
  }

  void added(std::vector<SseEvent>& events) const {
    open_ = true;
    const OutputItem& item = items_.back();
    events.push_back(event("response.output_item.added", {{"output_index", items_.size() - 1},
                                                          {"item", item.json("in_progress")}}));
    if (item.kind == ItemKind::Message) {
      nlohmann::json part = item.text_part();
      events.push_back(event("response.content_part.added", part_fields(std::move(part))));
    }
  }

  void append(const std::string& text, const char* type, std::vector<SseEvent>& events) const {
    OutputItem& item = items_.back();
    item.text += text;
    nlohmann::json data = {
        {"item_id", item.id}, {"output_index", items_.size() - 1}, {"delta", text}};
    if (item.kind != ItemKind::FunctionCall) data["content_index"] = 0;
    if (item.kind == ItemKind::Message) data["logprobs"] = nlohmann::json::array();
    events.push_back(event(type, std::move(data)));
  }

  void close(std::vector<SseEvent>& events, const char* status = "completed") const {
    if (!open_) return;
    open_ = false;
    const OutputItem& item = items_.back();
    const size_t index = items_.size() - 1;
    nlohmann::json done = {{"item_id", item.id}, {"output_index", index}};
    if (item.kind == ItemKind::Reasoning) {
      done.update({{"content_index", 0}, {"text", item.text}});
      events.push_back(event("response.reasoning_text.done", std::move(done)));
    } else if (item.kind == ItemKind::Message) {
      done.update(
          {{"content_index", 0}, {"text", item.text}, {"logprobs", nlohmann::json::array()}});
      events.push_back(event("response.output_text.done", std::move(done)));
      events.push_back(event("response.content_part.done", part_fields(item.text_part())));
    } else {
      done.update({{"name", item.name}, {"arguments", item.text}});
      events.push_back(event("response.function_call_arguments.done", std::move(done)));
    }
    events.push_back(
        event("response.output_item.done", {{"output_index", index}, {"item", item.json(status)}}));
  }

  nlohmann::json part_fields(nlohmann::json part) const {
    return {{"item_id", items_.back().id},
            {"output_index", items_.size() - 1},
            {"content_index", 0},
            {"part", std::move(part)}};
  }

  ResponseHeader header_;
  ChatParsing parsing_;
  ResponseDone done_;
  // A stream's state (a format serves one request, on its handler's thread).
  mutable std::optional<ChatOutputParser> parser_;
  mutable std::vector<OutputItem> items_;
  mutable bool open_ = false;  // the last item still takes deltas
  mutable int64_t sequence_ = 0;
};

}  // namespace

std::shared_ptr<const GenerationFormat> responses_format(ResponseHeader header,
                                                         const ChatParsing& parsing,
                                                         ResponseDone done) {
  return std::make_shared<ResponsesFormat>(std::move(header), parsing, std::move(done));
}

}  // namespace mlaserve::server
