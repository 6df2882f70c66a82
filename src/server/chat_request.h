// One chat request, whichever API it came by. Each chat API (OpenAI's Chat Completions and
// Responses, Anthropic's Messages) parses its body into a ChatRequest; run_chat renders it with
// the model's chat format, constrains the output (forced tool calls, a JSON format), submits
// its choices and answers through the API's format object, which shapes the parsed output
// (ChatOutputParser: reasoning, content, tool calls) into that API's bodies and events. So
// sampling, templating, constraints and streaming exist once; an API adds only a parser and a
// format.
#pragma once

#include <httplib.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/chat_output.h"
#include "server/generation_format.h"
#include "server/generation_options.h"
#include "server/prompt_input.h"
#include "server/server_context.h"
#include "server/structured_output.h"
#include "server/tool_calls.h"

namespace mlaserve::server {

struct ChatRequest {
  // OpenAI chat messages, as chat templates take them: "role", "content" (text or null), an
  // assistant's "tool_calls" ([{"id", "type": "function", "function": {"name", "arguments"}}],
  // arguments as JSON text) and "reasoning_content", a tool result's "tool_call_id".
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  // Extra chat-template variables (chat_template_kwargs): "thinking" turns a hybrid model's
  // reasoning on.
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
  std::optional<ToolRequest> tools;
  std::optional<OutputFormat> output_format;
  GenerationOptions options;  // sampling, budget, stops, stream (make_constraint set by run_chat)
  std::string max_tokens_field = "max_tokens";  // the API's name for the budget, for errors
};

// How a choice's text is split: reasoning (thinking on, or a reasoning parser), content, tool
// calls (in the model's syntax).
struct ChatParsing {
  bool reasoning = false;
  std::optional<ToolSyntax> tool_calls;
  ChatOutputParser parser() const { return ChatOutputParser(reasoning, tool_calls); }
  // A whole reply parsed at once (what its stream's deltas sum to).
  ChatMessage parse(std::string_view text) const {
    ChatOutputParser whole = parser();
    ChatMessage message;
    message.add(whole.push_update(text, /*last=*/true));
    return message;
  }
};

// Makes the API's format for a request, told how its output is parsed.
using ChatFormatFactory = std::function<std::shared_ptr<const GenerationFormat>(
    const ChatRequest& request, const ChatParsing& parsing)>;

// The request's prompt: its messages rendered with its tools and template variables.
Prompt render_chat_request(const ChatRequest& request, const tokenizer::Tokenizer& tokenizer);

// Renders, constrains and submits the request's choices under `id` (/abort_request knows them
// by it), then answers through the format `make_format` returns. `default_max_tokens`: the
// budget when the request names none.
void run_chat(ServerContext& context, const httplib::Request& http_request,
              httplib::Response& response, ChatRequest request, const std::string& id,
              int64_t default_max_tokens, const ChatFormatFactory& make_format);

}  // namespace mlaserve::server
