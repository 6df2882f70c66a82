// Errors returned to API clients, in OpenAI's shape:
// {"error": {"message": ..., "type": ..., "param": ..., "code": ...}} with a matching HTTP status.
// Request handlers throw ApiError; the route wrapper turns it into the response.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace mlaserve::server {

class ApiError : public std::runtime_error {
 public:
  // `param` and `code` may be empty (sent as null).
  ApiError(int status, const std::string& message, std::string type, std::string param = {},
           std::string code = {});

  int status() const { return status_; }
  nlohmann::json to_json() const;

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
