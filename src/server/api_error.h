// Errors returned to API clients with a matching HTTP status, in the shape of the route's API:
// OpenAI's {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}, or Anthropic's
// {"type": "error", "error": {"type": ..., "message": ...}}. Request handlers throw ApiError; the
// route wrapper turns it into the response.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace mlaserve::server {

// Which API's conventions a route follows: its error body and its stream's framing.
enum class ApiDialect { OpenAi, Anthropic };

class ApiError : public std::runtime_error {
 public:
  // `param` and `code` may be empty (sent as null).
  ApiError(int status, const std::string& message, std::string type, std::string param = {},
           std::string code = {});

  int status() const { return status_; }
  nlohmann::json to_json(ApiDialect dialect = ApiDialect::OpenAi) const;

 private:
  int status_;
  std::string type_;
  std::string param_;
  std::string code_;
};

// 400: a request field is missing, of the wrong type or out of range.
ApiError invalid_request(const std::string& message, std::string param = {});
// 500: the engine failed the request.
ApiError server_error(const std::string& message);

}  // namespace mlaserve::server
