// The HTTP front end over an EngineHandle. The server owns text (tokenizing, detokenizing, stop
// strings, API formats); the engine owns tokens.
//
// OpenAI-compatible: GET /v1/models, POST /v1/completions, POST /v1/chat/completions
// (streaming as server-sent events). SGLang-native: POST /generate, GET /health,
// /health_generate, /get_model_info, /get_server_info, /get_load, POST /flush_cache,
// /abort_request, /tokenize, /detokenize, and GET /metrics (Prometheus). Errors use OpenAI's
// {"error": {...}} shape. /health, /health_generate and /metrics need no API key.
#pragma once

#include <chrono>
#include <memory>
#include <thread>

#include "sched/generation.h"
#include "server/server_options.h"
#include "tokenizer/tokenizer.h"

namespace mlaserve::server {

struct ServerContext;
class ListeningServer;
class RouteTable;

class HttpServer {
 public:
  // `engine` and `tokenizer` must outlive the server.
  HttpServer(ServerOptions options, sched::EngineHandle& engine,
             const tokenizer::Tokenizer& tokenizer);
  ~HttpServer();  // stops
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds (throws mlaserve::Error naming the address if it cannot, e.g. the port is taken) and
  // serves on background threads; returns once connections are accepted. Once only.
  void start();
  // The bound port (the one chosen when the options asked for port 0).
  int port() const { return port_; }
  // Stops accepting, ends open streams and waits for the server threads. Idempotent.
  void stop();
  // Waits up to `timeout` for the open streams to end by themselves (the engine finished or
  // failed their requests), so that stop() cuts none short; true when none is left.
  bool wait_for_streams(std::chrono::milliseconds timeout) const;

 private:
  void install_hooks();

  std::unique_ptr<ServerContext> context_;
  std::unique_ptr<ListeningServer> server_;
  std::unique_ptr<RouteTable> routes_;
  std::thread listener_;
  int port_ = -1;
};

}  // namespace mlaserve::server
