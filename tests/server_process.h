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
    httplib::Client client("127.0.0.1", port_);
    client.set_read_timeout(300, 0);
    auto res = body ? client.Post(path, body->dump(), "application/json") : client.Get(path);
    EXPECT_TRUE(res) << path << ": no response";
    if (!res) return {};
    EXPECT_EQ(res->status, 200) << path << ": " << res->body;
    return nlohmann::json::parse(res->body, nullptr, /*allow_exceptions=*/false);
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
