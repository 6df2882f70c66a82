// The HTTP side of bench-serving: one connection per request to the server the user named,
// every call bounded by a timeout.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace mlaserve::bench_serving {

// "http://127.0.0.1:30000" or "http://host:port/prefix": the origin, and a path prefix that is
// put before every API path (empty, or starting with '/' and without a trailing '/').
struct ServerUrl {
  std::string origin;
  std::string path_prefix;
};

ServerUrl parse_server_url(std::string_view url);  // an Error unless http:// or https://

struct HttpResult {
  int status = 0;     // 0 when no response arrived
  std::string error;  // why no (complete) response arrived: refused, timed out, cut off
  std::string body;   // the body, unless it went to a body receiver
  bool closed_by_receiver = false;  // the body receiver closed the connection before the end
  bool ok() const { return error.empty() && status == 200; }
  // One line for the user: the transport error, or the status and the start of the body.
  std::string describe() const;
};

// Takes each piece of a body as it arrives; returns false to close the connection at once (a
// client that goes away mid-stream).
using BodyReceiver = std::function<bool(std::string_view bytes)>;

class HttpClient {
 public:
  HttpClient(ServerUrl url, double timeout_s) : url_(std::move(url)), timeout_s_(timeout_s) {}

  HttpResult get(std::string_view path) const;
  // POSTs a JSON body. The body of a 200 response goes to `on_body` piece by piece as it
  // arrives (when given); other responses are collected in HttpResult::body.
  HttpResult post_json(std::string_view path, const std::string& json_body,
                       const BodyReceiver& on_body = nullptr) const;

 private:
  HttpResult send(std::string_view method, std::string_view path, const std::string& json_body,
                  const BodyReceiver& on_body) const;
  ServerUrl url_;
  double timeout_s_;
};

}  // namespace mlaserve::bench_serving
