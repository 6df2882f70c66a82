// Several hosts on one machine: scripts/multihost.sh makes two (network namespaces joined by a
// bridge, each with its own address) and runs mpirun inside host A with 2 ranks on each, over
// TCP. eval equals the golden logits under DP attention with dp_linear and under EP-MoE; serve
// answers a client inside host A and bench-serving completes, with and without 20 ms added each
// way to host B's link. A rank killed, a link cut or a host frozen mid-decode ends the whole job
// within its deadline, naming the rank and the step, and every waiting client gets an error.
// Skips, saying why, where namespaces cannot be made (not root, no iproute2, no mpirun).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <mutex>
#include <sstream>
#include <thread>

#include "bench_serving/runner.h"
#include "support/golden.h"
#include "support/server_process.h"

namespace mlaserve::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// scripts/multihost.sh's two hosts for the object's lifetime, named after this process so that
// concurrent tests do not collide.
class TwoHosts {
 public:
  static constexpr int kUnavailable = 77;  // `multihost.sh check`: this machine cannot have them

  TwoHosts() : prefix_("mh" + std::to_string(getpid() % 100000)) {
    const CommandResult check = run_command(script() + " check");
    if (check.exit_code == kUnavailable) {
      unavailable_ = check.output;
      return;
    }
    EXPECT_EQ(check.exit_code, 0) << check.output;
    const CommandResult up = run_command(script() + " up");
    EXPECT_EQ(up.exit_code, 0) << up.output;
    up_ = up.exit_code == 0;
  }
  ~TwoHosts() {
    if (up_) run_command(script() + " down");
  }
  TwoHosts(const TwoHosts&) = delete;
  TwoHosts& operator=(const TwoHosts&) = delete;

  // Why the hosts cannot exist here ("" when they are up).
  const std::string& unavailable() const { return unavailable_; }
  bool up() const { return up_; }

  std::string script() const {
    return "env MLASERVE_NETNS_PREFIX=" + prefix_ + " MLASERVE_BIN=" + mlaserve_bin() +
           " scripts/multihost.sh";
  }
  // `mlaserve ARGS` on both hosts, 2 ranks each, rank 0 on host A.
  std::string run(const std::string& args) const { return script() + " run -- " + args; }
  std::string netns(char host) const { return prefix_ + (host == 'A' ? "-a" : "-b"); }
  void control(const std::string& subcommand) const {
    const CommandResult r = run_command(script() + " " + subcommand);
    EXPECT_EQ(r.exit_code, 0) << subcommand << ": " << r.output;
  }

  // The mlaserve processes (ranks) running in a host.
  std::vector<pid_t> ranks(char host) const {
    const std::string exe = std::filesystem::canonical(mlaserve_bin()).string();
    std::vector<pid_t> pids;
    std::istringstream list(run_command("ip netns pids " + netns(host)).output);
    for (pid_t pid; list >> pid;) {
      std::error_code ec;
      const auto target =
          std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec);
      if (!ec && target.string() == exe) pids.push_back(pid);
    }
    return pids;
  }

 private:
  std::string prefix_;
  std::string unavailable_;
  bool up_ = false;
};

// This thread in a host's network namespace while in scope: its sockets (and those of threads
// it starts) reach the servers bound to that host's loopback.
class InHost {
 public:
  InHost(const TwoHosts& hosts, char host) : own_(open("/proc/thread-self/ns/net", O_RDONLY)) {
    const int target = open(("/var/run/netns/" + hosts.netns(host)).c_str(), O_RDONLY);
    EXPECT_GE(target, 0) << hosts.netns(host);
    EXPECT_EQ(setns(target, CLONE_NEWNET), 0) << std::strerror(errno);
    close(target);
  }
  ~InHost() {
    setns(own_, CLONE_NEWNET);
    close(own_);
  }
  InHost(const InHost&) = delete;
  InHost& operator=(const InHost&) = delete;

