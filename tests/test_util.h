// Helpers for tests that drive the mlaserve binary.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mlaserve::testing {

// Path of the mlaserve binary (ctest sets MLASERVE_BIN).
inline std::string mlaserve_bin() {
  const char* bin = std::getenv("MLASERVE_BIN");
  return bin ? bin : "build/src/tools/mlaserve";
}

struct CommandResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};

inline CommandResult run_command(const std::string& command) {
  CommandResult r{0, ""};
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) r.output.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Runs a job that must fail on its own: a non-zero exit within `seconds` (under `timeout`, so a
// hang fails the test rather than stalling the suite), with each of `messages` in its output.
inline void expect_fails_fast(const std::string& command, double seconds,
                              const std::vector<std::string>& messages) {
  const auto start = std::chrono::steady_clock::now();
  const CommandResult r =
      run_command("timeout -k 5 " + std::to_string(static_cast<int>(seconds) + 10) + " " + command);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.exit_code, 124) << "timed out: the job hung\n" << r.output;
  EXPECT_LT(took, seconds) << r.output;
  for (const std::string& m : messages)
    EXPECT_NE(r.output.find(m), std::string::npos) << m << "\n" << r.output;
}

inline nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

inline void write_json(const std::filesystem::path& path, const nlohmann::json& j) {
  std::ofstream(path) << j.dump();
}

// A fresh temporary directory, removed when the object goes away.
class TempDir {
 public:
  TempDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "mlaserve-test-XXXXXX").string();
    path_ = mkdtemp(templ.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Runs `mlaserve eval` on the model in `model_dir`; returns the output JSON (exit code checked).
inline nlohmann::json run_eval(const std::filesystem::path& model_dir, const nlohmann::json& input,
                               const std::string& flags, const TempDir& tmp, int max_new_tokens) {
  write_json(tmp / "in.json", input);
  const auto r =
      run_command(mlaserve_bin() + " eval --model " + model_dir.string() + " --input " +
                  (tmp / "in.json").string() + " --output " + (tmp / "out.json").string() +
                  " --max-new-tokens " + std::to_string(max_new_tokens) + " " + flags);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.exit_code == 0 ? read_json(tmp / "out.json") : nlohmann::json::object();
}

inline double relative_l2(const std::vector<float>& got, const float* want, size_t n) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < n; ++i) {
    diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(diff / norm);
}

}  // namespace mlaserve::testing
