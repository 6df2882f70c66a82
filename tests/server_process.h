// `mlaserve serve` as a child process on a free loopback port, for end-to-end tests.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace mlaserve::testing {

// A server-sent event stream: the JSON events in order and whether `data: [DONE]` ended it.
struct EventStream {
  std::vector<nlohmann::json> events;
  bool done = false;
  int status = 0;
};

inline EventStream parse_event_stream(int status, const std::string& body) {
  EventStream stream{{}, false, status};
  size_t at = 0;
  while (at < body.size()) {
    const size_t end = body.find("\n\n", at);
    const std::string block = body.substr(at, end - at);
    at = end == std::string::npos ? body.size() : end + 2;
    EXPECT_EQ(block.rfind("data: ", 0), 0u) << block;
    EXPECT_FALSE(stream.done) << "an event after [DONE]: " << block;
    const std::string data = block.substr(6);
    if (data == "[DONE]") {
      stream.done = true;
    } else {
      stream.events.push_back(nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false));
      EXPECT_FALSE(stream.events.back().is_discarded()) << block;
    }
  }
  return stream;
}

// An HTTP client of one running server that sends its API key (or `api_key`).
class ServerApi {
 public:
  explicit ServerApi(int port, std::string api_key = "")
      : port_(port), api_key_(std::move(api_key)) {}

  httplib::Client client() const {
    httplib::Client client("127.0.0.1", port_);
    if (!api_key_.empty()) client.set_bearer_token_auth(api_key_);
    client.set_read_timeout(300, 0);
    return client;
  }

  httplib::Result post(const std::string& path, const std::string& body) const {
    return client().Post(path, body, "application/nlohmann::json");
  }
  httplib::Result get(const std::string& path) const { return client().Get(path); }

  // The parsed JSON answer of a POST (body given) or GET, expecting 200.
  nlohmann::json call(const std::string& path, const nlohmann::json* body = nullptr) const {
    const httplib::Result result = body ? post(path, body->dump()) : get(path);
    EXPECT_TRUE(result) << path << ": no response";
    if (!result) return nlohmann::json::object();
    EXPECT_EQ(result->status, 200) << path << ": " << result->body;
    return nlohmann::json::parse(result->body, nullptr, /*allow_exceptions=*/false);
  }
  nlohmann::json post_json(const std::string& path, const nlohmann::json& body) const {
    return call(path, &body);
  }
  nlohmann::json get_json(const std::string& path) const { return call(path); }

  // POST with "stream": true; the events, expecting text/event-stream.
  EventStream stream(const std::string& path, nlohmann::json body) const {
    body["stream"] = true;
    const httplib::Result result = post(path, body.dump());
    EXPECT_TRUE(result) << path << ": no response";
    if (!result) return {};
    EXPECT_EQ(result->get_header_value("Content-Type"), "text/event-stream") << result->body;
    return parse_event_stream(result->status, result->body);
  }

  nlohmann::json engine_status() const { return get_json("/get_server_info")["engine"]; }

  std::string metrics() const {
    const httplib::Result result = get("/metrics");
    EXPECT_TRUE(result && result->status == 200);
    return result ? result->body : std::string();
  }

  std::vector<int> tokenize(const nlohmann::json& body) const {
    return post_json("/tokenize", body).value("tokens", std::vector<int>{});
  }
  std::string detokenize(const std::vector<int>& ids, bool skip_special_tokens) const {
    const nlohmann::json body = {{"tokens", ids}, {"skip_special_tokens", skip_special_tokens}};
    return post_json("/detokenize", body).value("text", std::string());
  }

 private:
  int port_;
  std::string api_key_;
};

// A shell command line that ends in `mlaserve serve` (exec'd, so that its pid is the server's)
// and picks a free port (`--port 0`).
struct ServerCommand {
  std::string line;
};

// `mlaserve serve` in the background; the port comes from its "listening on" log line.
class ServerProcess {
 public:
  explicit ServerProcess(const std::string& flags)
      : ServerProcess(ServerCommand{
            mlaserve_bin() + " serve --port 0 --dtype float32 --kv-cache-memory 64 " + flags}) {}

  // `wait_seconds`: how long the command may take to listen (a script that builds first).
  explicit ServerProcess(const ServerCommand& command, int wait_seconds = 60) {
    const auto r = run_command("sh -c '" + command.line + " > " + (tmp_ / "log").string() +
                               " 2>&1 & echo $! > " + (tmp_ / "pid").string() + "'");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    for (int i = 0; i < 10 * wait_seconds && port_ == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const std::string log = run_command("cat " + (tmp_ / "log").string()).output;
      if (auto at = log.find("listening on http://127.0.0.1:"); at != std::string::npos) {
        port_ = std::stoi(log.substr(at + 30));
      }
    }
    EXPECT_GT(port_, 0) << run_command("cat " + (tmp_ / "log").string()).output;
  }
  ~ServerProcess() {
    run_command("kill -TERM $(cat " + (tmp_ / "pid").string() + ")");
    for (int i = 0;
         i < 100 && run_command("kill -0 $(cat " + (tmp_ / "pid").string() + ")").exit_code == 0;
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  int port() const { return port_; }

  // POST (body given) or GET; the parsed JSON answer, expecting HTTP 200.
  nlohmann::json call(const std::string& path, const nlohmann::json* body = nullptr) const {
    return ServerApi(port_).call(path, body);
  }

  // POST /generate with input ids, greedy; the whole answer (output_ids, meta_info with each
  // token's logprob).
  nlohmann::json generate_json(const std::vector<int>& ids, int max_new) const {
    const nlohmann::json body = {
        {"input_ids", ids},
        {"return_logprob", true},
        {"sampling_params",
         {{"max_new_tokens", max_new}, {"temperature", 0}, {"ignore_eos", true}}}};
    return call("/generate", &body);
  }

  std::vector<int> generate(const std::vector<int>& ids, int max_new) const {
    return generate_json(ids, max_new).value("output_ids", std::vector<int>{});
  }

 private:
  TempDir tmp_;
  int port_ = 0;
};

}  // namespace mlaserve::testing
