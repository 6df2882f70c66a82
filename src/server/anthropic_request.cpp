// Parsing Anthropic's /v1/messages body into a ChatRequest (see anthropic.h for the mapping).
#include <fmt/format.h>

#include <set>
#include <string>
#include <utility>

#include "server/anthropic.h"
#include "server/api_error.h"
#include "server/generation_options.h"
#include "server/json_fields.h"

namespace mlaserve::server {

namespace {

// The block types a request may hold; images and documents need a model that reads them.
constexpr const char* kUserBlocks = "'text' and 'tool_result'";
constexpr const char* kAssistantBlocks = "'text', 'tool_use', 'thinking' and 'redacted_thinking'";

std::string block_type(const FieldsAt& block) {
  const std::string type = block.required_string("type");
  if (type == "image" || type == "document" || type == "search_result") {
    throw invalid_request(fmt::format("'{}' is a '{}' block; this server's models read text only",
                                      block.path(), type),
                          block.path_of("type"));
  }
  return type;
}

// A string, or a list of text blocks joined.
std::string text_of(const nlohmann::json& content, const std::string& path) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    throw invalid_request(fmt::format("'{}' must be a string or a list of text blocks", path),
                          path);
  }
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const FieldsAt block(content[i], item_path(path, i));
    if (block_type(block) != "text") {
      throw invalid_request(fmt::format("'{}' must be a text block", block.path()),
                            block.path_of("type"));
    }
    text += block.required_string("text");
  }
  return text;
}

nlohmann::ordered_json message(const char* role, std::string content) {
  return {{"role", role}, {"content", std::move(content)}};
}

class MessagesConversion {
 public:
  explicit MessagesConversion(nlohmann::ordered_json& messages) : messages_(messages) {}

  void add(const FieldsAt& turn) {
    const std::string role = turn.required_string("role");
    const nlohmann::json* content = turn.get("content");
    if (!content)
      throw invalid_request(fmt::format("'{}' is required", turn.path_of("content")),
                            turn.path_of("content"));
    const std::string path = turn.path_of("content");
    if (role == "user") {
      add_user(*content, path);
    } else if (role == "assistant") {
      add_assistant(*content, path);
    } else if (role == "system") {
      // A system turn inside the conversation (Claude Code sends them; Anthropic's
      // mid-conversation-system beta): a system message where it stands.
      messages_.push_back(message("system", text_of(*content, path)));
    } else {
      throw invalid_request(fmt::format("'{}' must be 'user', 'assistant' or 'system', got '{}'",
                                        turn.path_of("role"), role),
                            turn.path_of("role"));
    }
  }

 private:
  void add_user(const nlohmann::json& content, const std::string& path) {
    if (content.is_string())
      return messages_.push_back(message("user", content.get<std::string>()));
    if (!content.is_array()) {
      throw invalid_request(fmt::format("'{}' must be a string or a list of blocks", path), path);
    }
    std::string text;
    for (size_t i = 0; i < content.size(); ++i) {
      const FieldsAt block(content[i], item_path(path, i));
      const std::string type = block_type(block);
      if (type == "text") {
        text += block.required_string("text");
      } else if (type == "tool_result") {
        add_tool_result(block);
      } else {
        throw unknown_block(block, type, kUserBlocks);
      }
    }
    if (!text.empty() || content.empty()) messages_.push_back(message("user", std::move(text)));
  }

  void add_tool_result(const FieldsAt& block) {
    const std::string id = block.required_string("tool_use_id");
    if (!tool_use_ids_.contains(id)) {
      throw invalid_request(fmt::format("'{}' is '{}', which no earlier tool_use block has",
                                        block.path_of("tool_use_id"), id),
                            block.path_of("tool_use_id"));
    }
    block.boolean("is_error");  // checked; the chat formats have no place for it
    const nlohmann::json* result = block.get("content");
    nlohmann::ordered_json tool =
        message("tool", result ? text_of(*result, block.path_of("content")) : std::string());
    tool["tool_call_id"] = id;
    messages_.push_back(std::move(tool));
  }

  void add_assistant(const nlohmann::json& content, const std::string& path) {
    if (content.is_string()) {
      return messages_.push_back(message("assistant", content.get<std::string>()));
    }
    if (!content.is_array()) {
      throw invalid_request(fmt::format("'{}' must be a string or a list of blocks", path), path);
    }
    nlohmann::ordered_json turn = message("assistant", "");
    std::string reasoning;
    for (size_t i = 0; i < content.size(); ++i) {
      const FieldsAt block(content[i], item_path(path, i));
      const std::string type = block_type(block);
      if (type == "text") {
        turn["content"] = turn["content"].get<std::string>() + block.required_string("text");
      } else if (type == "tool_use") {
        turn["tool_calls"].push_back(tool_call(block));
      } else if (type == "thinking") {
        reasoning += block.required_string("thinking");
        block.string("signature");
      } else if (type != "redacted_thinking") {  // encrypted elsewhere: nothing to render
        throw unknown_block(block, type, kAssistantBlocks);
      }
    }
    if (!reasoning.empty()) turn["reasoning_content"] = std::move(reasoning);
    messages_.push_back(std::move(turn));
  }

  nlohmann::ordered_json tool_call(const FieldsAt& block) {
    const std::string id = block.required_string("id");
    const std::string name = block.required_string("name");
    const FieldsAt input = block.required_object("input");
    tool_use_ids_.insert(id);
    return {{"id", id},
            {"type", "function"},
            {"function", {{"name", name}, {"arguments", input.json().dump()}}}};
  }

  static ApiError unknown_block(const FieldsAt& block, const std::string& type,
                                const char* allowed) {
    return invalid_request(fmt::format("'{}' has type '{}'; this turn's blocks may be {}",
                                       block.path(), type, allowed),
                           block.path_of("type"));
  }

