// `mlaserve serve` as a child process on a free loopback port, and an HTTP client of it, for
// end-to-end tests.
#pragma once

#include <httplib.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/files.h"
#include "support/sse.h"

namespace mlaserve::testing {

// An HTTP client of one running server that sends its API key (or `api_key`).
class ServerApi {
 public:
  explicit ServerApi(int port, std::string api_key = "")
      : port_(port), api_key_(std::move(api_key)) {}

  httplib::Client client() const;
  httplib::Result post(const std::string& path, const std::string& body) const;
  httplib::Result get(const std::string& path) const { return client().Get(path); }

  // The parsed JSON answer of a POST (body given) or GET, expecting 200.
  nlohmann::json call(const std::string& path, const nlohmann::json* body = nullptr) const;
  nlohmann::json post_json(const std::string& path, const nlohmann::json& body) const {
    return call(path, &body);
  }
  nlohmann::json get_json(const std::string& path) const { return call(path); }

  // POST with "stream": true; the events, expecting text/event-stream.
  EventStream stream(const std::string& path, nlohmann::json body) const;

  nlohmann::json engine_status() const { return get_json("/get_server_info")["engine"]; }
  std::string metrics() const;  // GET /metrics, expecting 200

  std::vector<int> tokenize(const nlohmann::json& body) const;
  std::string detokenize(const std::vector<int>& ids, bool skip_special_tokens) const;

 private:
  int port_;
  std::string api_key_;
};

// The value of one Prometheus series ("name" or "name{labels}") in /metrics text; NaN if absent.
double metric_value(const std::string& metrics, const std::string& series);

// One shell command that runs `mlaserve serve` on a free port (`--port 0`). The shell execs it,
// so that its pid is the server's; a script must exec the server in turn (scripts/serve.sh does).
struct ServerCommand {
  std::string line;
};

// A server started by the test and always stopped with it. It runs in a process group of its
// own, its output in a log file; the port comes from its "listening on" log line. When it does not
// come up the test fails, showing the log, and port() is 0. Construct it on a thread that outlives
// it (the main thread): the server gets SIGKILL when that thread ends, so that even a test killed
// by a timeout leaves no server behind.
class ServerProcess {
 public:
  // `mlaserve serve --port 0 --dtype float32 --kv-cache-memory 64 <flags>`, without the
  // --dtype float32 when <flags> sets --dtype itself.
  explicit ServerProcess(const std::string& flags);
  // `wait_seconds`: how long the command may take to listen (a script that builds first).
  explicit ServerProcess(const ServerCommand& command, int wait_seconds = 60);
  // SIGTERM, up to 10 s to exit (else the test fails), then SIGKILL to whatever is left in its
  // process group (MPI ranks, in groups of their own, end with their mpirun).
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return port_; }
  std::string log() const { return read_text(tmp_ / "log"); }
  // Waits up to `seconds` for the server to end by itself: how it ended ("exited with status 1"),
  // or "" if it still runs.
  std::string wait_for_exit(double seconds) const;

  // POST (body given) or GET; the parsed JSON answer, expecting HTTP 200.
  nlohmann::json call(const std::string& path, const nlohmann::json* body = nullptr) const {
    return ServerApi(port_).call(path, body);
  }

  // POST /generate with input ids, greedy; the whole answer (output_ids, meta_info with each
  // token's logprob).
  nlohmann::json generate_json(const std::vector<int>& ids, int max_new) const;
  std::vector<int> generate(const std::vector<int>& ids, int max_new) const {
    return generate_json(ids, max_new).value("output_ids", std::vector<int>{});
  }

 private:
  // How the server ended ("exited with status 1"), or "" while it runs; it stays unreaped.
  std::string ended() const;

  TempDir tmp_;
  pid_t pid_ = -1;
  int port_ = 0;
};

// Polls `done` every 20 ms until it holds or `timeout` passes; whether it held.
bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout);

// One greedy /generate request: input ids and how many tokens to generate (EOS ignored).
struct GenerateJob {
  std::vector<int> prompt;
  int max_new = 0;
};

// Every job at once, each on its own connection; the answers (ServerProcess::generate_json) in
// job order.
std::vector<nlohmann::json> generate_concurrently(const ServerProcess& server,
                                                  const std::vector<GenerateJob>& jobs);
// generate_concurrently's output ids, in job order.
std::vector<std::vector<int>> outputs_concurrently(const ServerProcess& server,
                                                   const std::vector<GenerateJob>& jobs);

// n jobs of BOS and 3..142 tokens of brown-tiny's vocabulary (ids 100..3999), 4..24 new tokens.
std::vector<GenerateJob> mixed_jobs(int n);

// On a server started with `flags`: each job alone (one at a time), then all at once after
// /flush_cache; expects every job's tokens to be the same both times and returns the engine's
// status after.
nlohmann::json expect_batched_equals_alone(const std::string& flags,
                                           const std::vector<GenerateJob>& jobs);

}  // namespace mlaserve::testing