 private:
  int own_;
};

// Polls `done` until it holds (true) or `seconds` pass (false).
bool wait_until(const std::function<bool()>& done, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(50ms);
  }
  return true;
}

std::string server_flags(const std::string& model_and_layout) {
  return "serve --port 0 --dtype float32 --kv-cache-memory 64 " + model_and_layout;
}

class MultiHost : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { hosts_ = new TwoHosts(); }
  static void TearDownTestSuite() {
    delete hosts_;
    hosts_ = nullptr;
  }
  void SetUp() override {
    if (!hosts_->unavailable().empty())
      GTEST_SKIP() << "no network namespaces here: " << hosts_->unavailable();
    ASSERT_TRUE(hosts_->up());
  }

  // eval of every golden prompt on both hosts, checked against the float64 reference; returns
  // the seconds it took.
  static double expect_golden(const std::string& model, const std::string& layout) {
    SCOPED_TRACE(model + " " + layout);
    const GoldenModel golden(model);
    TempDir tmp;
    write_json(tmp / "in.json", golden.eval_input());
    const auto started = std::chrono::steady_clock::now();
    const CommandResult r = run_command(
        hosts_->run("eval --model " + golden.dir().string() + " --input " +
                    (tmp / "in.json").string() + " --output " + (tmp / "out.json").string() +
                    " --max-new-tokens " + std::to_string(golden.n_greedy()) +
                    " --dtype float32 --all-logits --step-logits " + layout));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    EXPECT_EQ(r.exit_code, 0) << r.output;
    if (r.exit_code != 0) return seconds;
    const json out = read_json(tmp / "out.json");
    for (size_t i = 0; i < golden.prompts(); ++i) golden.check(out["prompts"][i], i, Bounds{});
    return seconds;
  }

  // serve on both hosts answers greedy requests as eval does on one, and bench-serving's 200
  // requests from inside host A all complete; returns bench-serving's metrics.
  static bench_serving::BenchmarkMetrics expect_serving() {
    const std::string layout = "--model models/brown-tiny --tp 4 --dp 2 --enable-dp-attention";
    TempDir tmp;
    const std::vector<int> prompt = {0, 101, 202, 303, 404, 505, 606};
    const json want = run_eval("models/brown-tiny", {{"prompts", {{{"ids", prompt}}}}},
                               "--dtype float32", tmp, 12);
    const ServerProcess server(ServerCommand{hosts_->run(server_flags(layout))}, 120);
    if (server.port() == 0) return {};
    const InHost in_a(*hosts_, 'A');
    EXPECT_EQ(server.generate(prompt, 12), want["prompts"][0]["greedy"].get<std::vector<int>>());
    bench_serving::BenchOptions options;
    options.base_url = "http://127.0.0.1:" + std::to_string(server.port());
    options.dataset.num_prompts = 200;
    options.dataset.input_len = 32;
    options.dataset.output_len = 8;
    options.dataset.range_ratio = 1.0;
    options.max_concurrency = 16;
    options.progress = false;
    const bench_serving::BenchmarkRun run = bench_serving::run_benchmark(options, stdout);
    EXPECT_EQ(run.metrics.completed, 200);
    EXPECT_EQ(run.metrics.failed, 0) << run.metrics.first_error;
    return run.metrics;
  }

  static TwoHosts* hosts_;
};
TwoHosts* MultiHost::hosts_ = nullptr;

TEST_F(MultiHost, EvalEqualsGoldenUnderDpAttentionWithDpLinear) {
  expect_golden("tiny-v2", "--tp 4 --dp 2 --enable-dp-attention --enable-dp-linear");
}

TEST_F(MultiHost, EvalEqualsGoldenUnderEpMoe) {
  expect_golden("tiny-v3", "--tp 4 --enable-ep-moe");
}

