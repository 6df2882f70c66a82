// The real server on the real engine (brown-tiny, float32) on a free loopback port: greedy
// output equals `eval` on the same prompt, batching many concurrent requests changes no
// request's output, and this holds under DP attention too.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "server_process.h"
#include "test_util.h"

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

TEST(Serve, ReadmeCurlExamplesAnswer) {
  ServerProcess server("");
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);
  auto completion = client.Post(
      "/v1/completions",
      R"({"model": "brown-tiny", "prompt": "The jury said that", "max_tokens": 32, "temperature": 0})",
      "application/json");
  ASSERT_TRUE(completion);
  ASSERT_EQ(completion->status, 200) << completion->body;
  const json c = json::parse(completion->body);
  EXPECT_EQ(c["usage"]["completion_tokens"], 32);
  // brown-tiny's reference greedy continuation of this prompt starts with these words.
  EXPECT_EQ(c["choices"][0]["text"].get<std::string>().rfind(" the last year,", 0), 0u)
      << completion->body;
  auto chat = client.Post(
      "/v1/chat/completions",
      R"({"model": "brown-tiny", "messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 48})",
      "application/json");
  ASSERT_TRUE(chat);
  ASSERT_EQ(chat->status, 200) << chat->body;
  EXPECT_FALSE(
      json::parse(chat->body)["choices"][0]["message"]["content"].get<std::string>().empty());
  std::string streamed;
  auto stream = client.Post(
      "/v1/chat/completions",
      R"({"model": "brown-tiny", "messages": [{"role": "user", "content": "Hi"}], "stream": true, "max_tokens": 24})",
      "application/json");
  ASSERT_TRUE(stream);
  EXPECT_NE(stream->body.find("data: [DONE]"), std::string::npos) << stream->body;
  EXPECT_NE(stream->body.find("chat.completion.chunk"), std::string::npos);
}

}  // namespace
}  // namespace mlaserve::testing
