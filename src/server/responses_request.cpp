// Parsing OpenAI's /v1/responses body into a ChatRequest (see responses.h for the mapping).
#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "server/api_error.h"
#include "server/generation_options.h"
#include "server/json_fields.h"
#include "server/openai_format.h"
#include "server/responses.h"

namespace mlaserve::server {

namespace {

// A string, or a list of text parts of the given types joined. Images and files need a model
// that reads them.
std::string text_of(const nlohmann::json& content, const std::string& path,
                    const std::set<std::string>& part_types) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    throw invalid_request(fmt::format("'{}' must be a string or a list of content parts", path),
                          path);
  }
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const FieldsAt part(content[i], item_path(path, i));
    const std::string type = part.required_string("type");
    if (!part_types.contains(type)) {
      throw invalid_request(
          fmt::format("'{}' has type '{}'; this server takes text parts ({}) only", part.path(),
                      type, fmt::join(part_types, ", ")),
          part.path_of("type"));
    }
    text += type == "refusal" ? part.required_string("refusal") : part.required_string("text");
  }
  return text;
}

class InputConversion {
 public:
  explicit InputConversion(nlohmann::ordered_json& messages) : messages_(messages) {
    for (const auto& message : messages_) {
      if (!message.contains("tool_calls")) continue;
      for (const auto& call : message["tool_calls"])
        call_ids_.insert(call["id"].get<std::string>());
    }
  }

  void add(const nlohmann::json& value, const std::string& path) {
    const FieldsAt item(value, path);
    const std::string type = item.string("type").value_or("message");
    if (type == "message") {
      add_message(item);
    } else if (type == "function_call") {
      add_function_call(item);
    } else if (type == "function_call_output") {
      add_function_call_output(item);
    } else if (type == "reasoning") {
      add_reasoning(item);
    } else {
      throw invalid_request(
          fmt::format("'{}' has type '{}'; input items may be 'message', 'function_call', "
                      "'function_call_output' and 'reasoning'",
                      item.path(), type),
          item.path_of("type"));
    }
  }

 private:
  void add_message(const FieldsAt& item) {
    std::string role = item.required_string("role");
    const nlohmann::json* content = item.get("content");
    if (!content) {
      throw invalid_request(fmt::format("'{}' is required", item.path_of("content")),
                            item.path_of("content"));
    }
    if (role == "assistant") {
      std::string text = text_of(*content, item.path_of("content"), {"output_text", "refusal"});
      assistant()["content"] = assistant()["content"].get<std::string>() + text;
      return;
    }
    if (role != "user" && role != "system" && role != "developer") {
      throw invalid_request(
          fmt::format("'{}' must be 'user', 'assistant', 'system' or 'developer', got '{}'",
                      item.path_of("role"), role),
          item.path_of("role"));
    }
    const std::string text = text_of(*content, item.path_of("content"), {"input_text"});
    messages_.push_back({{"role", role == "user" ? "user" : "system"}, {"content", text}});
  }

  void add_function_call(const FieldsAt& item) {
    const std::string call_id = item.required_string("call_id");
    const std::string name = item.required_string("name");
    const std::string arguments = item.required_string("arguments");
    item.string("id");
    call_ids_.insert(call_id);
    assistant()["tool_calls"].push_back({{"id", call_id},
                                         {"type", "function"},
                                         {"function", {{"name", name}, {"arguments", arguments}}}});
  }

  void add_function_call_output(const FieldsAt& item) {
    const std::string call_id = item.required_string("call_id");
    if (!call_ids_.contains(call_id)) {
      throw invalid_request(fmt::format("'{}' is '{}', which no earlier function_call has",
                                        item.path_of("call_id"), call_id),
                            item.path_of("call_id"));
    }
    const nlohmann::json* output = item.get("output");
    if (!output) {
      throw invalid_request(fmt::format("'{}' is required", item.path_of("output")),
                            item.path_of("output"));
    }
    messages_.push_back({{"role", "tool"},
                         {"tool_call_id", call_id},
                         {"content", text_of(*output, item.path_of("output"), {"input_text"})}});
  }

