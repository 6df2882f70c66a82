// Writing JSON and server-sent events into cpp-httplib responses.
#pragma once

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "server/api_error.h"

namespace mlaserve::server {

// Serializes for the wire; bytes that are not UTF-8 become U+FFFD instead of throwing.
std::string json_text(const nlohmann::json& value);

void send_json(httplib::Response& response, const nlohmann::json& body, int status = 200);
void send_error(httplib::Response& response, const ApiError& error,
                ApiDialect dialect = ApiDialect::OpenAi);

// A server-sent event: OpenAI's chat and SGLang streams send data only, the Responses and
// Anthropic APIs name each event.
struct SseEvent {
  SseEvent(nlohmann::json data) : data(std::move(data)) {}  // NOLINT: implicit, data only
  SseEvent(std::string name, nlohmann::json data) : name(std::move(name)), data(std::move(data)) {}
  std::string name;  // empty: no "event:" line
  nlohmann::json data;
};

// "event: NAME\ndata: {json}\n\n" (without the first line when the event has no name).
std::string sse_event(const SseEvent& event);
// The event that ends OpenAI and SGLang streams.
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace mlaserve::server
