#include "server/api_error.h"

#include <utility>

namespace mlaserve::server {

namespace {

nlohmann::json string_or_null(const std::string& value) {
  return value.empty() ? nlohmann::json(nullptr) : nlohmann::json(value);
}

// Anthropic's error types by HTTP status (its documented list; 529 is its "overloaded").
std::string anthropic_error_type(int status) {
  switch (status) {
    case 400:
    case 405:
    case 422:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return "api_error";
  }
}

}  // namespace

ApiError::ApiError(int status, const std::string& message, std::string type, std::string param,
                   std::string code)
    : std::runtime_error(message),
      status_(status),
      type_(std::move(type)),
      param_(std::move(param)),
      code_(std::move(code)) {}

nlohmann::json ApiError::to_json(ApiDialect dialect) const {
  if (dialect == ApiDialect::Anthropic) {
    return {{"type", "error"},
            {"error", {{"type", anthropic_error_type(status_)}, {"message", what()}}}};
  }
  return {{"error",
           {{"message", what()},
            {"type", type_},
            {"param", string_or_null(param_)},
            {"code", code_.empty() ? nlohmann::json(status_) : nlohmann::json(code_)}}}};
}

ApiError invalid_request(const std::string& message, std::string param) {
  return ApiError(400, message, "invalid_request_error", std::move(param));
}

ApiError server_error(const std::string& message) {
  return ApiError(500, message, "server_error");
}

}  // namespace mlaserve::server
