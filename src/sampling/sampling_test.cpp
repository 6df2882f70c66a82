#include "sampling/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>

#include "core/error.h"
#include "sampling/reference.h"

namespace mlaserve::sampling {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> random_logits(size_t vocab, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> logits(vocab);
  for (float& x : logits) x = normal(rng);
  return logits;
}

// Logits whose softmax is exactly `probs` (up to rounding).
std::vector<float> logits_for(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(p > 0 ? static_cast<float>(std::log(p)) : -kInf);
  return logits;
}

// The fast filter's output as one probability per token, like the reference's.
std::vector<float> dense_filtered(std::span<const float> logits, const SamplingParams& params) {
  std::vector<Candidate> candidates;
  filter(logits, params, candidates);
  std::vector<float> dense(logits.size(), 0.0f);
  for (const Candidate& c : candidates) {
    EXPECT_EQ(dense[c.id], 0.0f) << "token " << c.id << " appears twice";
    dense[c.id] = c.prob;
  }
  return dense;
}

int32_t independent_argmax(const std::vector<float>& logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

std::vector<int32_t> sample_sequence(const SamplingParams& params, size_t steps) {
  Sampler sampler(params);
  std::vector<int32_t> tokens;
  for (size_t step = 0; step < steps; ++step) {
    std::vector<float> logits = random_logits(1000, 1.0f, static_cast<uint32_t>(step));
    tokens.push_back(sampler.sample(logits));
  }
  return tokens;
}

TEST(Sampling, ArgmaxPicksLowestIdAmongTies) {
  EXPECT_EQ(argmax(std::vector<float>{1.0f, 3.0f, 3.0f, 2.0f}), 1);
  EXPECT_EQ(argmax(std::vector<float>{-kInf, -5.0f}), 1);
  EXPECT_THROW(argmax(std::vector<float>{}), Error);
  EXPECT_THROW(argmax(std::vector<float>{0.0f, NAN}), Error);
}

TEST(Sampling, GreedyAndTopKOneReturnArgmax) {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  SamplingParams top1;
  top1.top_k = 1;
  top1.seed = 3;
  Sampler greedy_sampler(greedy), top1_sampler(top1);
  for (uint32_t row = 0; row < 20; ++row) {
    std::vector<float> logits = random_logits(5000, 2.0f, row);
    const int32_t expected = independent_argmax(logits);
    std::vector<float> copy = logits;
    EXPECT_EQ(greedy_sampler.sample(logits), expected) << row;
    EXPECT_EQ(top1_sampler.sample(copy), expected) << row;
  }
}

TEST(Sampling, SameSeedGivesSameTokens) {
  SamplingParams params;
  params.seed = 1234;
  params.top_p = 0.95f;
  const std::vector<int32_t> first = sample_sequence(params, 50);
  EXPECT_EQ(sample_sequence(params, 50), first);
  params.seed = 1235;
  EXPECT_NE(sample_sequence(params, 50), first);
}

TEST(Sampling, FastFilterMatchesReference) {
  int cases = 0;
  for (float scale : {0.3f, 2.5f}) {
    std::vector<float> logits = random_logits(3000, scale, 7);
    // A few masked tokens, as a grammar would leave them.
    for (size_t i = 0; i < logits.size(); i += 97) logits[i] = -kInf;
    for (float temperature : {0.0f, 0.5f, 1.0f, 1.7f}) {
      for (int top_k : {-1, 0, 1, 5, 50, 2999, 5000}) {
        for (float top_p : {1.0f, 0.95f, 0.5f, 0.05f}) {
          for (float min_p : {0.0f, 0.05f, 0.3f, 1.0f}) {
            SamplingParams params;
            params.temperature = temperature;
            params.top_k = top_k;
            params.top_p = top_p;
            params.min_p = min_p;
            const std::vector<float> expected = reference_filtered_probs(logits, params);
            const std::vector<float> actual = dense_filtered(logits, params);
            const std::string label = "scale " + std::to_string(scale) + " T " +
                                      std::to_string(temperature) + " top_k " +
                                      std::to_string(top_k) + " top_p " + std::to_string(top_p) +
                                      " min_p " + std::to_string(min_p);
            double sum = 0.0;
            for (size_t i = 0; i < logits.size(); ++i) {
              // Probabilities below float's range may be kept by the double reference only.
              if (expected[i] > 1e-30f) {
                ASSERT_GT(actual[i], 0.0f) << label << " token " << i;
              }
              if (expected[i] == 0.0f) {
                ASSERT_EQ(actual[i], 0.0f) << label << " token " << i;
              }
              ASSERT_NEAR(actual[i], expected[i], 1e-6f + 1e-5f * expected[i])
                  << label << " token " << i;
              sum += actual[i];
            }
            ASSERT_NEAR(sum, 1.0, 1e-5) << label;
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 2 * 4 * 7 * 4 * 4);
}

// The nucleus of a flat distribution over a DeepSeek-sized vocabulary spans many of the
// chunks that top-p sorts incrementally.
TEST(Sampling, FastFilterMatchesReferenceOnLargeFlatVocabulary) {
  const std::vector<float> logits = random_logits(129280, 0.5f, 11);
  SamplingParams nucleus;
  nucleus.top_p = 0.3f;
  SamplingParams nucleus_and_min_p;
  nucleus_and_min_p.top_p = 0.9f;
  nucleus_and_min_p.min_p = 0.2f;
  for (const SamplingParams& params : {nucleus, nucleus_and_min_p}) {
    const std::vector<float> expected = reference_filtered_probs(logits, params);
    const std::vector<float> actual = dense_filtered(logits, params);
    size_t kept = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
      ASSERT_EQ(actual[i] > 0.0f, expected[i] > 0.0f) << params.top_p << " token " << i;
      ASSERT_NEAR(actual[i], expected[i], 1e-9f + 1e-5f * expected[i]) << params.top_p;
      kept += expected[i] > 0.0f;
    }
    EXPECT_GT(kept, 5000u) << params.top_p;
    EXPECT_LT(kept, logits.size() / 2) << params.top_p;
  }
}

// Many small rows with random parameters, so that every way the nucleus search can end
// (including on a partition pivot) is hit.
TEST(Sampling, FastFilterMatchesReferenceOnManyRandomRows) {
  std::mt19937 rng(99);
  std::uniform_int_distribution<size_t> vocab_size(65, 400);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (uint32_t row = 0; row < 3000; ++row) {
    const std::vector<float> logits = random_logits(vocab_size(rng), 0.2f + 3.0f * unit(rng), row);
    SamplingParams params;
    params.temperature = 0.3f + 1.5f * unit(rng);
    params.top_p = std::max(0.01f, unit(rng));
    params.min_p = unit(rng) < 0.5f ? 0.0f : 0.1f * unit(rng);
    const std::vector<float> expected = reference_filtered_probs(logits, params);
    const std::vector<float> actual = dense_filtered(logits, params);
    for (size_t i = 0; i < logits.size(); ++i) {
      ASSERT_EQ(actual[i] > 0.0f, expected[i] > 0.0f) << "row " << row << " token " << i;
      ASSERT_NEAR(actual[i], expected[i], 1e-6f + 1e-5f * expected[i]) << "row " << row;
    }
  }
}

// Draws `draws` tokens and checks each frequency against the reference distribution with a
// chi-square test (p = 0.001) and a per-token bound of 5 standard deviations.
void expect_draws_follow_reference(const std::vector<float>& logits, SamplingParams params,
                                   int draws) {
  params.seed = 2024;
  const std::vector<float> expected = reference_filtered_probs(logits, params);
  Sampler sampler(params);
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < draws; ++i) {
    std::vector<float> row = logits;
    ++counts[sampler.sample(row)];
  }
  double chi_square = 0.0;
  int free_categories = -1;
  for (size_t id = 0; id < logits.size(); ++id) {
    const double p = expected[id];
    const double frequency = static_cast<double>(counts[id]) / draws;
    if (p == 0.0) {
      EXPECT_EQ(counts[id], 0) << "filtered-out token " << id << " was drawn";
      continue;
    }
    EXPECT_NEAR(frequency, p, 5.0 * std::sqrt(p * (1.0 - p) / draws)) << "token " << id;
    chi_square += std::pow(counts[id] - p * draws, 2) / (p * draws);
    ++free_categories;
  }
  // Chi-square critical values at p = 0.001 for 1..4 degrees of freedom.
  const double critical[] = {10.83, 13.82, 16.27, 18.47};
  ASSERT_GE(free_categories, 1);
  EXPECT_LT(chi_square, critical[free_categories - 1]);
}

TEST(Sampling, DrawsFollowTheDistribution) {
  const std::vector<float> logits = {1.2f, 0.4f, 0.0f, -0.5f, 2.0f};
  SamplingParams plain;
  plain.temperature = 0.9f;
  // The unfiltered distribution, computed here independently of the reference.
  double sum = 0.0;
  for (float x : logits) sum += std::exp(x / 0.9);
  EXPECT_NEAR(reference_filtered_probs(logits, plain)[4], std::exp(2.0 / 0.9) / sum, 1e-6);
  expect_draws_follow_reference(logits, plain, 20000);

  SamplingParams filtered = plain;
  filtered.top_p = 0.8f;  // drops the two least likely tokens
  ASSERT_EQ(reference_filtered_probs(logits, filtered)[3], 0.0f);
  expect_draws_follow_reference(logits, filtered, 20000);
}

// Tokens 3, 0, 2, 1 have probabilities 0.5, 0.25, 0.15, 0.1.
const std::vector<double> kCrafted = {0.25, 0.1, 0.15, 0.5};

void expect_filtered(const SamplingParams& params, const std::vector<double>& expected) {
  const std::vector<float> logits = logits_for(kCrafted);
  const std::vector<float> fast = dense_filtered(logits, params);
  const std::vector<float> reference = reference_filtered_probs(logits, params);
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(fast[i], expected[i], 1e-6) << "fast, token " << i;
    EXPECT_NEAR(reference[i], expected[i], 1e-6) << "reference, token " << i;
    EXPECT_EQ(fast[i] > 0.0f, expected[i] > 0.0) << "fast, token " << i;
    EXPECT_EQ(reference[i] > 0.0f, expected[i] > 0.0) << "reference, token " << i;
  }
}

TEST(Sampling, TopPKeepsSmallestSetReachingP) {
  SamplingParams params;
  params.top_p = 0.4f;  // 0.5 alone reaches it
  expect_filtered(params, {0.0, 0.0, 0.0, 1.0});
  params.top_p = 0.7f;  // 0.5 + 0.25
  expect_filtered(params, {1.0 / 3, 0.0, 0.0, 2.0 / 3});
  params.top_p = 0.8f;  // 0.5 + 0.25 + 0.15
  expect_filtered(params, {0.25 / 0.9, 0.0, 0.15 / 0.9, 0.5 / 0.9});
  params.top_p = 0.95f;
  expect_filtered(params, kCrafted);
}

TEST(Sampling, TopPAppliesToWhatTopKLeft) {
  SamplingParams params;
  params.top_k = 2;     // 0.5 and 0.25, renormalised to 2/3 and 1/3
  params.top_p = 0.6f;  // reached by 2/3 alone (but not by 0.5 of the full distribution)
  expect_filtered(params, {0.0, 0.0, 0.0, 1.0});
}

TEST(Sampling, MinPDropsTokensBelowFractionOfMax) {
  SamplingParams params;
  params.min_p = 0.4f;  // threshold 0.2
  expect_filtered(params, {1.0 / 3, 0.0, 0.0, 2.0 / 3});
  params.min_p = 0.25f;  // threshold 0.125
  expect_filtered(params, {0.25 / 0.9, 0.0, 0.15 / 0.9, 0.5 / 0.9});
  params.min_p = 1.0f;
  expect_filtered(params, {0.0, 0.0, 0.0, 1.0});
}

TEST(Sampling, TopKKeepsTheKMostLikely) {
  SamplingParams params;
  params.top_k = 3;
  expect_filtered(params, {0.25 / 0.9, 0.0, 0.15 / 0.9, 0.5 / 0.9});
}

// Equal weights at the k-th place: the lower ids are kept, as among equal logits for argmax.
TEST(Sampling, TopKKeepsTheLowerIdsAmongEqualWeights) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, 2.0f, 2.0f, 0.5f, 2.0f};
  SamplingParams params;
  params.top_k = 4;  // 3, 3, then two of the four 2s: tokens 2 and 4
  const std::vector<float> probs = dense_filtered(logits, params);
  for (size_t id : {1u, 2u, 3u, 4u}) EXPECT_GT(probs[id], 0.0f) << "token " << id;
  for (size_t id : {0u, 5u, 6u, 7u}) EXPECT_EQ(probs[id], 0.0f) << "token " << id;
}

TEST(Sampling, PenaltiesChangeLogitsAsSpecified) {
  std::vector<float> logits = {2.0f, -2.0f, 1.0f, 0.5f};
  SamplingParams params;
  params.repetition_penalty = 2.0f;
  params.frequency_penalty = 0.5f;
  params.presence_penalty = 0.25f;
  edit_logits(logits, {{0, 2}, {1, 1}}, params);
  EXPECT_FLOAT_EQ(logits[0], 2.0f / 2.0f - 0.5f * 2 - 0.25f);
  EXPECT_FLOAT_EQ(logits[1], -2.0f * 2.0f - 0.5f * 1 - 0.25f);
  EXPECT_EQ(logits[2], 1.0f);
  EXPECT_EQ(logits[3], 0.5f);
  EXPECT_THROW(edit_logits(logits, {{4, 1}}, params), Error);
}

// logit_bias adds to the penalised logits; a token outside the vocabulary is an error, a bias
// outside [-100, 100] fails validation.
TEST(Sampling, LogitBiasAddsAfterThePenalties) {
  std::vector<float> logits = {2.0f, -2.0f, 1.0f, 0.5f};
  SamplingParams params;
  params.repetition_penalty = 2.0f;
  params.logit_bias = {{0, 10.0f}, {3, -100.0f}};
  EXPECT_TRUE(params.edits_logits());
  edit_logits(logits, {{0, 1}}, params);
  EXPECT_FLOAT_EQ(logits[0], 2.0f / 2.0f + 10.0f);
  EXPECT_EQ(logits[2], 1.0f);
  EXPECT_FLOAT_EQ(logits[3], 0.5f - 100.0f);
  params.logit_bias = {{4, 1.0f}};
  EXPECT_THROW(edit_logits(logits, {}, params), Error);
  params.logit_bias = {{1, 100.5f}};
  EXPECT_THROW(params.validate(), Error);
  params.logit_bias = {{1, -100.0f}};
  EXPECT_NO_THROW(params.validate());
}

TEST(Sampling, SamplerPenalisesTokensItChoseOrRecorded) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.frequency_penalty = 0.3f;
  Sampler sampler(params);
  const std::vector<float> logits = {1.0f, 0.8f, 0.0f};
  std::vector<float> row = logits;
  EXPECT_EQ(sampler.sample(row), 0);
  row = logits;  // token 0 now at 0.7, below token 1
  EXPECT_EQ(sampler.sample(row), 1);
  sampler.record(0);
  sampler.record(0);
  row = logits;  // token 0 at 1.0 - 0.9, token 1 at 0.5
  EXPECT_EQ(sampler.sample(row), 1);
  EXPECT_FLOAT_EQ(row[0], 1.0f - 0.3f * 3);
  EXPECT_THROW(sampler.record(-1), Error);
}

