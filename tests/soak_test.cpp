// A small soak (issue 15) through scripts/soak.sh itself, so that CI runs the very checks of the
// full soak: 120 requests at concurrency 16 on brown-tiny under --tp 2 --dp 2
// --enable-dp-attention with a KV pool of 1024 tokens per group, half of them streamed, 5 % of
// the streams cut by their client, 5 % of the requests aborted, after a warm-up run of the same
// size. The script must pass (no failed request, retractions, every completed request equal to its
// output alone, KV pool and radix cache idle after /flush_cache, rank 0's RSS and open files back
// where the warm-up left them), and its summary must show each fault happened.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/command.h"
#include "support/files.h"

namespace mlaserve::testing {
namespace {

constexpr int kScriptTimeoutSeconds = 300;

TEST(Soak, ASmallSoakUnderDpAttentionPasses) {
  for (const char* tool : {"curl", "jq"}) {
    if (run_command(std::string("command -v ") + tool).exit_code != 0) {
      GTEST_SKIP() << tool << " not found: run scripts/setup.sh (scripts/test.sh does)";
    }
  }
  const TempDir tmp;
  const CommandResult result = run_command(
      "MLASERVE_BIN=" + shell_quoted(mlaserve_bin()) +
      " SOAK_OUT=" + shell_quoted(tmp.path().string()) +
      " SOAK_LAYOUT='--tp 2 --dp 2 --enable-dp-attention' SOAK_KV_TOKENS=1024 SOAK_CHECK=all" +
      " timeout -k 10 " + std::to_string(kScriptTimeoutSeconds) + " bash scripts/soak.sh 120 16");
  EXPECT_EQ(result.exit_code, 0) << result.output << "\nserver log:\n"
                                 << read_text(tmp / "server.log");
  ASSERT_TRUE(std::filesystem::exists(tmp / "summary.json")) << result.output;
  const nlohmann::json summary = read_json(tmp / "summary.json");
  EXPECT_EQ(summary["failed"], 0) << summary;
  EXPECT_EQ(summary["ok"].get<int>() + summary["cut"].get<int>() + summary["aborted"].get<int>(),
            120)
      << summary;
  EXPECT_GT(summary["cut"], 0) << summary;
  EXPECT_GT(summary["aborted"], 0) << summary;
  EXPECT_GT(summary["retractions"], 0) << summary;
  EXPECT_EQ(summary["compared_alone"], summary["ok"]) << summary;
  EXPECT_EQ(summary["mismatches"], 0) << summary;
  EXPECT_TRUE(summary["failures"].empty()) << summary;
}

}  // namespace
}  // namespace mlaserve::testing