void print_serving(const char* what, const bench_serving::BenchmarkMetrics& m) {
  std::printf(
      "multihost: bench-serving 200 requests %s: %.2f s, %.1f output tok/s, median TPOT "
      "%.1f ms, median TTFT %.1f ms\n",
      what, m.duration_s, m.output_throughput, m.tpot_ms.median, m.ttft_ms.median);
}

TEST_F(MultiHost, ServeAnswersAndBenchServingCompletes) {
  print_serving("plain", expect_serving());
}

// 20 ms each way on host B's link (tc netem, or mlaserve_link_delay where the kernel has no
// netem). The figures go to the test's output (bench/RESULTS.md quotes them): correctness is
// asserted, speed only reported.
TEST_F(MultiHost, TwentyMsOnOneLinkStaysCorrect) {
  const std::string layout = "--tp 4 --dp 2 --enable-dp-attention --enable-dp-linear";
  const double plain = expect_golden("tiny-v2", layout);
  hosts_->control("delay B 20");
  const double delayed = expect_golden("tiny-v2", layout);
  const bench_serving::BenchmarkMetrics metrics = expect_serving();
  hosts_->control("delay B 0");
  std::printf("multihost: tiny-v2 eval %.2f s plain, %.2f s with 20 ms each way on host B's link\n",
              plain, delayed);
  print_serving("with 20 ms each way on host B's link", metrics);
}

// --- Faults -------------------------------------------------------------------------------------

// A streaming request read as it arrives: how many events so far, and the whole body at the end.
class StreamingRequest {
 public:
  StreamingRequest(int port, const json& body)
      : thread_([this, port, body] {
          httplib::Client client("127.0.0.1", port);
          client.set_read_timeout(120, 0);
          httplib::Request request;
          request.method = "POST";
          request.path = "/v1/completions";
          request.body = body.dump();
          request.set_header("Content-Type", "application/json");
          request.content_receiver = [this](const char* data, size_t size, uint64_t, uint64_t) {
            std::lock_guard lock(mutex_);
            body_.append(data, size);
            events_ = static_cast<int>(count(body_, "data: "));
            return true;
          };
          const httplib::Result result = client.send(request);
          std::lock_guard lock(mutex_);
          status_ = result ? result->status : -1;
        }) {}
  ~StreamingRequest() {
    if (thread_.joinable()) thread_.join();
  }
  int events() const {
    std::lock_guard lock(mutex_);
    return events_;
  }
  // Waits for the response to end; its status (-1: the connection broke) and body.
  std::pair<int, std::string> finish() {
    thread_.join();
    return {status_, body_};
  }

 private:
  static size_t count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }
  mutable std::mutex mutex_;
  std::string body_;
  int events_ = 0, status_ = 0;
  std::thread thread_;
};

// What a fault left: how the job ended and how long after the fault, its log, and what the
// waiting clients got.
struct FaultOutcome {
  std::string how;
  double seconds = 0;
  std::string log;
  std::pair<int, std::string> stream;
  int queued_status = 0;
  std::string queued_body;
};

