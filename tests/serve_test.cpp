// The real server on the real engine (brown-tiny, float32) on a free loopback port: greedy
// output equals `eval` on the same prompt, batching many concurrent requests changes no
// request's output, and this holds under DP attention, chunked prefill (which the engine's
// counters show happened) and a limit on running requests too.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
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

// Returns the engine's status (/get_server_info) after the requests.
json expect_concurrent_requests_match_eval(const std::string& flags) {
  const auto ps = prompts();
  const int max_new = 16;
  const auto expected = eval_greedy(ps, max_new);
  EXPECT_EQ(expected.size(), ps.size());
  ServerProcess server(flags);
  if (expected.size() != ps.size() || server.port() == 0) {
    ADD_FAILURE() << "no eval output or no server";
    return json::object();
  }
  // One alone first, then all at once (continuous batching, several prefills and decodes mixed).
  EXPECT_EQ(server.generate(ps[3], max_new), expected[3]);
  std::vector<std::future<std::vector<int>>> futures;
  for (const auto& p : ps)
    futures.push_back(
        std::async(std::launch::async, [&, p] { return server.generate(p, max_new); }));
  for (size_t i = 0; i < ps.size(); ++i)
    EXPECT_EQ(futures[i].get(), expected[i]) << "request " << i;
  return server.call("/get_server_info")["engine"];
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
  const json status = expect_concurrent_requests_match_eval(
      "--tp 2 --dp 2 --enable-dp-attention --chunked-prefill-size 16");
  // Every prompt is prefilled from scratch once at least, but for a shared BOS the radix cache
  // may hold, in chunks of at most 8 tokens: all but the last of them stop short of its end.
  int64_t fewest_partial_chunks = 0;
  for (const std::vector<int>& p : prompts()) {
    fewest_partial_chunks += (static_cast<int64_t>(p.size()) - 1 + 7) / 8 - 1;
  }
  EXPECT_GE(status.value("partial_prefill_chunks", int64_t{-1}), fewest_partial_chunks)
      << status.dump();
}

// --max-running-requests 2: six prompts submitted together (one batch request) run two at a
// time and still give eval's tokens. The engine's peak is the limit exactly: the six wait
// together while each runs for 32 steps.
TEST(Serve, MaxRunningRequestsBoundsTheBatch) {
  const int max_new = 32;
  std::vector<std::vector<int>> ps = prompts();
  ps.resize(6);
  const auto expected = eval_greedy(ps, max_new);
  ASSERT_EQ(expected.size(), ps.size());
  ServerProcess server("--max-running-requests 2");
  ASSERT_GT(server.port(), 0);
  const json body = {
      {"input_ids", ps},
      {"sampling_params", {{"max_new_tokens", max_new}, {"temperature", 0}, {"ignore_eos", true}}}};
  const json answers = server.call("/generate", &body);
  ASSERT_EQ(answers.size(), ps.size()) << answers.dump();
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_EQ(answers[i]["output_ids"].get<std::vector<int>>(), expected[i]) << "prompt " << i;
  }
  const json status = server.call("/get_server_info")["engine"];
  EXPECT_EQ(status["max_running_requests_per_group"], 2);
  EXPECT_EQ(status["running_requests_peak"], 2) << status.dump();
}

// --max-prefill-tokens 50: six 40-token prompts submitted together cannot share a prefill step
// (a step admits prompts while their tokens fit the budget, and the first one always), so the
// engine takes at least six steps for what one step holds under the default budget; each still
// gets eval's token.
TEST(Serve, MaxPrefillTokensSpreadsPromptsOverSteps) {
  std::vector<std::vector<int>> ps;
  for (int i = 0; i < 6; ++i) {
    ps.push_back({0});
    for (int j = 1; j < 40; ++j) ps.back().push_back(100 + (i * 53 + j * 7) % 3000);
  }
  const auto expected = eval_greedy(ps, 1);
  ASSERT_EQ(expected.size(), ps.size());
  ServerProcess server("--max-prefill-tokens 50");
  ASSERT_GT(server.port(), 0);
  const json body = {
      {"input_ids", ps},
      {"sampling_params", {{"max_new_tokens", 1}, {"temperature", 0}, {"ignore_eos", true}}}};
  const json answers = server.call("/generate", &body);
  ASSERT_EQ(answers.size(), ps.size()) << answers.dump();
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_EQ(answers[i]["output_ids"].get<std::vector<int>>(), expected[i]) << "prompt " << i;
  }
  const json status = server.call("/get_server_info")["engine"];
  EXPECT_EQ(status["max_prefill_tokens_per_group"], 50);
  EXPECT_GE(status["steps"].get<int64_t>(), 6) << status.dump();
}

// The order two waiting requests finish in, under --schedule-policy `policy`, with one request
// at a time (--max-running-requests 1): "unrelated" arrives first, "cached" (whose 200-token
// prefix the radix cache holds) second, both while a long generation occupies the one place.
// Each generates 150 tokens, so the second admitted finishes 150 steps after the first: the
// order the clients see is the admission order, whatever the thread scheduling.
std::vector<std::string> finishing_order(const std::string& policy) {
  ServerProcess server("--max-running-requests 1 --schedule-policy " + policy);
  EXPECT_GT(server.port(), 0);
  if (server.port() == 0) return {};
  std::vector<int> prefix = {0}, unrelated = {0};
  for (int j = 1; j < 200; ++j) {
    prefix.push_back(100 + j * 13 % 3000);
    unrelated.push_back(200 + j * 29 % 3000);
  }
  server.generate(prefix, 1);  // the radix cache now holds the prefix
  const auto engine = [&] { return server.call("/get_server_info")["engine"]; };
  auto blocker = std::async(std::launch::async, [&] { return server.generate({0, 5, 6}, 1500); });
  EXPECT_TRUE(
      wait_until([&] { return engine()["running_requests"] == 1; }, std::chrono::seconds(30)));
  std::mutex mutex;
  std::vector<std::string> order;
  const auto submit = [&](const std::string& name, std::vector<int> prompt) {
    return std::async(std::launch::async, [&, name, prompt] {
      server.generate(prompt, 150);
      const std::lock_guard<std::mutex> lock(mutex);
      order.push_back(name);
    });
  };
  auto first = submit("unrelated", unrelated);
  EXPECT_TRUE(
      wait_until([&] { return engine()["waiting_requests"] == 1; }, std::chrono::seconds(30)));
  std::vector<int> cached = prefix;
  cached.push_back(7);
  auto second = submit("cached", cached);
  EXPECT_TRUE(
      wait_until([&] { return engine()["waiting_requests"] == 2; }, std::chrono::seconds(30)))
      << "the long generation ended before both requests were waiting";
  blocker.get();
  first.get();
  second.get();
  return order;
}

TEST(Serve, LongestPrefixMatchAdmitsTheCachedPromptFirst) {
  EXPECT_EQ(finishing_order("lpm"), (std::vector<std::string>{"cached", "unrelated"}));
  EXPECT_EQ(finishing_order("fcfs"), (std::vector<std::string>{"unrelated", "cached"}));
}

}  // namespace
}  // namespace mlaserve::testing