  // Its reasoning text (content, else summary) goes with the assistant message that follows.
  void add_reasoning(const FieldsAt& item) {
    std::string text;
    for (const char* key : {"content", "summary"}) {
      const nlohmann::json* parts = item.list(key);
      if (!parts || !text.empty()) continue;
      text = text_of(*parts, item.path_of(key), {"reasoning_text", "summary_text"});
    }
    item.string("encrypted_content");
    pending_reasoning_ += text;
  }

  // The assistant message items join: the last message, or a new one.
  nlohmann::ordered_json& assistant() {
    if (messages_.empty() || messages_.back()["role"] != "assistant") {
      messages_.push_back({{"role", "assistant"}, {"content", ""}});
    }
    nlohmann::ordered_json& message = messages_.back();
    if (!pending_reasoning_.empty()) {
      message["reasoning_content"] = std::move(pending_reasoning_);
      pending_reasoning_.clear();
    }
    return message;
  }

  nlohmann::ordered_json& messages_;
  std::set<std::string> call_ids_;
  std::string pending_reasoning_;
};

// Adds the function tools of `tools` (at JSON pointer `pointer` of the body) to `request`; a
// "namespace" tool (a named group of function tools, as Codex CLI sends) adds its functions.
void add_function_tools(const nlohmann::json& tools, const std::string& path,
                        const std::string& pointer, const OrderedBody& ordered,
                        ToolRequest& request) {
  for (size_t i = 0; i < tools.size(); ++i) {
    const FieldsAt tool(tools[i], item_path(path, i));
    const std::string type = tool.required_string("type");
    if (type == "namespace") {
      add_function_tools(tool.required_list("tools"), tool.path_of("tools"),
                         fmt::format("{}/{}/tools", pointer, i), ordered, request);
      continue;
    }
    if (type != "function") {
      throw invalid_request(fmt::format("'{}' is a '{}' tool; this server runs no hosted tools, "
                                        "give function tools",
                                        tool.path(), type),
                            tool.path_of("type"));
    }
    ToolFunction function{tool.required_string("name"), nlohmann::ordered_json{{"type", "object"}}};
    if (tool.object("parameters")) {
      function.parameters = ordered.at(fmt::format("{}/{}/parameters", pointer, i));
    }
    tool.boolean("strict");
    request.tools.push_back(chat_tool_json(function, tool.string("description")));
    request.functions.push_back(std::move(function));
  }
}

ToolRequest parse_tools(const nlohmann::json& tools, const OrderedBody& ordered,
                        const tokenizer::Tokenizer& tokenizer) {
  ToolRequest request;
  request.syntax = required_tool_syntax(tokenizer, "tools");
  request.tools = nlohmann::ordered_json::array();
  add_function_tools(tools, "tools", "/tools", ordered, request);
  request.choice = request.functions.empty() ? ToolChoice::None : ToolChoice::Auto;
  return request;
}

// "tool_choice": "none" | "auto" | "required" | {"type": "function", "name"}.
void parse_tool_choice(const nlohmann::json& choice, ToolRequest& tools) {
  if (choice.is_string()) {
    const std::string mode = choice.get<std::string>();
    if (mode == "none") {
      tools.choice = ToolChoice::None;
    } else if (mode == "auto") {
      tools.choice = tools.functions.empty() ? ToolChoice::None : ToolChoice::Auto;
    } else if (mode == "required") {
      if (tools.functions.empty()) {
        throw invalid_request("'tool_choice' 'required' needs at least one tool", "tool_choice");
      }
      tools.choice = ToolChoice::Required;
    } else {
      throw invalid_request(
          fmt::format("'tool_choice' must be 'none', 'auto', 'required' or a function, got '{}'",
                      mode),
          "tool_choice");
    }
    return;
  }
  const FieldsAt object(choice, "tool_choice");
  const std::string type = object.required_string("type");
  if (type != "function") {
    throw invalid_request(fmt::format("'tool_choice.type' must be 'function', got '{}'", type),
                          "tool_choice.type");
  }
  tools.function = object.required_string("name");
  if (std::none_of(tools.functions.begin(), tools.functions.end(),
                   [&](const ToolFunction& f) { return f.name == tools.function; })) {
    throw invalid_request(
        fmt::format("'tool_choice.name' is '{}', which is not in 'tools'", tools.function),
        "tool_choice.name");
  }
  tools.choice = ToolChoice::Function;
}

