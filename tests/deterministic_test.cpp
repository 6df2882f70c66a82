// --enable-deterministic-inference end to end (issue 15) on brown-tiny with its default bf16
// weights: 32 concurrent greedy requests give the same bits (tokens and logprobs) as each request
// alone, at tp 1, tp 4 and under DP attention, with prompts prefilled in chunks, and with the
// prompts' prefixes served from the radix cache instead of recomputed.
#include <gtest/gtest.h>

#include <random>

#include "support/server_process.h"

namespace mlaserve::testing {
namespace {

using nlohmann::json;

// BOS and 3..120 random tokens of brown-tiny's vocabulary; 16 new tokens each.
std::vector<GenerateJob> random_jobs(int n) {
  std::mt19937 rng(15);
  std::uniform_int_distribution<int> length(3, 120), token(100, 3999);
  std::vector<GenerateJob> jobs;
  for (int i = 0; i < n; ++i) {
    GenerateJob job{{0}, 16};
    for (int j = length(rng); j > 0; --j) job.prompt.push_back(token(rng));
    jobs.push_back(job);
  }
  return jobs;
}

int64_t prompt_tokens(const std::vector<GenerateJob>& jobs) {
  int64_t total = 0;
  for (const GenerateJob& job : jobs) total += static_cast<int64_t>(job.prompt.size());
  return total;
}

int64_t cached_tokens(const std::vector<json>& answers) {
  int64_t total = 0;
  for (const json& answer : answers) total += answer["meta_info"]["cached_tokens"].get<int64_t>();
  return total;
}

void expect_same_bits(const std::vector<json>& got, const std::vector<json>& alone,
                      const std::string& what) {
  for (size_t i = 0; i < alone.size(); ++i) {
    ASSERT_EQ(alone[i]["output_ids"].size(), 16u) << alone[i].dump();
    EXPECT_EQ(got[i]["output_ids"], alone[i]["output_ids"]) << what << ", request " << i;
    EXPECT_EQ(got[i]["meta_info"]["output_token_logprobs"],
              alone[i]["meta_info"]["output_token_logprobs"])
        << what << ", request " << i;
  }
}

// Each request alone on an empty cache; then all at once with their prompts in the radix cache;
// then all at once again after /flush_cache, every prompt recomputed in one batch.
void expect_concurrent_equals_alone(const std::string& layout) {
  ServerProcess server(
      "--dtype bfloat16 --enable-deterministic-inference "
      "--chunked-prefill-size 48 " +
      layout);
  ASSERT_GT(server.port(), 0);
  const std::vector<GenerateJob> jobs = random_jobs(32);
  std::vector<json> alone;
  for (const GenerateJob& job : jobs) alone.push_back(server.generate_json(job.prompt, 16));

  // Every prompt is in the cache now, all but (at most) its last token reused.
  const std::vector<json> cached = generate_concurrently(server, jobs);
  EXPECT_GE(cached_tokens(cached), prompt_tokens(jobs) - static_cast<int64_t>(jobs.size()))
      << "the prompts should come from the radix cache";
  expect_same_bits(cached, alone, "concurrent with cached prefixes");

  const json empty = json::object();
  server.call("/flush_cache", &empty);
  const std::vector<json> recomputed = generate_concurrently(server, jobs);
  EXPECT_LT(cached_tokens(recomputed), prompt_tokens(jobs) / 2) << "most should be recomputed";
  expect_same_bits(recomputed, alone, "concurrent, recomputed");
  EXPECT_GT(server.call("/get_server_info")["engine"]["partial_prefill_chunks"].get<int64_t>(), 0)
      << "some prompts should have been prefilled in chunks";
}

TEST(DeterministicInference, ConcurrentRequestsEqualTheirAloneBitsSingleRank) {
  expect_concurrent_equals_alone("");
}

// Four ranks add their partial sums in a fixed order, and every step (with or without a prefill
// in it) lays the o_proj reduction out alike.
TEST(DeterministicInference, ConcurrentRequestsEqualTheirAloneBitsTp4) {
  expect_concurrent_equals_alone("--tp 4");
}

TEST(DeterministicInference, ConcurrentRequestsEqualTheirAloneBitsWithDpAttention) {
  expect_concurrent_equals_alone("--tp 4 --dp 2 --enable-dp-attention");
}

}  // namespace
}  // namespace mlaserve::testing