TEST(Sampling, ValidateRejectsEachOutOfRangeField) {
  EXPECT_NO_THROW(SamplingParams{}.validate());
  struct BadValue {
    std::string field;
    std::function<void(SamplingParams&)> set;
  };
  const std::vector<BadValue> bad = {
      {"temperature", [](SamplingParams& p) { p.temperature = -0.1f; }},
      {"temperature", [](SamplingParams& p) { p.temperature = NAN; }},
      {"top_k", [](SamplingParams& p) { p.top_k = -2; }},
      {"top_p", [](SamplingParams& p) { p.top_p = 0.0f; }},
      {"top_p", [](SamplingParams& p) { p.top_p = 1.01f; }},
      {"min_p", [](SamplingParams& p) { p.min_p = -0.01f; }},
      {"min_p", [](SamplingParams& p) { p.min_p = 1.5f; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = 0.0f; }},
      {"presence_penalty", [](SamplingParams& p) { p.presence_penalty = 2.5f; }},
      {"presence_penalty", [](SamplingParams& p) { p.presence_penalty = -2.5f; }},
      {"frequency_penalty", [](SamplingParams& p) { p.frequency_penalty = -3.0f; }},
      {"frequency_penalty", [](SamplingParams& p) { p.frequency_penalty = NAN; }},
  };
  for (const BadValue& value : bad) {
    SamplingParams params;
    value.set(params);
    try {
      params.validate();
      ADD_FAILURE() << value.field << ": no error";
    } catch (const Error& error) {
      EXPECT_EQ(std::string(error.what()).rfind(value.field + " must be", 0), 0u) << error.what();
    }
    EXPECT_THROW(Sampler{params}, Error) << value.field;
  }
}

