// Shell commands and the mlaserve binary, run from the repository root.
#pragma once

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/files.h"

namespace mlaserve::testing {

// Path of the mlaserve binary (ctest sets MLASERVE_BIN).
std::string mlaserve_bin();

struct CommandResult {
  int exit_code;       // -1 when it did not exit normally
  std::string output;  // stdout and stderr together
};

// `text` as one shell word, in single quotes.
std::string shell_quoted(const std::string& text);

// Runs `command` through the shell and waits for it.
CommandResult run_command(const std::string& command);

// Runs a job that must fail on its own: a non-zero exit within `seconds` (under `timeout`, so a
// hang fails the test rather than stalling the suite), with each of `messages` in its output.
void expect_fails_fast(const std::string& command, double seconds,
                       const std::vector<std::string>& messages);

// Runs `mlaserve eval` on the model in `model_dir`; returns the output JSON (exit code checked).
nlohmann::json run_eval(const std::filesystem::path& model_dir, const nlohmann::json& input,
                        const std::string& flags, const TempDir& tmp, int max_new_tokens);

// Runs a float64 numpy forward (tests/reference/`script`: DeepSeek-V2/V3/V3.2's by default,
// deepseek_v4_reference.py for V4) on the model in `model_dir` for `input`
// ({"prompts": [{"ids": [...]}, ...]}) with greedy continuations of `max_new_tokens`; returns
// its output JSON, or an empty object after a failed expectation.
nlohmann::json run_float64_reference(const std::filesystem::path& model_dir,
                                     const nlohmann::json& input, int max_new_tokens,
                                     const TempDir& tmp,
                                     const std::string& script = "deepseek_reference.py");

// Runs `mlaserve <args>` with its stdout into `stdout_file`; the result's output is stderr.
CommandResult run_mlaserve(const std::string& args, const std::filesystem::path& stdout_file);

struct PerplexityResult {
  CommandResult command;
  std::string stdout_last_line;
  double mean_nll = NAN, perplexity = NAN;
  double mean_kld = NAN, top1_agreement = NAN;  // with --kl-divergence
};

// Runs `mlaserve perplexity <args>`; the result line must be the last line of stdout.
PerplexityResult run_perplexity(const std::string& args, const TempDir& tmp);

}  // namespace mlaserve::testing
