// The server's routes. Each handler runs behind the checks all routes share (API key, body
// size, a body read only when the request declares one) and with errors turned into
// OpenAI-shaped responses; requests that match no route get 404, or 405 with an Allow header
// when the path exists under another method.
#pragma once

#include <httplib.h>

#include <functional>
#include <map>
#include <set>
#include <string>

#include "server/server_context.h"

namespace mlaserve::server {

using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

class RouteTable {
 public:
  RouteTable(httplib::Server& server, ServerContext& context);

  void get(const std::string& path, Handler handler);
  void post(const std::string& path, Handler handler);
  // Reachable without the API key: health checks and metrics scrapers rarely carry it.
  void get_public(const std::string& path, Handler handler);

  // Registers the 404/405 (and CORS preflight) handlers; call after all routes.
  void add_fallbacks();

  // The label requests to `path` are counted under: the route, or "unmatched".
  std::string endpoint_of(const std::string& path) const;

 private:
  Handler guarded(Handler handler, bool needs_key) const;
  httplib::Server::HandlerWithContentReader reading_body(Handler handler) const;
  void check_api_key(const httplib::Request& request) const;
  void answer_unmatched(const httplib::Request& request, httplib::Response& response) const;

  httplib::Server& server_;
  ServerContext& context_;
  std::map<std::string, std::set<std::string>> methods_by_path_;
};

}  // namespace mlaserve::server
