#include "server/http_server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <chrono>
#include <utility>

#include "core/error.h"
#include "server/anthropic.h"
#include "server/api_error.h"
#include "server/http_response.h"
#include "server/native_routes.h"
#include "server/openai_routes.h"
#include "server/request_clock.h"
#include "server/responses.h"
#include "server/route_table.h"
#include "server/server_context.h"

namespace mlaserve::server {

// cpp-httplib's server with the two socket settings it does not expose.
class ListeningServer : public httplib::Server {
 public:
  ListeningServer() {
    // The default also sets SO_REUSEPORT, which lets a second server bind a port that is in
    // use instead of failing; SO_REUSEADDR alone only allows rebinding after a restart.
    set_socket_options([](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
  }

  // cpp-httplib listens with a backlog of 5, which drops bursts of connections from benchmark
  // clients; on Linux listen() again on the bound socket raises it.
  void raise_backlog() { ::listen(svr_sock_.load(), SOMAXCONN); }
};

namespace {

constexpr time_t kReadTimeoutSeconds = 30;   // slow uploads of large prompts
constexpr time_t kWriteTimeoutSeconds = 30;  // a stream whose client stopped reading
constexpr size_t kKeepAliveMaxRequests = 100;

std::string reason_for_status(int status, const ServerOptions& options) {
  switch (status) {
    case 400:
      return "Malformed HTTP request";
    case 413:
      return fmt::format("Request body is larger than the limit of {} bytes",
                         options.max_body_bytes);
    case 414:
      return "Request URI is too long";
    default:
      return fmt::format("HTTP error {}", status);
  }
}

}  // namespace

HttpServer::HttpServer(ServerOptions options, sched::EngineHandle& engine,
                       const tokenizer::Tokenizer& tokenizer)
    : context_(std::make_unique<ServerContext>(std::move(options), engine, tokenizer)),
      server_(std::make_unique<ListeningServer>()),
      routes_(std::make_unique<RouteTable>(*server_, *context_)) {
  add_openai_routes(*routes_, *context_);
  add_anthropic_routes(*routes_, *context_);
  add_responses_routes(*routes_, *context_);
  add_native_routes(*routes_, *context_);
  routes_->add_fallbacks();
  install_hooks();
}

HttpServer::~HttpServer() {
  stop();
}

void HttpServer::install_hooks() {
  const ServerOptions& options = context_->options;
  const int threads = options.threads;
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_->set_payload_max_length(options.max_body_bytes);
  server_->set_read_timeout(kReadTimeoutSeconds);
  server_->set_write_timeout(kWriteTimeoutSeconds);
  server_->set_keep_alive_max_count(kKeepAliveMaxRequests);

  server_->set_pre_routing_handler([](const httplib::Request&, httplib::Response&) {
    mark_request_arrival();
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Errors cpp-httplib answers itself (413 over the body limit, 400 unparsable request) get
  // the same OpenAI-shaped body as the routes' errors.
  server_->set_error_handler(httplib::Server::HandlerWithResponse(
      [this](const httplib::Request&, httplib::Response& response) {
        if (!response.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        const int status = response.status;
        send_error(response, ApiError(status, reason_for_status(status, context_->options),
                                      "invalid_request_error"));
        return httplib::Server::HandlerResponse::Handled;
      }));
  server_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& response, std::exception_ptr) {
        send_error(response, server_error("Unexpected server failure"));
      });
  // Runs just before the response goes out, so a client that has its response also sees it
  // counted in /metrics.
  server_->set_post_routing_handler(
      [this](const httplib::Request& request, httplib::Response& response) {
        context_->metrics.count_request(routes_->endpoint_of(request.path), response.status);
        if (!context_->options.cors) return;
        response.set_header("Access-Control-Allow-Origin", "*");
        response.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        response.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
      });
  // Runs after the response is written (for a stream: after its last event).
  server_->set_logger([](const httplib::Request& request, const httplib::Response& response) {
    spdlog::info("{} {} {} {:.1f} ms", request.method, request.path, response.status,
                 seconds_since_request_arrival() * 1e3);
  });
}

void HttpServer::start() {
  if (listener_.joinable() || context_->stopping) {
    fail("the HTTP server can be started once; make a new one after stop()");
  }
  ServerOptions& options = context_->options;
  const bool bound = options.port == 0 ? (port_ = server_->bind_to_any_port(options.host)) > 0
                                       : server_->bind_to_port(options.host, options.port);
  if (!bound) {
    fail("cannot listen on {}:{}: the port is in use or the address is not available here",
         options.host, options.port);
  }
  if (options.port != 0) port_ = options.port;
  options.port = port_;
  server_->raise_backlog();
  listener_ = std::thread([this] { server_->listen_after_bind(); });
  // stop() only acts on a running server, so wait until the accept loop has begun.
  while (!server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  spdlog::info("serving {} on http://{}:{}", context_->served_model_name(), options.host, port_);
}

bool HttpServer::wait_for_streams(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (context_->open_streams > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void HttpServer::stop() {
  if (!listener_.joinable()) return;
  context_->stopping = true;
  server_->stop();
  listener_.join();
  spdlog::info("HTTP server on port {} stopped", port_);
}

}  // namespace mlaserve::server
