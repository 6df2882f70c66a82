// Settings of the HTTP server (the `serve` subcommand's --host, --port, --api-key, ...).
#pragma once

#include <cstddef>
#include <string>

namespace mlaserve::server {

struct ServerOptions {
  std::string host = "127.0.0.1";  // loopback unless the operator opens it up
  int port = 30000;                // 0 picks a free port (tests)
  std::string api_key;             // when set, requests need "Authorization: Bearer <key>"
  size_t max_body_bytes = 8 << 20;
  int threads = 64;        // connections served at once; each open stream holds one
  std::string model_name;  // served name; defaults to model_path
  std::string model_path;
  std::string tokenizer_path;
  bool cors = false;  // send Access-Control-* headers for browser clients
  // "deepseek-r1": chat answers return the text before "</think>" as reasoning_content;
  // "deepseek-v3": only when chat_template_kwargs turn thinking on.
  std::string reasoning_parser;
  // --chat-template: a Jinja file replacing the model's template, "deepseek-v32" or "deepseek-v4".
  std::string chat_template;
};

}  // namespace mlaserve::server
