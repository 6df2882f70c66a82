// The server's routes. Each handler runs behind the checks all routes share (API key, body
// size, a body read only when the request declares one) and with errors turned into responses
// in the route's API dialect (OpenAI's unless told); requests that match no route get 404, or 405
// with an Allow header when the path exists under another method.
#pragma once

#include <httplib.h>

#include <functional>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "server/api_error.h"
#include "server/server_context.h"

namespace mlaserve::server {

using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

class RouteTable {
 public:
  RouteTable(httplib::Server& server, ServerContext& context);

  // `path` may be a regular expression (e.g. "/v1/responses/([^/]+)"; the handler reads
  // request.matches).
  void get(const std::string& path, Handler handler, ApiDialect dialect = ApiDialect::OpenAi);
  void post(const std::string& path, Handler handler, ApiDialect dialect = ApiDialect::OpenAi);
  void del(const std::string& path, Handler handler, ApiDialect dialect = ApiDialect::OpenAi);
  // Reachable without the API key: health checks and metrics scrapers rarely carry it.
  void get_public(const std::string& path, Handler handler);

  // Registers the 404/405 (and CORS preflight) handlers; call after all routes.
  void add_fallbacks();

  // The label requests to `path` are counted under: the route (its pattern, for a route with a
  // path parameter), or "unmatched".
  std::string endpoint_of(const std::string& path) const;

 private:
  Handler guarded(Handler handler, bool needs_key, ApiDialect dialect) const;
  httplib::Server::HandlerWithContentReader reading_body(Handler handler, ApiDialect dialect) const;
  void check_api_key(const httplib::Request& request) const;
  void answer_unmatched(const httplib::Request& request, httplib::Response& response) const;

  httplib::Server& server_;
  ServerContext& context_;
  // The route `path` belongs to: itself, or the pattern of a route with a path parameter.
  std::string route_of(const std::string& path) const;
  void add_method(const std::string& path, const char* method);

  std::map<std::string, std::set<std::string>> methods_by_path_;
  std::vector<std::pair<std::regex, std::string>> patterns_;  // routes with a path parameter
};

}  // namespace mlaserve::server
