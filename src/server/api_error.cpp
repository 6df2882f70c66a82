#include "server/api_error.h"

#include <utility>

namespace mlaserve::server {

namespace {

nlohmann::json string_or_null(const std::string& value) {
  return value.empty() ? nlohmann::json(nullptr) : nlohmann::json(value);
}

}  // namespace

ApiError::ApiError(int status, const std::string& message, std::string type, std::string param,
                   std::string code)
    : std::runtime_error(message),
      status_(status),
      type_(std::move(type)),
      param_(std::move(param)),
      code_(std::move(code)) {}

nlohmann::json ApiError::to_json() const {
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
