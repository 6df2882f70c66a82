// Writing JSON and server-sent events into cpp-httplib responses.
#pragma once

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "server/api_error.h"

namespace mlaserve::server {

// Serializes for the wire; bytes that are not UTF-8 become U+FFFD instead of throwing.
std::string json_text(const nlohmann::json& value);

void send_json(httplib::Response& response, const nlohmann::json& body, int status = 200);
void send_error(httplib::Response& response, const ApiError& error);

// One server-sent event carrying `value`: "data: {json}\n\n".
std::string sse_event(const nlohmann::json& value);
// The event that ends OpenAI and SGLang streams.
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace mlaserve::server
