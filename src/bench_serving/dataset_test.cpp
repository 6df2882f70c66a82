// Prompt lengths, exact prompt token counts with the brown-tiny tokenizer, and arrivals.
#include "bench_serving/dataset.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "bench_serving/vocabulary.h"
#include "core/error.h"
#include "support/tokenizers.h"
#include "tokenizer/utf8.h"

namespace mlaserve::bench_serving {
namespace {

using testing::brown_tiny_tokenizer;

constexpr const char* kBrownTiny = "models/brown-tiny";  // tests run in the source tree

const PromptMaker& maker() {
  static const PromptMaker instance(brown_tiny_tokenizer(),
                                    prompt_token_ids(kBrownTiny, brown_tiny_tokenizer()));
  return instance;
}

TEST(RandomLengths, FollowSglangsRangeRule) {
  Rng rng(1);
  const std::vector<int64_t> lengths = random_lengths(10, 0.5, 2000, rng);
  EXPECT_EQ(*std::min_element(lengths.begin(), lengths.end()), 5);
  EXPECT_EQ(*std::max_element(lengths.begin(), lengths.end()), 10);
  for (const int64_t n : random_lengths(7, 1.0, 50, rng)) EXPECT_EQ(n, 7);
  const std::vector<int64_t> from_one = random_lengths(3, 0.0, 500, rng);  // [max(1, 0), 3]
  EXPECT_EQ(std::set<int64_t>(from_one.begin(), from_one.end()), (std::set<int64_t>{1, 2, 3}));
  // floor(9 * 0.25) = 2
  const std::vector<int64_t> floored = random_lengths(9, 0.25, 2000, rng);
  EXPECT_EQ(*std::min_element(floored.begin(), floored.end()), 2);
}

TEST(PromptTokenIds, LeaveOutAddedTokensAndPartialCharacters) {
  const std::vector<int32_t> ids = prompt_token_ids(kBrownTiny, brown_tiny_tokenizer());
  const std::set<int32_t> set(ids.begin(), ids.end());
  for (const int32_t added : {0, 1, 2, 4099, 4102, 4103, 4104, 4113}) {
    EXPECT_FALSE(set.contains(added)) << added;
  }
  EXPECT_TRUE(set.contains(3));  // "!"
  EXPECT_GT(ids.size(), 3900u);
  for (const int32_t id : ids) {
    EXPECT_FALSE(tokenizer::utf8::first_invalid_offset(brown_tiny_tokenizer().id_to_bytes(id)))
        << id;
  }
}

TEST(PromptMaker, MakesExactlyTheAskedTokenCount) {
  Rng rng(7);
  for (const int64_t tokens : {1, 2, 3, 7, 64, 100, 513, 2000}) {
    for (int trial = 0; trial < 5; ++trial) {
      const std::string prompt = maker().make(tokens, rng);
      EXPECT_EQ(static_cast<int64_t>(brown_tiny_tokenizer().encode(prompt, false).size()), tokens);
      // With BOS, as the server encodes it: one more.
      EXPECT_EQ(static_cast<int64_t>(brown_tiny_tokenizer().encode(prompt, true).size()),
                tokens + 1);
    }
  }
}

TEST(Dataset, RandomPromptsHaveTheirDrawnLengths) {
  DatasetOptions options;
  options.num_prompts = 40;
  options.input_len = 200;
  options.output_len = 30;
  options.range_ratio = 0.5;
  Rng rng(3);
  const std::vector<BenchRequest> requests = make_dataset(options, maker(), rng);
  ASSERT_EQ(requests.size(), 40u);
  std::set<int64_t> lengths;
  for (const BenchRequest& r : requests) {
    EXPECT_EQ(static_cast<int64_t>(brown_tiny_tokenizer().encode(r.prompt, false).size()),
              r.prompt_len);
    EXPECT_GE(r.prompt_len, 100);
    EXPECT_LE(r.prompt_len, 200);
    EXPECT_GE(r.output_len, 15);
    EXPECT_LE(r.output_len, 30);
    lengths.insert(r.prompt_len);
  }
  EXPECT_GT(lengths.size(), 10u);
}

TEST(Dataset, TheSameSeedGivesTheSameRequests) {
  DatasetOptions options;
  options.num_prompts = 5;
  options.input_len = 50;
  options.output_len = 10;
  Rng a(11), b(11), c(12);
  const std::vector<BenchRequest> first = make_dataset(options, maker(), a);
  const std::vector<BenchRequest> second = make_dataset(options, maker(), b);
  const std::vector<BenchRequest> other = make_dataset(options, maker(), c);
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i].prompt, second[i].prompt);
    EXPECT_EQ(first[i].output_len, second[i].output_len);
  }
  EXPECT_NE(first[0].prompt, other[0].prompt);
}

