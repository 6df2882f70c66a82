// The official OpenAI and Anthropic Node SDKs drive the real server (brown-tiny): the scripts in
// tests/openai_sdk/ check the APIs as users' clients see them, one server per test. The SDKs (the
// versions pinned in tests/openai_sdk/package.json) are installed outside the source tree by
// scripts/openai_sdk.sh, which scripts/test.sh runs before ctest; node comes from
// scripts/setup.sh. Where either is missing the tests are skipped with the reason, as the
// clang_format check is without clang-format (CI installs both, and fails if it cannot).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/command.h"
#include "support/server_process.h"

namespace mlaserve::testing {
namespace {

constexpr const char* kModelName = "brown-tiny";
constexpr int kScriptTimeoutSeconds = 300;

// Why node cannot run the scripts here, or "" when it can.
std::string node_missing() {
  if (run_command("node --version").exit_code == 0) return "";
  return "node not found: run scripts/setup.sh (scripts/test.sh does)";
}

// The node_modules folder holding the SDKs (the scripts' NODE_PATH), from the install script.
std::string sdk_node_path() {
  std::string dir = run_command("bash scripts/openai_sdk.sh --dir").output;
  while (!dir.empty() && (dir.back() == '\n' || dir.back() == '\r')) dir.pop_back();
  return dir + "/node_modules";
}

// Why the npm package `package` (openai, @anthropic-ai/sdk) cannot be loaded from `node_path`,
// or "" when it can.
std::string sdk_missing(const std::string& node_path, const std::string& package) {
  if (std::filesystem::exists(node_path + "/" + package + "/package.json")) return "";
  return "the " + package + " package is not installed in " + node_path +
         ": run scripts/openai_sdk.sh (scripts/test.sh does)";
}

// Runs `node tests/openai_sdk/<script> BASE_URL MODEL` against a fresh server; it must exit 0.
// `package` is the SDK the script loads. BASE_URL is the OpenAI one (.../v1), for every script.
// `flags`: the server's parallel layout (and other flags).
void run_against_server(const std::string& script, const std::string& package = "openai",
                        const std::string& flags = "") {
  if (const std::string why = node_missing(); !why.empty()) GTEST_SKIP() << why;
  const std::string node_path = sdk_node_path();
  if (const std::string why = sdk_missing(node_path, package); !why.empty()) GTEST_SKIP() << why;
  const ServerProcess server(flags);
  ASSERT_GT(server.port(), 0) << server.log();
  const std::string base_url = "http://127.0.0.1:" + std::to_string(server.port()) + "/v1";
  const CommandResult result =
      run_command("NODE_PATH=" + shell_quoted(node_path) + " timeout -k 5 " +
                  std::to_string(kScriptTimeoutSeconds) + " node tests/openai_sdk/" + script + " " +
                  shell_quoted(base_url) + " " + kModelName);
  EXPECT_EQ(result.exit_code, 0) << script << " exited with status " << result.exit_code
                                 << (result.exit_code == 124 ? " (timed out)" : "") << ":\n"
                                 << result.output << "\nserver log:\n"
                                 << server.log();
}

// Every script parses, and the schema validator the scripts rely on passes its own cases.
TEST(OpenAiSdk, ScriptsParse) {
  if (const std::string why = node_missing(); !why.empty()) GTEST_SKIP() << why;
  for (const char* script : {"common.mjs", "check_api.mjs", "check_structured.mjs",
                             "check_responses.mjs", "check_messages.mjs"}) {
    const CommandResult result =
        run_command(std::string("node --check tests/openai_sdk/") + script);
    EXPECT_EQ(result.exit_code, 0) << script << ":\n" << result.output;
  }
  const CommandResult validator = run_command("node tests/openai_sdk/check_validator.mjs");
  EXPECT_EQ(validator.exit_code, 0) << validator.output;
}

// Models, completions and chat completions, plain and streamed, n with a seed, logprobs, stop
// strings, and the errors as the SDK's error classes.
TEST(OpenAiSdk, ApiChecks) {
  run_against_server("check_api.mjs");
}

// Structured output (json_schema, json_object) and tool calls.
TEST(OpenAiSdk, StructuredOutputAndTools) {
  run_against_server("check_structured.mjs");
}

// The Responses API (/v1/responses): string and item inputs, instructions, max_output_tokens
// (incomplete), function calls and their outputs, previous_response_id with retrieve and delete,
// text.format json_schema, the named event stream, and errors.
TEST(OpenAiSdk, Responses) {
  run_against_server("check_responses.mjs");
}

// The Anthropic Messages API (/v1/messages, /v1/messages/count_tokens) through the official
// Anthropic SDK: text answers, stop reasons, streams, the tool_use -> tool_result loop, token
// counts, and errors in Anthropic's shape.
TEST(AnthropicSdk, Messages) {
  run_against_server("check_messages.mjs", "@anthropic-ai/sdk");
}

// The agent APIs under DP attention (4 ranks, 2 attention groups): the same checks.
constexpr const char* kDpAttention = "--tp 4 --dp 2 --enable-dp-attention";
TEST(OpenAiSdk, ResponsesUnderDpAttention) {
  run_against_server("check_responses.mjs", "openai", kDpAttention);
}
TEST(AnthropicSdk, MessagesUnderDpAttention) {
  run_against_server("check_messages.mjs", "@anthropic-ai/sdk", kDpAttention);
}

}  // namespace
}  // namespace mlaserve::testing
