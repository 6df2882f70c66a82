// The real server on the real engine (brown-tiny, float32) on a free loopback port: greedy
// output equals `eval` on the same prompt, batching many concurrent requests changes no
// request's output, and this holds under DP attention too.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "support/command.h"
#include "support/files.h"
#include "support/server_process.h"

namespace mlaserve::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::vector<std::vector<int>> prompts() {
  std::vector<std::vector<int>> out;
  for (int i = 0; i < 12; ++i) {
    std::vector<int> p = {0};  // BOS
    for (int j = 0; j < 3 + 7 * i; ++j) p.push_back(100 + (i * 37 + j * 11) % 3900);
    out.push_back(p);
  }
  return out;
}

std::vector<std::vector<int>> eval_greedy(const std::vector<std::vector<int>>& ps, int max_new) {
  TempDir tmp;
  json input = {{"prompts", json::array()}};
  for (const auto& p : ps) input["prompts"].push_back({{"ids", p}});
  const json out = run_eval("models/brown-tiny", input, "--dtype float32", tmp, max_new);
  std::vector<std::vector<int>> greedy;
  for (const auto& p : out.value("prompts", json::array()))
    greedy.push_back(p["greedy"].get<std::vector<int>>());
  return greedy;
}

void expect_concurrent_requests_match_eval(const std::string& flags) {
  const auto ps = prompts();
  const int max_new = 16;
  const auto expected = eval_greedy(ps, max_new);
  ASSERT_EQ(expected.size(), ps.size());
  ServerProcess server(flags);
  ASSERT_GT(server.port(), 0);
  // One alone first, then all at once (continuous batching, several prefills and decodes mixed).
  EXPECT_EQ(server.generate(ps[3], max_new), expected[3]);
  std::vector<std::future<std::vector<int>>> futures;
  for (const auto& p : ps)
    futures.push_back(
        std::async(std::launch::async, [&, p] { return server.generate(p, max_new); }));
  for (size_t i = 0; i < ps.size(); ++i)
    EXPECT_EQ(futures[i].get(), expected[i]) << "request " << i;
}

TEST(Serve, ConcurrentGreedyRequestsEqualEvalSingleRank) {
  expect_concurrent_requests_match_eval("");
}

TEST(Serve, ConcurrentGreedyRequestsEqualEvalWithDpAttention) {
  expect_concurrent_requests_match_eval(
      "--tp 2 --dp 2 --enable-dp-attention --load-balance-method minimum_tokens");
}

// Chunked prefill (a global budget of 16 tokens, 8 per group) splits long prompts over steps.
TEST(Serve, ChunkedPrefillGivesTheSameTokens) {
  expect_concurrent_requests_match_eval(
      "--tp 2 --dp 2 --enable-dp-attention --chunked-prefill-size 16");
}

}  // namespace
}  // namespace mlaserve::testing