TEST(Sampling, RejectsRowsNoTokenCanComeFrom) {
  Sampler sampler(SamplingParams{});
  std::vector<float> masked = {-kInf, -kInf};
  EXPECT_THROW(sampler.sample(masked), Error);
  std::vector<float> with_nan = {0.0f, NAN};
  EXPECT_THROW(sampler.sample(with_nan), Error);
}

TEST(Sampling, MaskDisallowedKeepsExactlyTheAllowedTokens) {
  const size_t vocab = 150;  // past two whole words, and shorter than the three-word mask
  std::vector<float> logits = random_logits(vocab, 2.0f, 7);
  const std::vector<float> raw = logits;
  std::vector<uint64_t> allowed(3, 0);
  std::mt19937 rng(11);
  std::vector<bool> expected(vocab);
  for (size_t id = 0; id < vocab; ++id) {
    expected[id] = rng() % 3 == 0;
    if (expected[id]) allowed[id / 64] |= uint64_t{1} << (id % 64);
  }
  mask_disallowed(logits, allowed);
  for (size_t id = 0; id < vocab; ++id) {
    EXPECT_EQ(logits[id], expected[id] ? raw[id] : -kInf) << id;
  }
  // Ids past the mask are disallowed; greedy and sampling then pick only allowed tokens.
  std::vector<float> short_mask_row = raw;
  mask_disallowed(short_mask_row, std::span<const uint64_t>(allowed).first(1));
  EXPECT_TRUE(std::all_of(short_mask_row.begin() + 64, short_mask_row.end(),
                          [](float x) { return x == -kInf; }));
  EXPECT_TRUE(expected[static_cast<size_t>(argmax(logits))]);
  Sampler sampler(SamplingParams{.temperature = 1.0f, .seed = 3});
  for (int draw = 0; draw < 200; ++draw) {
    std::vector<float> row = logits;
    EXPECT_TRUE(expected[static_cast<size_t>(sampler.sample(row))]);
  }
}

