#include "server/http_response.h"

namespace mlaserve::server {

std::string json_text(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void send_json(httplib::Response& response, const nlohmann::json& body, int status) {
  response.status = status;
  response.set_content(json_text(body), "application/json");
}

void send_error(httplib::Response& response, const ApiError& error) {
  send_json(response, error.to_json(), error.status());
}

std::string sse_event(const nlohmann::json& value) {
  return "data: " + json_text(value) + "\n\n";
}

}  // namespace mlaserve::server