class MultiHostFault : public MultiHost {
 protected:
  // serve on both hosts, 1 running request per DP group: two streams decode, a third request
  // waits in the queue. Once the first stream has tokens, `fault` runs; the job must end within
  // `seconds` and leave no rank behind on either host.
  static FaultOutcome serve_through(const std::function<void()>& fault, double seconds,
                                    const std::string& extra_flags = "") {
    FaultOutcome outcome;
    const ServerProcess server(ServerCommand{hosts_->run(server_flags(
                                   "--model models/brown-tiny --tp 4 --dp 2 --enable-dp-attention "
                                   "--max-running-requests 2 " +
                                   extra_flags))},
                               120);
    if (server.port() == 0) return outcome;
    // The clients' threads start inside host A and stay there; this thread leaves before the
    // fault, which needs the machine's own namespace (the links' outer ends live there).
    auto in_a = std::make_unique<InHost>(*hosts_, 'A');
    const json long_request = {{"model", "brown-tiny"},
                               {"prompt", "Once upon a time"},
                               {"max_tokens", 2000},
                               {"ignore_eos", true},
                               {"stream", true}};
    StreamingRequest first(server.port(), long_request), second(server.port(), long_request);
    EXPECT_TRUE(wait_until([&] { return first.events() >= 3 && second.events() >= 1; }, 60))
        << "the streams did not start\n"
        << server.log();
    auto queued = std::async(std::launch::async, [&] {
      httplib::Client client("127.0.0.1", server.port());
      client.set_read_timeout(120, 0);
      json body = long_request;
      body["stream"] = false;
      return client.Post("/v1/completions", body.dump(), "application/json");
    });
    EXPECT_TRUE(wait_until(
        [&] {
          return ServerApi(server.port())
                     .get_json("/get_server_info")["engine"]["waiting_requests"] == 1;
        },
        30))
        << "the third request did not queue";
    in_a.reset();
    const auto faulted = std::chrono::steady_clock::now();
    fault();
    outcome.how = server.wait_for_exit(seconds + 30);
    outcome.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - faulted).count();
    outcome.stream = first.finish();
    second.finish();
    const httplib::Result queued_result = queued.get();
    outcome.queued_status = queued_result ? queued_result->status : -1;
    outcome.queued_body = queued_result ? queued_result->body : "";
    outcome.log = server.log();
    EXPECT_TRUE(
        wait_until([&] { return hosts_->ranks('A').empty() && hosts_->ranks('B').empty(); }, 10))
        << "ranks left running";
    return outcome;
  }

  // The job ended by itself, non-zero, within `seconds`.
  static void expect_job_ended(const FaultOutcome& o, double seconds) {
    EXPECT_NE(o.how, "") << "the job still ran " << o.seconds << " s after the fault\n" << o.log;
    EXPECT_EQ(o.how.find("status 0"), std::string::npos) << o.how;
    EXPECT_LT(o.seconds, seconds) << o.log;
    std::printf("multihost fault: the job ended %.1f s after the fault (%s)\n", o.seconds,
                o.how.c_str());
  }

  // ... and rank 0 answered the running stream with an error event and the queued request with
  // an error status in OpenAI's shape.
  static void expect_clients_told(const FaultOutcome& o) {
    const auto& [status, body] = o.stream;
    EXPECT_NE(body.find("data: {\"error\""), std::string::npos)
        << "the stream (status " << status << ") got no error event:\n"
        << body.substr(body.size() > 2000 ? body.size() - 2000 : 0);
    EXPECT_GE(o.queued_status, 500) << o.queued_body;
    EXPECT_NE(o.queued_body.find("{\"error\":"), std::string::npos) << o.queued_body;
  }
};

// A dead rank: mpirun sees it at once, names it and its host, and ends the others; its kill
// sequence opens with a SIGCONT, on which rank 0 (blocked in a collective with the dead rank)
// answers its clients with an error before the SIGKILL a second later.
TEST_F(MultiHostFault, RankKilledOnTheRemoteHostEndsTheJob) {
  pid_t victim = 0;
  const FaultOutcome o = serve_through(
      [&] {
        const std::vector<pid_t> remote = hosts_->ranks('B');
        ASSERT_EQ(remote.size(), 2u);
        victim = remote.back();
        kill(victim, SIGKILL);
      },
      10);
  expect_job_ended(o, 10);
  EXPECT_NE(o.log.find("with PID " + std::to_string(victim) +
                       " on node 10.213.14.2 exited on "
                       "signal 9"),
            std::string::npos)
      << o.log;
  expect_clients_told(o);
}

