#include "server/route_table.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <utility>

#include "server/api_error.h"
#include "server/http_response.h"
#include "server/openai_format.h"

namespace mlaserve::server {

namespace {

// Compares in time independent of where the strings differ, so the key cannot be guessed
// byte by byte from response times.
bool equal_in_constant_time(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char difference = 0;
  for (size_t i = 0; i < a.size(); ++i) difference |= static_cast<unsigned char>(a[i] ^ b[i]);
  return difference == 0;
}

}  // namespace

RouteTable::RouteTable(httplib::Server& server, ServerContext& context)
    : server_(server), context_(context) {}

void RouteTable::get(const std::string& path, Handler handler, ApiDialect dialect) {
  add_method(path, "GET");
  server_.Get(path, guarded(std::move(handler), /*needs_key=*/true, dialect));
}

void RouteTable::get_public(const std::string& path, Handler handler) {
  add_method(path, "GET");
  server_.Get(path, guarded(std::move(handler), /*needs_key=*/false, ApiDialect::OpenAi));
}

void RouteTable::post(const std::string& path, Handler handler, ApiDialect dialect) {
  add_method(path, "POST");
  server_.Post(path,
               reading_body(guarded(std::move(handler), /*needs_key=*/true, dialect), dialect));
}

void RouteTable::del(const std::string& path, Handler handler, ApiDialect dialect) {
  add_method(path, "DELETE");
  server_.Delete(path,
                 reading_body(guarded(std::move(handler), /*needs_key=*/true, dialect), dialect));
}

// cpp-httplib 0.11 reads the body of a POST that has neither Content-Length nor a chunked
// Transfer-Encoding until the client closes the connection, so `curl -X POST URL` waited out
// the 30 s read timeout and then got a 400. HTTP/1.1 says such a request has no body (RFC 9112
// section 6.3). A handler registered with a content reader reads the body itself, which lets it
// follow the RFC; it also stops a chunked upload as soon as it passes the size limit.
httplib::Server::HandlerWithContentReader RouteTable::reading_body(Handler handler,
                                                                   ApiDialect dialect) const {
  return [this, handler = std::move(handler), dialect](const httplib::Request& request,
                                                       httplib::Response& response,
                                                       const httplib::ContentReader& read) {
    const bool chunked =
        request.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos;
    if (!request.has_header("Content-Length") && !chunked) return handler(request, response);
    const size_t limit = context_.options.max_body_bytes;
    httplib::Request with_body = request;
    bool over_limit = false;
    const bool complete = read([&](const char* data, size_t size) {
      over_limit = with_body.body.size() + size > limit;
      if (!over_limit) with_body.body.append(data, size);
      return !over_limit;
    });
    if (complete) return handler(with_body, response);
    // The rest of the body is unread: the connection cannot carry another request.
    response.set_header("Connection", "close");
    if (over_limit || response.status == 413) {
      send_error(
          response,
          ApiError(413, fmt::format("Request body is larger than the limit of {} bytes", limit),
                   "invalid_request_error", "", "request_too_large"),
          dialect);
    } else {
      send_error(response,
                 ApiError(400, "The request body could not be read", "invalid_request_error"),
                 dialect);
    }
  };
}

Handler RouteTable::guarded(Handler handler, bool needs_key, ApiDialect dialect) const {
  return [this, handler = std::move(handler), needs_key, dialect](const httplib::Request& request,
                                                                  httplib::Response& response) {
    // Anthropic's responses carry a request-id header (its SDK reports it with errors).
    if (dialect == ApiDialect::Anthropic) response.set_header("request-id", new_request_id("req_"));
    try {
      if (needs_key) check_api_key(request);
      handler(request, response);
    } catch (const ApiError& error) {
      send_error(response, error, dialect);
    } catch (const std::exception& error) {
      spdlog::error("{} {} failed: {}", request.method, request.path, error.what());
      send_error(response, server_error(error.what()), dialect);
    }
  };
}

void RouteTable::check_api_key(const httplib::Request& request) const {
  const std::string& key = context_.options.api_key;
  if (key.empty()) return;
  // OpenAI's clients send the key as a bearer token, Anthropic's in x-api-key.
  if (equal_in_constant_time(request.get_header_value("Authorization"), "Bearer " + key)) return;
  if (equal_in_constant_time(request.get_header_value("x-api-key"), key)) return;
  throw ApiError(401,
                 "Missing or invalid API key; send 'Authorization: Bearer <key>' or "
                 "'x-api-key: <key>'",
                 "invalid_request_error", "", "invalid_api_key");
}

void RouteTable::add_fallbacks() {
  const Handler unmatched = [this](const httplib::Request& request, httplib::Response& response) {
    answer_unmatched(request, response);
  };
  server_.Get(".*", unmatched);
  server_.Options(".*", unmatched);
  server_.Post(".*", reading_body(unmatched, ApiDialect::OpenAi));
  server_.Put(".*", reading_body(unmatched, ApiDialect::OpenAi));
  server_.Patch(".*", reading_body(unmatched, ApiDialect::OpenAi));
  server_.Delete(".*", reading_body(unmatched, ApiDialect::OpenAi));
}

void RouteTable::answer_unmatched(const httplib::Request& request,
                                  httplib::Response& response) const {
  // Anthropic's clients read errors under its paths in its shape.
  const ApiDialect dialect =
      request.path.starts_with("/v1/messages") ? ApiDialect::Anthropic : ApiDialect::OpenAi;
  const auto route = methods_by_path_.find(route_of(request.path));
  if (route == methods_by_path_.end()) {
    send_error(response,
               ApiError(404, fmt::format("Invalid URL ({} {})", request.method, request.path),
                        "invalid_request_error", "", "not_found"),
               dialect);
    return;
  }
  const std::string allowed = fmt::format("{}", fmt::join(route->second, ", "));
  if (request.method == "OPTIONS" && context_.options.cors) {
    response.status = 204;  // preflight; the CORS headers are added to every response
    return;
  }
  response.set_header("Allow", allowed);
  send_error(response,
             ApiError(405,
                      fmt::format("Method {} is not allowed for {}; use {}", request.method,
                                  request.path, allowed),
                      "invalid_request_error", "", "method_not_allowed"),
             dialect);
}

void RouteTable::add_method(const std::string& path, const char* method) {
  auto [entry, added] = methods_by_path_.try_emplace(path);
  entry->second.insert(method);
  if (added && path.find('(') != std::string::npos) patterns_.emplace_back(std::regex(path), path);
}

std::string RouteTable::route_of(const std::string& path) const {
  if (methods_by_path_.contains(path)) return path;
  for (const auto& [pattern, route] : patterns_) {
    if (std::regex_match(path, pattern)) return route;
  }
  return path;
}

std::string RouteTable::endpoint_of(const std::string& path) const {
  const std::string route = route_of(path);
  return methods_by_path_.contains(route) ? route : "unmatched";
}

}  // namespace mlaserve::server
