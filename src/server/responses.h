// OpenAI's Responses API (POST /v1/responses, GET and DELETE /v1/responses/{id}): the request
// parsed into a ChatRequest (responses_request.cpp), the reply shaped as a response object with
// output items, or its named stream events (responses_format.cpp), the routes and the stored
// responses behind previous_response_id (responses_routes.cpp, response_store.h).
//
// How items map onto chat messages: "instructions" is a system message first (not carried over
// to a later request, as OpenAI's is not); a message item is a chat message (developer -> system,
// its input_text/output_text parts joined); function_call items are their assistant message's
// tool_calls (consecutive calls join one message, after its text), a function_call_output a
// "tool" message; a reasoning item's text becomes the next assistant message's
// reasoning_content.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "server/chat_request.h"
#include "server/route_table.h"
#include "server/server_context.h"
#include "server/structured_output.h"
#include "tokenizer/tokenizer.h"

namespace mlaserve::server {

struct ResponsesRequest {
  ChatRequest chat;
  // The request fields a response object echoes (instructions, tools, text, ...), with their
  // defaults filled in.
  nlohmann::json echo;
  bool store = true;
  // The chat messages without the instructions: with the reply, what the response stores.
  nlohmann::ordered_json conversation = nlohmann::ordered_json::array();
  // The input as items, each with a type and an id (a string input is one user message).
  nlohmann::json input_items = nlohmann::json::array();
};

// The stored conversation of a previous_response_id, or nullopt when there is none.
using ConversationLookup =
    std::function<std::optional<nlohmann::ordered_json>(const std::string& id)>;

// A /v1/responses body as a chat request; 400 naming the field's path for anything malformed or
// unsupported, 404 for a previous_response_id that is not stored.
ResponsesRequest parse_responses_request(const nlohmann::json& body, const OrderedBody& ordered,
                                         const tokenizer::Tokenizer& tokenizer,
                                         const ConversationLookup& previous);

// What identifies a response and what it echoes.
struct ResponseHeader {
  std::string id;
  int64_t created_at;
  std::string model;
  nlohmann::json echo;
};

// Called with the finished response object and the assistant message it ends with (to store).
using ResponseDone =
    std::function<void(const nlohmann::json& response, const nlohmann::ordered_json& reply)>;

std::shared_ptr<const GenerationFormat> responses_format(ResponseHeader header,
                                                         const ChatParsing& parsing,
                                                         ResponseDone done);

void add_responses_routes(RouteTable& routes, ServerContext& context);

}  // namespace mlaserve::server