TEST(Sampling, LogprobsMatchLogSoftmaxAndTopIsSortedDescending) {
  const std::vector<float> logits = random_logits(500, 3.0f, 5);
  double max = logits[0];
  for (float x : logits) max = std::max<double>(max, x);
  double sum = 0.0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max);
  const auto log_softmax = [&](int32_t id) { return logits[id] - max - std::log(sum); };

  const LogprobResult result = logprobs(logits, 123, 5);
  EXPECT_EQ(result.chosen.id, 123);
  EXPECT_NEAR(result.chosen.logprob, log_softmax(123), 1e-5);

  std::vector<int32_t> by_logit(logits.size());
  std::iota(by_logit.begin(), by_logit.end(), 0);
  std::sort(by_logit.begin(), by_logit.end(),
            [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  ASSERT_EQ(result.top.size(), 5u);
  for (size_t i = 0; i < result.top.size(); ++i) {
    EXPECT_EQ(result.top[i].id, by_logit[i]);
    EXPECT_NEAR(result.top[i].logprob, log_softmax(by_logit[i]), 1e-5);
    if (i > 0) {
      EXPECT_GT(result.top[i - 1].logprob, result.top[i].logprob);
    }
  }

  EXPECT_EQ(logprobs(logits, 0, 0).top.size(), 0u);
  EXPECT_EQ(logprobs(logits, 0, 1000).top.size(), logits.size());
  EXPECT_THROW(logprobs(logits, 500, 1), Error);
  EXPECT_THROW(logprobs(logits, 0, -1), Error);
}

}  // namespace
}  // namespace mlaserve::sampling

