#include "server/http_response.h"

namespace mlaserve::server {

std::string json_text(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void send_json(httplib::Response& response, const nlohmann::json& body, int status) {
  response.status = status;
  response.set_content(json_text(body), "application/json");
}

void send_error(httplib::Response& response, const ApiError& error, ApiDialect dialect) {
  send_json(response, error.to_json(dialect), error.status());
}

std::string sse_event(const SseEvent& event) {
  std::string text = event.name.empty() ? "" : "event: " + event.name + "\n";
  return text + "data: " + json_text(event.data) + "\n\n";
}

}  // namespace mlaserve::server