  nlohmann::ordered_json& messages_;
  std::set<std::string> tool_use_ids_;
};

// "tools": custom tools {"name", "description", "input_schema"} (Anthropic's server tools, such
// as web search, are refused by name).
ToolRequest parse_tools(const nlohmann::json& tools, const OrderedBody& ordered,
                        const tokenizer::Tokenizer& tokenizer) {
  ToolRequest request;
  request.syntax = required_tool_syntax(tokenizer, "tools");
  request.tools = nlohmann::ordered_json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const FieldsAt tool(tools[i], item_path("tools", i));
    const std::string type = tool.string("type").value_or("custom");
    if (type != "custom") {
      throw invalid_request(fmt::format("'{}' is Anthropic's server tool '{}', which this server "
                                        "does not run; give custom tools with 'input_schema'",
                                        tool.path(), type),
                            tool.path_of("type"));
    }
    ToolFunction function{tool.required_string("name"), {}};
    tool.required_object("input_schema");
    function.parameters = ordered.at(fmt::format("/tools/{}/input_schema", i));
    request.tools.push_back(chat_tool_json(function, tool.string("description")));
    request.functions.push_back(std::move(function));
  }
  request.choice = tools.empty() ? ToolChoice::None : ToolChoice::Auto;
  return request;
}

// "tool_choice": {"type": "auto" | "any" | "tool" (with "name") | "none",
// "disable_parallel_tool_use"}.
void parse_tool_choice(const FieldsAt& choice, ToolRequest& tools) {
  const std::string type = choice.required_string("type");
  if (type == "auto") {
    tools.choice = tools.functions.empty() ? ToolChoice::None : ToolChoice::Auto;
  } else if (type == "any") {
    tools.choice = ToolChoice::Required;
  } else if (type == "none") {
    tools.choice = ToolChoice::None;
  } else if (type == "tool") {
    tools.choice = ToolChoice::Function;
    tools.function = choice.required_string("name");
    if (std::none_of(tools.functions.begin(), tools.functions.end(),
                     [&](const ToolFunction& f) { return f.name == tools.function; })) {
      throw invalid_request(
          fmt::format("'tool_choice.name' is '{}', which is not in 'tools'", tools.function),
          "tool_choice.name");
    }
  } else {
    throw invalid_request(
        fmt::format("'tool_choice.type' must be 'auto', 'any', 'tool' or 'none', got '{}'", type),
        "tool_choice.type");
  }
  if (tools.choice == ToolChoice::Required && tools.functions.empty()) {
    throw invalid_request("'tool_choice' 'any' needs at least one tool", "tool_choice.type");
  }
  tools.parallel = !choice.boolean("disable_parallel_tool_use").value_or(false);
}

// "thinking": {"type": "enabled", "budget_tokens": N} turns the model's reasoning on (the
// budget is checked as Anthropic checks it, at least 1024 and below max_tokens, but reasoning
// is not cut at it: max_tokens bounds the whole reply); {"type": "adaptive"} (the model decides
// how long to think) turns it on without a budget; {"type": "disabled"} leaves it off.
bool parse_thinking(const FieldsAt& body, const GenerationOptions& options) {
  const std::optional<FieldsAt> thinking = body.object("thinking");
  if (!thinking) return false;
  const std::string type = thinking->required_string("type");
  if (type == "disabled") return false;
  if (type == "adaptive") return true;
  if (type != "enabled") {
    throw invalid_request(
        fmt::format("'thinking.type' must be 'enabled', 'adaptive' or 'disabled', got '{}'", type),
        "thinking.type");
  }
  const std::optional<int64_t> budget = thinking->integer("budget_tokens");
  if (!budget)
    throw invalid_request("'thinking.budget_tokens' is required", "thinking.budget_tokens");
  if (*budget < 1024 || (options.max_new_tokens && *budget >= *options.max_new_tokens)) {
    throw invalid_request(
        fmt::format("'thinking.budget_tokens' must be at least 1024 and less than 'max_tokens', "
                    "got {}",
                    *budget),
        "thinking.budget_tokens");
  }
  return true;
}

}  // namespace

ChatRequest parse_anthropic_request(const nlohmann::json& json, const OrderedBody& ordered,
                                    const tokenizer::Tokenizer& tokenizer, bool count_only) {
  const FieldsAt body(json, "");
  ChatRequest chat;
  chat.options = parse_anthropic_options(json, /*needs_max_tokens=*/!count_only);
  if (const nlohmann::json* system = body.get("system")) {
    chat.messages.push_back(message("system", text_of(*system, "system")));
  }
  const nlohmann::json& turns = body.required_list("messages");
  if (turns.empty()) throw invalid_request("'messages' must not be empty", "messages");
  MessagesConversion conversion(chat.messages);
  for (size_t i = 0; i < turns.size(); ++i)
    conversion.add(FieldsAt(turns[i], item_path("messages", i)));
  if (turns.back().at("role") == "assistant") {
    throw invalid_request(
        "The last message must be the user's: this server does not continue a final assistant "
        "message (prefill)",
        item_path("messages", turns.size() - 1));
  }
  if (const nlohmann::json* tools = body.list("tools")) {
    chat.tools = parse_tools(*tools, ordered, tokenizer);
  }
  if (const std::optional<FieldsAt> choice = body.object("tool_choice")) {
    if (!chat.tools) throw invalid_request("'tool_choice' needs 'tools'", "tool_choice");
    parse_tool_choice(*choice, *chat.tools);
  }
  if (parse_thinking(body, chat.options)) chat.template_kwargs["thinking"] = true;
  if (const std::optional<FieldsAt> metadata = body.object("metadata")) metadata->string("user_id");
  return chat;
}

}  // namespace mlaserve::server
