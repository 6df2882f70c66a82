// A rank that fails ends the whole job within seconds, with the failing rank's message; never a
// hang.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstring>
#include <sstream>
#include <thread>
#include <vector>

#include "support/golden.h"
#include "support/server_process.h"

namespace mlaserve::testing {
namespace {

using namespace std::chrono_literals;

// Rewrites a safetensors file without one tensor's header entry (its bytes stay, unreferenced).
void drop_tensor(const std::filesystem::path& path, const std::string& name) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, header_len));
  ASSERT_EQ(header.erase(name), 1u);
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t new_len = text.size();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(&new_len), 8);
  out << text << bytes.substr(8 + header_len);
}

// Polls the file at `path` until it contains `text` (true) or `timeout` passes (false).
bool wait_for_text(const std::string& path, const std::string& text,
                   std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (read_text(path).find(text) == std::string::npos) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

// A bad file that only one rank reads: under EP-MoE rank 3 of 4 owns experts 12..15; removing
// expert 13 from the checkpoint fails rank 3 alone while the others wait in a collective.
TEST(RankFailure, LoadErrorOnOneRankEndsTheJobWithItsMessage) {
  TempDir tmp;
  const auto model = tmp / "model";
  std::filesystem::copy("tests/data/models/tiny-v2", model);
  const std::string dropped = "model.layers.1.mlp.experts.13.up_proj.weight";
  drop_tensor(model / "model.safetensors", dropped);
  write_json(tmp / "in.json", {{"prompts", {{{"ids", {1, 2, 3}}}}}});
  expect_fails_fast(mlaserve_bin() + " eval --model " + model.string() + " --input " +
                        (tmp / "in.json").string() + " --output " + (tmp / "out.json").string() +
                        " --tp 4 --dp 2 --enable-dp-attention --enable-ep-moe",
                    30, {"rank 3: error:", "missing tensor '" + dropped + "'"});
}

// How a job ended after one of its ranks got a signal in the middle of a long generation.
struct SignalledJob {
  int exit_code = -1;
  double seconds = 0;  // from the signal to the job's end
  std::string log;
};

// Runs a 4-rank eval of 4000 tokens with `flags`, sends `signal` to its last rank once the ranks
// generate, and waits for the job to end (at most 120 s, under `timeout`).
SignalledJob signal_one_rank_mid_run(int signal, const std::string& flags) {
  TempDir tmp;
  write_json(tmp / "in.json", {{"prompts", {{{"ids", {1}}}}}});
  const std::string marker = (tmp / "in.json").string();
  const std::string cmd =
      "timeout 120 " + mlaserve_bin() + " eval --model tests/data/models/tiny-v2 --input " +
      marker + " --output " + (tmp / "out.json").string() + " --tp 4 --max-new-tokens 4000 " +
      flags + " > " + (tmp / "log.txt").string() + " 2>&1; echo $? > " + (tmp / "rc.txt").string();
  std::thread job([&] { std::system(cmd.c_str()); });
  // The ranks run the binary by its absolute path (mpirun re-exec); mpirun's own command line
  // starts with "mpirun" and the shell's with "sh", so this pattern matches the 4 ranks only.
  const std::string ranks = "pgrep -f '^/[^ ]*mlaserve eval .*" + marker + "'";
  std::string pids;
  for (int i = 0; i < 300 && std::count(pids.begin(), pids.end(), '\n') < 4; ++i) {
    std::this_thread::sleep_for(100ms);
    pids = run_command(ranks).output;
  }
  EXPECT_EQ(std::count(pids.begin(), pids.end(), '\n'), 4) << pids;
  // Signal in the step loop, where the other ranks wait for the victim in the step's
  // collectives. Not ASSERT: `job` must be joined, and the signal ends it either way.
  const std::string log_path = (tmp / "log.txt").string();
  EXPECT_TRUE(wait_for_text(log_path, "eval: all ranks loaded", 60s))
      << "the ranks did not start generating within 60 s\n"
      << read_text(log_path);
  const int victim = std::stoi(pids.substr(pids.rfind('\n', pids.size() - 2) + 1));
  const auto signalled_at = std::chrono::steady_clock::now();
  ::kill(victim, signal);
  job.join();
  SignalledJob result;
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled_at).count();
  result.exit_code = std::stoi(run_command("cat " + (tmp / "rc.txt").string()).output);
  result.log = read_text(log_path);
  EXPECT_NE(result.exit_code, 124) << "timed out: the job hung\n" << result.log;
  return result;
}

