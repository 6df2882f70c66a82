// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens): the request parsed into
// a ChatRequest (anthropic_request.cpp), the reply shaped as Anthropic's message and stream events
// (anthropic_format.cpp), the routes (anthropic_routes.cpp). Errors use Anthropic's body
// ({"type": "error", "error": {"type", "message"}}).
//
// How its blocks map onto chat messages: "system" (a string or text blocks) is a system message;
// a user turn's text blocks are its content and each tool_result block a "tool" message (sent
// before the turn's text, in the blocks' order); an assistant turn's text is its content, its
// tool_use blocks its tool_calls (input as JSON text), its thinking blocks its reasoning_content.
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "server/chat_request.h"
#include "server/route_table.h"
#include "server/server_context.h"
#include "server/structured_output.h"
#include "tokenizer/tokenizer.h"

namespace mlaserve::server {

// A /v1/messages body (or a count_tokens body, where max_tokens is not required) as a chat
// request; 400 naming the field's path for anything malformed or unsupported.
ChatRequest parse_anthropic_request(const nlohmann::json& body, const OrderedBody& ordered,
                                    const tokenizer::Tokenizer& tokenizer, bool count_only);

// The reply of message `id` in Anthropic's shapes.
std::shared_ptr<const GenerationFormat> anthropic_format(std::string id, std::string model,
                                                         const ChatParsing& parsing);

void add_anthropic_routes(RouteTable& routes, ServerContext& context);

}  // namespace mlaserve::server