// "text": {"format": {"type": "text" | "json_object" | "json_schema", "name", "schema",
// "strict"}}.
std::optional<OutputFormat> parse_text_format(const FieldsAt& body, const OrderedBody& ordered) {
  const std::optional<FieldsAt> text = body.object("text");
  const std::optional<FieldsAt> format = text ? text->object("format") : std::nullopt;
  if (!format) return std::nullopt;
  const std::string type = format->required_string("type");
  if (type == "text") return std::nullopt;
  if (type == "json_object") return OutputFormat{};
  if (type != "json_schema") {
    throw invalid_request(fmt::format("'text.format.type' must be 'text', 'json_object' or "
                                      "'json_schema', got '{}'",
                                      type),
                          "text.format.type");
  }
  format->required_string("name");
  format->required_object("schema");
  format->boolean("strict");
  return OutputFormat{ordered.at("/text/format/schema")};
}

// "reasoning": {"effort": "none" | "minimal" | "low" | "medium" | "high", "summary"}: any effort
// but "none" turns a hybrid model's thinking on (the effort is not graded further).
bool parse_reasoning(const FieldsAt& body) {
  const std::optional<FieldsAt> reasoning = body.object("reasoning");
  if (!reasoning) return false;
  reasoning->string("summary");
  const std::optional<std::string> effort = reasoning->string("effort");
  if (!effort) return false;
  static const std::set<std::string> kEfforts = {"none", "minimal", "low", "medium", "high"};
  if (!kEfforts.contains(*effort)) {
    throw invalid_request(
        fmt::format("'reasoning.effort' must be one of none, minimal, low, medium, high; got '{}'",
                    *effort),
        "reasoning.effort");
  }
  return *effort != "none";
}

// Fields this server does not implement, refused rather than ignored.
void refuse_unsupported(const FieldsAt& body) {
  if (body.boolean("background").value_or(false)) {
    throw invalid_request("'background' responses are not supported; stream instead", "background");
  }
  if (body.get("conversation")) {
    throw invalid_request("'conversation' is not supported; use 'previous_response_id'",
                          "conversation");
  }
  if (body.get("prompt")) {
    throw invalid_request("'prompt' templates are not supported; give 'input'", "prompt");
  }
  const std::string truncation = body.string("truncation").value_or("disabled");
  if (truncation != "disabled" && truncation != "auto") {
    throw invalid_request(
        fmt::format("'truncation' must be 'disabled' or 'auto', got '{}'", truncation),
        "truncation");
  }
}

// The request fields the response object echoes, with OpenAI's defaults.
nlohmann::json echoed_fields(const FieldsAt& body, const ChatRequest& chat) {
  const auto or_null = [&](std::string_view key) {
    const nlohmann::json* value = body.get(key);
    return value ? *value : nlohmann::json(nullptr);
  };
  const auto or_default = [&](std::string_view key, nlohmann::json fallback) {
    const nlohmann::json* value = body.get(key);
    return value ? *value : std::move(fallback);
  };
  return {{"instructions", or_null("instructions")},
          {"max_output_tokens", or_null("max_output_tokens")},
          {"metadata", or_default("metadata", nlohmann::json::object())},
          {"parallel_tool_calls", chat.tools ? chat.tools->parallel : true},
          {"previous_response_id", or_null("previous_response_id")},
          {"reasoning", or_default("reasoning", {{"effort", nullptr}, {"summary", nullptr}})},
          {"store", or_default("store", true)},
          {"temperature", chat.options.sampling.temperature},
          {"text", or_default("text", {{"format", {{"type", "text"}}}})},
          {"tool_choice", or_default("tool_choice", "auto")},
          {"tools", or_default("tools", nlohmann::json::array())},
          {"top_p", chat.options.sampling.top_p},
          {"truncation", or_default("truncation", "disabled")},
          {"user", or_null("user")}};
}