namespace mlaserve::sampling {
namespace {

// Speculative sampling against a one-hot draft leaves the target distribution unchanged, for
// every draft (likely, unlikely, filtered out): 400,000 draws per draft, each token's frequency
// within 5 standard errors of filter()'s probability.
TEST(VerifyDraft, KeepsTheTargetDistributionForEveryDraft) {
  const std::vector<float> logits = {2.0f, 1.5f, 0.3f, -0.5f, -3.0f, 1.0f};
  SamplingParams params;
  params.temperature = 0.8f;
  params.top_p = 0.95f;
  std::vector<Candidate> target;
  filter(logits, params, target);
  std::vector<double> p(logits.size(), 0.0);
  for (const Candidate& c : target) p[static_cast<size_t>(c.id)] = c.prob;
  ASSERT_EQ(p[4], 0.0);  // top_p leaves token 4 out: a draft the target never picks
  constexpr int kDraws = 400000;
  std::vector<Candidate> scratch;
  for (int32_t draft = 0; draft < static_cast<int32_t>(logits.size()); ++draft) {
    SCOPED_TRACE("draft " + std::to_string(draft));
    std::vector<int> counts(logits.size(), 0);
    int accepted = 0;
    for (int i = 0; i < kDraws; ++i) {
      const SpeculativeChoice c = verify_draft(logits, params, draft, counter_uniform(7, i, 0),
                                               counter_uniform(7, i, 1), scratch);
      counts[static_cast<size_t>(c.token)] += 1;
      accepted += c.accepted;
    }
    for (size_t t = 0; t < p.size(); ++t) {
      const double freq = static_cast<double>(counts[t]) / kDraws;
      EXPECT_NEAR(freq, p[t], 5 * std::sqrt(p[t] * (1 - p[t]) / kDraws) + 1e-9) << "token " << t;
    }
    const double accept_rate = static_cast<double>(accepted) / kDraws;
    EXPECT_NEAR(accept_rate, p[static_cast<size_t>(draft)],
                5 * std::sqrt(p[static_cast<size_t>(draft)] * (1 - p[static_cast<size_t>(draft)]) /
                              kDraws) +
                    1e-9);
  }
}

TEST(VerifyDraft, GreedyKeepsTheDraftOnlyWhenItIsTheArgmax) {
  const std::vector<float> logits = {0.5f, 2.0f, 1.0f};
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  std::vector<Candidate> scratch;
  EXPECT_TRUE(verify_draft(logits, greedy, 1, 0.99, 0.5, scratch).accepted);
  const SpeculativeChoice rejected = verify_draft(logits, greedy, 2, 0.0, 0.5, scratch);
  EXPECT_FALSE(rejected.accepted);
  EXPECT_EQ(rejected.token, 1);
}

TEST(CounterUniform, IsUniformAndDependsOnEveryInput) {
  double sum = 0;
  for (int i = 0; i < 100000; ++i) sum += counter_uniform(3, i, 0);
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);
  EXPECT_NE(counter_uniform(3, 5, 0), counter_uniform(4, 5, 0));
  EXPECT_NE(counter_uniform(3, 5, 0), counter_uniform(3, 6, 0));
  EXPECT_NE(counter_uniform(3, 5, 0), counter_uniform(3, 5, 1));
}

}  // namespace
}  // namespace mlaserve::sampling