// kill -9 one rank in the middle of a long generation: mpirun ends the others.
TEST(RankFailure, KilledRankEndsTheJob) {
  const SignalledJob job = signal_one_rank_mid_run(SIGKILL, "");
  EXPECT_NE(job.exit_code, 0) << job.log;
  EXPECT_LT(job.seconds, 20) << job.log;
  EXPECT_NE(job.log.find("signal 9"), std::string::npos) << job.log;
}

// A rank that stops answering (SIGSTOP: alive, holding its sockets, never replying) leaves the
// others blocked in a collective with no error from MPI: the collective watchdog ends the job
// past --collective-timeout, naming the wait and the step.
TEST(RankFailure, FrozenRankEndsTheJobAtTheCollectiveTimeout) {
  const SignalledJob job = signal_one_rank_mid_run(SIGSTOP, "--collective-timeout 3");
  EXPECT_NE(job.exit_code, 0) << job.log;
  // 3 s of deadline, 5 s of grace at most for the abort, and room for a loaded machine.
  EXPECT_LT(job.seconds, 20) << job.log;
  EXPECT_NE(job.log.find("collective timeout: rank "), std::string::npos) << job.log;
  EXPECT_NE(job.log.find(" of step "), std::string::npos) << job.log;
}

// The whole job stopped and resumed (a terminal's ^Z and fg, a paused VM) is not a failure:
// the time a rank stood still does not count against its own collective wait, and the SIGCONT
// that resumes it is not taken for mpirun's kill sequence. Stopped for 4 s against a 2.25 s
// deadline, the server answers afterwards, and again right after a second, shorter stop.
TEST(RankFailure, StoppedAndResumedJobKeepsServing) {
  ServerProcess server("--model models/brown-tiny --tp 2 --collective-timeout 2.25");
  ASSERT_GT(server.port(), 0);
  const std::string ranks =
      run_command("pgrep -f '^/[^ ]*mlaserve serve .*--collective-timeout 2.25'").output;
  std::vector<pid_t> pids;
  std::istringstream lines(ranks);
  for (std::string line; std::getline(lines, line);) pids.push_back(std::stoi(line));
  ASSERT_EQ(pids.size(), 2u) << ranks;
  const nlohmann::json body = {{"text", "The city"},
                               {"sampling_params", {{"max_new_tokens", 8}, {"temperature", 0}}}};
  const auto stop_for = [&](std::chrono::milliseconds pause) {
    for (pid_t pid : pids) ::kill(pid, SIGSTOP);
    std::this_thread::sleep_for(pause);
    for (pid_t pid : pids) ::kill(pid, SIGCONT);
  };
  stop_for(4000ms);
  std::this_thread::sleep_for(1000ms);  // idle in the step-plan broadcast, well past 0.3 s
  EXPECT_EQ(server.call("/generate", &body)["meta_info"]["completion_tokens"], 8);
  stop_for(1500ms);
  EXPECT_EQ(server.call("/generate", &body)["meta_info"]["completion_tokens"], 8);
  EXPECT_EQ(server.wait_for_exit(0), "") << server.log();
  EXPECT_EQ(server.log().find("collective timeout"), std::string::npos) << server.log();
  EXPECT_EQ(server.log().find("mpirun is ending the job"), std::string::npos) << server.log();
}

}  // namespace
}  // namespace mlaserve::testing
