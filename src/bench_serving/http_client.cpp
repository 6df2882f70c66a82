#include "bench_serving/http_client.h"

#include <httplib.h>

#include <chrono>

#include "core/error.h"

namespace mlaserve::bench_serving {

ServerUrl parse_server_url(std::string_view url) {
  const size_t scheme_end = url.find("://");
  const std::string_view scheme = url.substr(0, scheme_end);
  if (scheme_end == std::string_view::npos || (scheme != "http" && scheme != "https")) {
    fail("--base-url {}: expected http://HOST:PORT (or https://)", url);
  }
  const size_t path_start = url.find('/', scheme_end + 3);
  ServerUrl server{std::string(url.substr(0, path_start)), {}};
  if (server.origin.size() == scheme_end + 3) fail("--base-url {}: no host", url);
  if (path_start != std::string_view::npos) server.path_prefix = url.substr(path_start);
  while (server.path_prefix.ends_with('/')) server.path_prefix.pop_back();
  return server;
}

std::string HttpResult::describe() const {
  if (!error.empty()) return error;
  constexpr size_t kBodyShown = 300;
  std::string line = fmt::format("HTTP {}", status);
  if (!body.empty()) line += ": " + body.substr(0, kBodyShown);
  return line;
}

HttpResult HttpClient::get(std::string_view path) const {
  return send("GET", path, {}, nullptr);
}

HttpResult HttpClient::post_json(std::string_view path, const std::string& json_body,
                                 const BodyReceiver& on_body) const {
  return send("POST", path, json_body, on_body);
}

namespace {

using Clock = std::chrono::steady_clock;

std::string transport_error(httplib::Error error, bool timed_out, double timeout_s) {
  if (timed_out) return fmt::format("timed out after {} s", timeout_s);
  return "HTTP request failed: " + httplib::to_string(error);
}

}  // namespace

HttpResult HttpClient::send(std::string_view method, std::string_view path,
                            const std::string& json_body, const BodyReceiver& on_body) const {
  httplib::Client client(url_.origin);
  const auto timeout = std::chrono::duration<double>(timeout_s_);
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  client.set_write_timeout(timeout);
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(timeout);

  HttpResult result;
  bool timed_out = false;
  httplib::Request request;
  request.method = method;
  request.path = url_.path_prefix + std::string(path);
  if (!json_body.empty()) {
    request.body = json_body;
    request.set_header("Content-Type", "application/json");
  }
  request.response_handler = [&](const httplib::Response& response) {
    result.status = response.status;
    return true;
  };
  // Every piece of the body passes here, so this is also where a slow stream is cut off.
  request.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    if (Clock::now() > deadline) {
      timed_out = true;
      return false;
    }
    if (result.status == 200 && on_body) {
      result.closed_by_receiver = !on_body(std::string_view(data, size));
      return !result.closed_by_receiver;
    }
    result.body.append(data, size);
    return true;
  };
  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  const bool sent = client.send(request, response, error);
  if (result.closed_by_receiver) {
    result.error = "closed by the client before the end";
  } else if (!sent) {
    // The socket's read timeout (the same length) may fire before the receiver sees the
    // deadline pass.
    timed_out = timed_out || Clock::now() >= deadline;
    result.error = transport_error(error, timed_out, timeout_s_);
  }
  return result;
}

}  // namespace mlaserve::bench_serving
