#include "support/server_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <future>
#include <regex>
#include <sstream>
#include <thread>

#include "support/command.h"

namespace mlaserve::testing {

httplib::Client ServerApi::client() const {
  httplib::Client client("127.0.0.1", port_);
  if (!api_key_.empty()) client.set_bearer_token_auth(api_key_);
  client.set_read_timeout(300, 0);
  return client;
}

httplib::Result ServerApi::post(const std::string& path, const std::string& body) const {
  return client().Post(path, body, "application/json");
}

nlohmann::json ServerApi::call(const std::string& path, const nlohmann::json* body) const {
  const httplib::Result result = body ? post(path, body->dump()) : get(path);
  EXPECT_TRUE(result) << path << ": no response";
  if (!result) return nlohmann::json::object();
  EXPECT_EQ(result->status, 200) << path << ": " << result->body;
  return nlohmann::json::parse(result->body, nullptr, /*allow_exceptions=*/false);
}

EventStream ServerApi::stream(const std::string& path, nlohmann::json body) const {
  body["stream"] = true;
  const httplib::Result result = post(path, body.dump());
  EXPECT_TRUE(result) << path << ": no response";
  if (!result) return {};
  EXPECT_EQ(result->get_header_value("Content-Type"), "text/event-stream") << result->body;
  EventStream stream = parse_event_stream(result->body);
  stream.status = result->status;
  return stream;
}

std::string ServerApi::metrics() const {
  const httplib::Result result = get("/metrics");
  EXPECT_TRUE(result && result->status == 200);
  return result ? result->body : std::string();
}

std::vector<int> ServerApi::tokenize(const nlohmann::json& body) const {
  return post_json("/tokenize", body).value("tokens", std::vector<int>{});
}

std::string ServerApi::detokenize(const std::vector<int>& ids, bool skip_special_tokens) const {
  const nlohmann::json body = {{"tokens", ids}, {"skip_special_tokens", skip_special_tokens}};
  return post_json("/detokenize", body).value("text", std::string());
}

double metric_value(const std::string& metrics, const std::string& series) {
  std::istringstream lines(metrics);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return std::nan("");
}

ServerProcess::ServerProcess(const std::string& flags)
    : ServerProcess(ServerCommand{
          mlaserve_bin() + " serve --port 0 --kv-cache-memory 64 " +
          (flags.find("--dtype") == std::string::npos ? "--dtype float32 " : "") + flags}) {}

ServerProcess::ServerProcess(const ServerCommand& command, int wait_seconds) {
  const std::string log_path = (tmp_ / "log").string();
  const std::string line = "exec " + command.line;
  std::ofstream(log_path).close();  // so that log() reads it from the start
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    // Only async-signal-safe calls from here to exec: the test process has other threads.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // a test killed (a ctest timeout) takes its server along
    if (getppid() != parent) _exit(127);
    const int fd = open(log_path.c_str(), O_WRONLY | O_TRUNC);
    if (fd < 0) _exit(127);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
    execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  if (pid_ < 0) {
    ADD_FAILURE() << "cannot fork for " << command.line << ": " << std::strerror(errno);
    return;
  }
  setpgid(pid_, pid_);  // (also here, so that the group exists whichever runs first)
  const std::regex listening(R"(listening on http://127\.0\.0\.1:(\d+)\D)");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(wait_seconds);
  for (;;) {
    std::smatch match;
    const std::string text = log();
    if (std::regex_search(text, match, listening)) {
      port_ = std::stoi(match[1].str());
      return;
    }
    if (const std::string how = ended(); !how.empty()) {
      ADD_FAILURE() << "the server " << how << " before listening: " << command.line << "\n"
                    << log();
      return;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      ADD_FAILURE() << "the server did not listen within " << wait_seconds << " s: " << command.line
                    << "\n"
                    << log();
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

ServerProcess::~ServerProcess() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  for (int i = 0; i < 100 && ended().empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // A server that ignores SIGTERM would hang a real deployment's shutdown, so it fails the test.
  if (ended().empty()) ADD_FAILURE() << "the server did not exit within 10 s of SIGTERM\n" << log();
  // The group id stays taken until the server is reaped, so this reaches no other process.
  kill(-pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
}

std::string ServerProcess::wait_for_exit(double seconds) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::string how = ended();
  while (how.empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    how = ended();
  }
  return how;
}

std::string ServerProcess::ended() const {
  siginfo_t info{};
  if (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    return "is gone";
  }
  if (info.si_pid != pid_) return "";
  if (info.si_code == CLD_EXITED) return "exited with status " + std::to_string(info.si_status);
  return "was killed by signal " + std::to_string(info.si_status);
}

nlohmann::json ServerProcess::generate_json(const std::vector<int>& ids, int max_new) const {
  const nlohmann::json body = {
      {"input_ids", ids},
      {"return_logprob", true},
      {"sampling_params", {{"max_new_tokens", max_new}, {"temperature", 0}, {"ignore_eos", true}}}};
  return call("/generate", &body);
}

bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::vector<nlohmann::json> generate_concurrently(const ServerProcess& server,
                                                  const std::vector<GenerateJob>& jobs) {
  std::vector<std::future<nlohmann::json>> futures;
  for (const GenerateJob& job : jobs) {
    futures.push_back(std::async(std::launch::async, [&server, &job] {
      return server.generate_json(job.prompt, job.max_new);
    }));
  }
  std::vector<nlohmann::json> answers;
  for (auto& future : futures) answers.push_back(future.get());
  return answers;
}

std::vector<std::vector<int>> outputs_concurrently(const ServerProcess& server,
                                                   const std::vector<GenerateJob>& jobs) {
  std::vector<std::vector<int>> outputs;
  for (const nlohmann::json& answer : generate_concurrently(server, jobs))
    outputs.push_back(answer.value("output_ids", std::vector<int>{}));
  return outputs;
}

std::vector<GenerateJob> mixed_jobs(int n) {
  std::vector<GenerateJob> jobs;
  for (int i = 0; i < n; ++i) {
    GenerateJob job{{0}, 4 + (i * 7) % 21};
    for (int j = 0; j < 3 + (i * 29) % 140; ++j)
      job.prompt.push_back(100 + (i * 37 + j * 11) % 3900);
    jobs.push_back(job);
  }
  return jobs;
}

nlohmann::json expect_batched_equals_alone(const std::string& flags,
                                           const std::vector<GenerateJob>& jobs) {
  ServerProcess server(flags);
  EXPECT_GT(server.port(), 0);
  if (server.port() == 0) return {};
  std::vector<std::vector<int>> alone;
  for (const GenerateJob& job : jobs) alone.push_back(server.generate(job.prompt, job.max_new));
  const nlohmann::json empty = nlohmann::json::object();
  server.call("/flush_cache", &empty);
  const std::vector<std::vector<int>> batched = outputs_concurrently(server, jobs);
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(alone[i].size(), static_cast<size_t>(jobs[i].max_new)) << "request " << i;
    EXPECT_EQ(batched[i], alone[i]) << "request " << i << " with " << flags;
  }
  return server.call("/get_server_info")["engine"];
}

}  // namespace mlaserve::testing
