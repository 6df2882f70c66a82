#include "support/command.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>

namespace mlaserve::testing {

std::string mlaserve_bin() {
  const char* bin = std::getenv("MLASERVE_BIN");
  return bin ? bin : "build/src/tools/mlaserve";
}

std::string shell_quoted(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

CommandResult run_command(const std::string& command) {
  CommandResult r{0, ""};
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed: " + command};
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) r.output.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

void expect_fails_fast(const std::string& command, double seconds,
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

nlohmann::json run_eval(const std::filesystem::path& model_dir, const nlohmann::json& input,
                        const std::string& flags, const TempDir& tmp, int max_new_tokens) {
  write_json(tmp / "in.json", input);
  const auto r =
      run_command(mlaserve_bin() + " eval --model " + model_dir.string() + " --input " +
                  (tmp / "in.json").string() + " --output " + (tmp / "out.json").string() +
                  " --max-new-tokens " + std::to_string(max_new_tokens) + " " + flags);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.exit_code == 0 ? read_json(tmp / "out.json") : nlohmann::json::object();
}

CommandResult run_mlaserve(const std::string& args, const std::filesystem::path& stdout_file) {
  return run_command("{ " + mlaserve_bin() + " " + args + " > " + stdout_file.string() + "; }");
}

nlohmann::json run_float64_reference(const std::filesystem::path& model_dir,
                                     const nlohmann::json& input, int max_new_tokens,
                                     const TempDir& tmp, const std::string& script) {
  write_json(tmp / "reference_in.json", input);
  const auto ref = run_command(
      "python3 tests/reference/" + script + " --model " + model_dir.string() + " --input " +
      (tmp / "reference_in.json").string() + " --output " + (tmp / "reference_out.json").string() +
      " --max-new-tokens " + std::to_string(max_new_tokens));
  EXPECT_EQ(ref.exit_code, 0) << ref.output;
  return ref.exit_code == 0 ? read_json(tmp / "reference_out.json") : nlohmann::json::object();
}

PerplexityResult run_perplexity(const std::string& args, const TempDir& tmp) {
  PerplexityResult r;
  r.command = run_mlaserve("perplexity " + args, tmp / "stdout.txt");
  std::ifstream out(tmp / "stdout.txt");
  for (std::string line; std::getline(out, line);) r.stdout_last_line = line;
  r.command.output += "\nlast line of stdout: " + r.stdout_last_line;
  std::smatch m;
  static const std::regex kLine(
      R"(mean_nll=([0-9.]+) perplexity=([0-9.]+)( mean_kld=(-?[0-9.e+-]+) top1_agreement=([0-9.]+))?)");
  if (std::regex_match(r.stdout_last_line, m, kLine)) {
    r.mean_nll = std::stod(m[1]);
    r.perplexity = std::stod(m[2]);
    if (m[3].matched) {
      r.mean_kld = std::stod(m[4]);
      r.top1_agreement = std::stod(m[5]);
    }
  }
  return r;
}

}  // namespace mlaserve::testing
