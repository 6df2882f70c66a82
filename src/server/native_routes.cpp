#include "server/native_routes.h"

#include <unistd.h>

#include "server/api_error.h"
#include "server/http_response.h"
#include "server/json_fields.h"
#include "server/native_handlers.h"

namespace mlaserve::server {

namespace {

nlohmann::json server_options_json(const ServerContext& context) {
  const ServerOptions& options = context.options;
  return {{"host", options.host},
          {"port", options.port},
          {"served_model_name", context.served_model_name()},
          {"model_path", options.model_path},
          {"tokenizer_path", options.tokenizer_path},
          {"api_key_required", !options.api_key.empty()},
          {"max_body_bytes", options.max_body_bytes},
          {"threads", options.threads},
          {"cors", options.cors},
          {"context_length", context.engine.context_length()},
          // The process serving HTTP (rank 0): where a client on this host reads its memory
          // and open files (/proc/PID), as scripts/soak.sh does.
          {"pid", getpid()}};
}

// The engine's per-group load when it reports one, else its request counts.
nlohmann::json load_json(const nlohmann::json& status) {
  if (status.contains("load")) return status["load"];
  nlohmann::json load = nlohmann::json::object();
  for (const char* key :
       {"running_requests", "waiting_requests", "kv_used_tokens", "max_total_num_tokens"}) {
    if (status.contains(key)) load[key] = status[key];
  }
  return load;
}

void handle_health(const ServerContext& context, httplib::Response& response) {
  if (context.stopping) throw ApiError(503, "The server is shutting down", "server_error");
  response.set_content("OK", "text/plain");
}

void handle_flush_cache(ServerContext& context, httplib::Response& response) {
  if (!context.engine.flush_cache()) {
    throw invalid_request("Cache not flushed: requests are running; retry when idle");
  }
  response.set_content("Cache flushed.\n", "text/plain");
}

// {"rid": "..."} aborts one request; {"abort_all": true} aborts every one.
void handle_abort_request(ServerContext& context, const httplib::Request& request,
                          httplib::Response& response) {
  const nlohmann::json body = parse_json_object(request.body);
  if (read_bool(body, "abort_all").value_or(false)) {
    send_json(response, {{"aborted", context.registry.abort_all(context.engine)}});
    return;
  }
  const std::optional<std::string> rid = read_string(body, "rid");
  if (!rid) throw invalid_request("'rid' is required", "rid");
  if (!context.registry.abort(*rid, context.engine)) {
    throw ApiError(404, "No request with id '" + *rid + "' is running", "invalid_request_error",
                   "rid", "request_not_found");
  }
  send_json(response, {{"aborted", 1}});
}

void add_info_routes(RouteTable& routes, ServerContext& context) {
  routes.get_public("/health", [&context](const httplib::Request&, httplib::Response& response) {
    handle_health(context, response);
  });
  routes.get_public("/health_generate",
                    [&context](const httplib::Request& request, httplib::Response& response) {
                      handle_health_generate(context, request, response);
                    });
  routes.get("/get_model_info", [&context](const httplib::Request&, httplib::Response& response) {
    send_json(response, {{"model_path", context.options.model_path},
                         {"tokenizer_path", context.options.tokenizer_path},
                         {"served_model_name", context.served_model_name()},
                         {"is_generation", true}});
  });
  routes.get("/get_server_info", [&context](const httplib::Request&, httplib::Response& response) {
    nlohmann::json info = server_options_json(context);
    info["engine"] = context.engine.status();
    send_json(response, info);
  });
  routes.get("/get_load", [&context](const httplib::Request&, httplib::Response& response) {
    send_json(response, load_json(context.engine.status()));
  });
  routes.get_public("/metrics", [&context](const httplib::Request&, httplib::Response& response) {
    response.set_content(context.metrics.render(context.engine.status()),
                         "text/plain; version=0.0.4");
  });
}

void add_control_routes(RouteTable& routes, ServerContext& context) {
  const Handler flush = [&context](const httplib::Request&, httplib::Response& response) {
    handle_flush_cache(context, response);
  };
  routes.post("/flush_cache", flush);
  routes.get("/flush_cache", flush);
  routes.post("/abort_request",
              [&context](const httplib::Request& request, httplib::Response& response) {
                handle_abort_request(context, request, response);
              });
}

}  // namespace

void add_native_routes(RouteTable& routes, ServerContext& context) {
  routes.post("/generate",
              [&context](const httplib::Request& request, httplib::Response& response) {
                handle_generate(context, request, response);
              });
  routes.post("/tokenize",
              [&context](const httplib::Request& request, httplib::Response& response) {
                handle_tokenize(context, request, response);
              });
  routes.post("/detokenize",
              [&context](const httplib::Request& request, httplib::Response& response) {
                handle_detokenize(context, request, response);
              });
  add_info_routes(routes, context);
  add_control_routes(routes, context);
}

}  // namespace mlaserve::server
