// bench-serving against the real `mlaserve serve` (brown-tiny, on a free port): 50 requests all
// succeed, the table has every line, and the JSONL record's token totals equal the server's own
// counters (/metrics), which also confirms that each prompt has exactly its token count on the
// server's side. Needs MLASERVE_BIN (set by ctest); skipped without it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include "bench_serving/http_client.h"
#include "bench_serving/report.h"
#include "bench_serving/runner.h"
#include "bench_serving/test_util.h"

namespace mlaserve::bench_serving {
namespace {

namespace fs = std::filesystem;

// `mlaserve serve --port 0` in its own process group, its output in a log file; the port is
// read from the log. Stopped with SIGTERM (SIGKILL to the group if it does not exit).
class ServeProcess {
 public:
  ServeProcess(const std::string& binary, const fs::path& log) : log_(log) {
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      execl(binary.c_str(), binary.c_str(), "serve", "--model", "models/brown-tiny", "--port", "0",
            static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~ServeProcess() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    for (int i = 0; i < 100; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    kill(-pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  // The server's URL once it listens, or nullopt if it did not within `timeout`.
  std::optional<std::string> wait_for_url(std::chrono::seconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    const std::regex listening(R"(listening on (http://127\.0\.0\.1:\d+))");
    while (std::chrono::steady_clock::now() < deadline) {
      std::smatch match;
      const std::string text = log_text();
      if (std::regex_search(text, match, listening)) return match[1].str();
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = 0;
        return std::nullopt;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return std::nullopt;
  }
  std::string log_text() const {
    std::ifstream file(log_);
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
  }

 private:
  fs::path log_;
  mutable pid_t pid_ = -1;
};

// A counter from the Prometheus text of GET /metrics.
int64_t counter(const HttpClient& client, const std::string& name) {
  const HttpResult metrics = client.get("/metrics");
  EXPECT_TRUE(metrics.ok()) << metrics.describe();
  const std::regex line("\n" + name + R"( (\d+))");
  std::smatch match;
  if (!std::regex_search(metrics.body, match, line)) {
    ADD_FAILURE() << name << " not in /metrics";
    return -1;
  }
  return std::stoll(match[1].str());
}

TEST(MlaserveServe, FiftyRequestsMatchTheServersCounters) {
  const char* binary = std::getenv("MLASERVE_BIN");
  if (binary == nullptr) GTEST_SKIP() << "MLASERVE_BIN is not set (run through ctest)";
  const fs::path dir = fs::temp_directory_path() / ("bench_serve_" + std::to_string(getpid()));
  fs::create_directories(dir);
  ServeProcess serve(binary, dir / "serve.log");
  const std::optional<std::string> url = serve.wait_for_url(std::chrono::seconds(180));
  ASSERT_TRUE(url) << "mlaserve serve did not start:\n" << serve.log_text();

  const HttpClient client(parse_server_url(*url), 30.0);
  const int64_t prompt_before = counter(client, "mlaserve_prompt_tokens_total");
  const int64_t generated_before = counter(client, "mlaserve_generation_tokens_total");
  BenchOptions options;
  options.base_url = *url;
  options.dataset.num_prompts = 50;
  options.dataset.input_len = 128;
  options.dataset.output_len = 32;
  options.dataset.range_ratio = 1.0;  // so the warm-up request is 128 + 32 tokens too
  options.max_concurrency = 8;
  options.progress = false;
  const BenchmarkRun run = run_benchmark(options, stdout);
  const std::string table = format_table(run.options, run.metrics);
  std::fputs(table.c_str(), stdout);
  testing::expect_full_table(table);
  EXPECT_EQ(run.metrics.completed, 50);
  EXPECT_EQ(run.metrics.failed, 0) << run.metrics.first_error;

  const fs::path jsonl = dir / "result.jsonl";
  append_jsonl(jsonl.string(), result_record(run.options, run.metrics));
  std::ifstream file(jsonl);
  std::string line;
  ASSERT_TRUE(std::getline(file, line));
  const nlohmann::json record = nlohmann::json::parse(line);
  const int64_t generated = counter(client, "mlaserve_generation_tokens_total") - generated_before;
  const int64_t prompt = counter(client, "mlaserve_prompt_tokens_total") - prompt_before;
  constexpr int64_t kWarmUpOutput = 32, kWarmUpPrompt = 128 + 1, kBos = 1;
  EXPECT_EQ(record["total_output_tokens"].get<int64_t>(), generated - kWarmUpOutput);
  EXPECT_EQ(record["total_output_tokens"].get<int64_t>(), 50 * 32);
  EXPECT_EQ(record["total_input_tokens"].get<int64_t>() + 50 * kBos, prompt - kWarmUpPrompt);
  EXPECT_EQ(record["total_input_tokens"].get<int64_t>(), 50 * 128);
  EXPECT_EQ(record["completed"], 50);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mlaserve::bench_serving