// A cut link: no error ever reaches MPI; mpirun's keep-alive probes find the host gone.
TEST_F(MultiHostFault, LinkCutMidStepEndsTheJob) {
  const FaultOutcome o = serve_through([&] { hosts_->control("cut B"); }, 30);
  expect_job_ended(o, 30);
  expect_clients_told(o);
  // mpirun names the host it lost (its keep-alive probes go unanswered); rank 0, the wait and
  // the step it was in when mpirun began to end the job.
  EXPECT_NE(o.log.find("lost communication with a remote daemon"), std::string::npos) << o.log;
  EXPECT_NE(o.log.find("on node 10.213.14.2"), std::string::npos) << o.log;
  EXPECT_NE(o.log.find("mlaserve: rank 0: mpirun is ending the job"), std::string::npos) << o.log;
  EXPECT_NE(o.log.find(" of step "), std::string::npos) << o.log;
  // The cut host is gone for the rest of the suite: bring both back.
  hosts_->control("up");
}

// A link cut while the server is idle: no step is in flight, but mpirun's keep-alive probes
// (and the idle server's keep-alive steps, every third of the collective timeout) still find
// the host gone, and the job ends by itself, leaving no rank on either host.
// Cut on host B, or on host A: rank 0's own host, whose mpirun and HTTP server stay up while
// host B's ranks are left without rank 0 and must not linger.
class LinkCutWhileIdle : public MultiHostFault, public ::testing::WithParamInterface<char> {};

TEST_P(LinkCutWhileIdle, EndsTheJobOnBothHosts) {
  const ServerProcess server(
      ServerCommand{hosts_->run(server_flags("--model models/brown-tiny --tp 4 --dp 2 "
                                             "--enable-dp-attention"))},
      120);
  ASSERT_GT(server.port(), 0);
  const auto cut = std::chrono::steady_clock::now();
  hosts_->control(std::string("cut ") + GetParam());
  const std::string how = server.wait_for_exit(60);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - cut).count();
  const std::string log = server.log();
  hosts_->control("up");  // for the rest of the suite
  EXPECT_NE(how, "") << "the idle job still ran 60 s after its link was cut\n" << log;
  EXPECT_EQ(how.find("status 0"), std::string::npos) << how;
  EXPECT_LT(seconds, 30) << log;
  EXPECT_TRUE(log.find("lost communication with a remote daemon") != std::string::npos ||
              log.find("collective timeout: rank ") != std::string::npos)
      << log;
  EXPECT_TRUE(
      wait_until([&] { return hosts_->ranks('A').empty() && hosts_->ranks('B').empty(); }, 10))
      << "ranks left running";
  std::printf("multihost fault: the idle job ended %.1f s after host %c's link was cut (%s)\n",
              seconds, GetParam(), how.c_str());
}

INSTANTIATE_TEST_SUITE_P(MultiHostIdle, LinkCutWhileIdle, ::testing::Values('B', 'A'),
                         [](const auto& info) { return std::string("Host") + info.param; });

// A frozen host (its ranks stopped): its kernel still answers TCP, so only the collective
// watchdog can tell; the rank that times out names its host, the wait and the step.
TEST_F(MultiHostFault, HostThatStopsAnsweringEndsTheJob) {
  std::vector<pid_t> frozen;
  const FaultOutcome o = serve_through(
      [&] {
        frozen = hosts_->ranks('B');
        ASSERT_EQ(frozen.size(), 2u);
        for (pid_t pid : frozen) kill(pid, SIGSTOP);
      },
      30);
  expect_job_ended(o, 30);
  expect_clients_told(o);
  // Rank 0 or 1 (host A) times out first, whichever ends the job.
  const std::string timed_out = "collective timeout: rank ";
  const size_t at = o.log.find(timed_out);
  ASSERT_NE(at, std::string::npos) << o.log;
  const std::string line = o.log.substr(at, o.log.find('\n', at) - at);
  EXPECT_NE(line.find(" on host " + hosts_->netns('A') + " waited "), std::string::npos) << line;
  EXPECT_NE(line.find(" of step "), std::string::npos) << line;
}

}  // namespace
}  // namespace mlaserve::testing