// The input as the items GET /v1/responses/{id}/input_items lists: a string is a user message,
// an item without a type a message, and each gets an id if it has none.
nlohmann::json input_items_of(const nlohmann::json& input) {
  if (input.is_string()) {
    return {{{"id", new_request_id("msg_")},
             {"type", "message"},
             {"role", "user"},
             {"content", {{{"type", "input_text"}, {"text", input}}}}}};
  }
  nlohmann::json items = input;
  for (nlohmann::json& item : items) {
    if (!item.contains("type")) item["type"] = "message";
    if (!item.contains("id")) {
      const bool message = item["type"] == "message";
      item["id"] = new_request_id(message ? "msg_" : item["type"] == "reasoning" ? "rs_" : "fc_");
    }
  }
  return items;
}

}  // namespace

ResponsesRequest parse_responses_request(const nlohmann::json& json, const OrderedBody& ordered,
                                         const tokenizer::Tokenizer& tokenizer,
                                         const ConversationLookup& previous) {
  const FieldsAt body(json, "");
  refuse_unsupported(body);
  ResponsesRequest request;
  ChatRequest& chat = request.chat;
  chat.options = parse_responses_options(json, tokenizer.vocab_size());
  chat.max_tokens_field = "max_output_tokens";
  request.store = body.boolean("store").value_or(true);
  if (const std::optional<std::string> id = body.string("previous_response_id")) {
    std::optional<nlohmann::ordered_json> conversation = previous(*id);
    if (!conversation) {
      throw ApiError(400, fmt::format("Previous response with id '{}' not found", *id),
                     "invalid_request_error", "previous_response_id",
                     "previous_response_not_found");
    }
    request.conversation = std::move(*conversation);
  }
  const nlohmann::json* input = body.get("input");
  if (!input) throw invalid_request("'input' is required", "input");
  InputConversion conversion(request.conversation);
  if (input->is_string()) {
    request.conversation.push_back({{"role", "user"}, {"content", input->get<std::string>()}});
  } else if (input->is_array() && !input->empty()) {
    for (size_t i = 0; i < input->size(); ++i) conversion.add((*input)[i], item_path("input", i));
  } else {
    throw invalid_request("'input' must be a string or a non-empty list of items", "input");
  }
  request.input_items = input_items_of(*input);
  if (const std::optional<std::string> instructions = body.string("instructions")) {
    chat.messages.push_back({{"role", "system"}, {"content", *instructions}});
  }
  for (const auto& message : request.conversation) chat.messages.push_back(message);
  if (const nlohmann::json* tools = body.list("tools")) {
    chat.tools = parse_tools(*tools, ordered, tokenizer);
  }
  if (const nlohmann::json* choice = body.get("tool_choice")) {
    if (!chat.tools) throw invalid_request("'tool_choice' needs 'tools'", "tool_choice");
    parse_tool_choice(*choice, *chat.tools);
  }
  if (chat.tools) chat.tools->parallel = body.boolean("parallel_tool_calls").value_or(true);
  chat.output_format = parse_text_format(body, ordered);
  if (parse_reasoning(body)) chat.template_kwargs["thinking"] = true;
  body.object("metadata");  // type-checked, echoed
  body.string("user");
  request.echo = echoed_fields(body, chat);
  return request;
}

}  // namespace mlaserve::server