TEST(Dataset, SharedPrefixPromptsStartWithOneOfTheGroupPrefixes) {
  DatasetOptions options;
  options.name = "shared-prefix";
  options.num_prompts = 12;
  options.input_len = 20;
  options.output_len = 8;
  options.range_ratio = 1.0;
  options.shared_prefix_len = 64;
  options.num_groups = 3;
  Rng rng(5);
  const std::vector<BenchRequest> requests = make_dataset(options, maker(), rng);
  std::set<std::string> prefixes;
  for (const BenchRequest& r : requests) {
    const size_t join = r.prompt.find("\n\n");
    ASSERT_NE(join, std::string::npos);
    const std::string prefix = r.prompt.substr(0, join);
    EXPECT_EQ(static_cast<int64_t>(brown_tiny_tokenizer().encode(prefix, false).size()), 64);
    prefixes.insert(prefix);
    EXPECT_EQ(static_cast<int64_t>(brown_tiny_tokenizer().encode(r.prompt, false).size()),
              r.prompt_len);
    EXPECT_NEAR(static_cast<double>(r.prompt_len), 64.0 + 20.0 + 1.0, 3.0);
    EXPECT_EQ(r.output_len, 8);
  }
  EXPECT_EQ(prefixes.size(), 3u);
}

TEST(Dataset, RejectsBadOptions) {
  Rng rng(1);
  DatasetOptions options;
  options.name = "sharegpt";
  EXPECT_THROW(make_dataset(options, maker(), rng), Error);
  options.name = "random";
  options.range_ratio = 1.5;
  EXPECT_THROW(make_dataset(options, maker(), rng), Error);
}

TEST(Arrivals, InfiniteRateSendsEverythingAtOnce) {
  Rng rng(1);
  for (const double t : arrival_times(10, std::numeric_limits<double>::infinity(), rng)) {
    EXPECT_EQ(t, 0.0);
  }
}

TEST(Arrivals, PoissonGapsAverageOneOverTheRate) {
  Rng rng(1);
  const std::vector<double> times = arrival_times(20001, 10.0, rng);
  EXPECT_EQ(times[0], 0.0);
  EXPECT_TRUE(std::is_sorted(times.begin(), times.end()));
  const double mean_gap = times.back() / 20000.0;
  EXPECT_NEAR(mean_gap, 0.1, 0.003);
  // Exponential: about 1 - 1/e of the gaps are below the mean.
  size_t below = 0;
  for (size_t i = 1; i < times.size(); ++i) below += (times[i] - times[i - 1]) < 0.1;
  EXPECT_NEAR(static_cast<double>(below) / 20000.0, 1.0 - std::exp(-1.0), 0.015);
}

TEST(Rng, UniformIntStaysInItsBoundsAndHitsThem) {
  Rng rng(2);
  std::set<int64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const int64_t v = rng.uniform_int(-2, 2);
    ASSERT_GE(v, -2);
    ASSERT_LE(v, 2);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 5u);
}

}  // namespace
}  // namespace mlaserve::bench_serving
