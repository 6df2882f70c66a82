// Sampling on the real engine (brown-tiny, float32, one server for the suite): a seed reproduces
// its text and other seeds give other texts, top_k 1 is greedy, and at temperature 1 the first
// sampled token follows the softmax of the model's own logits, taken from `eval` (the static
// planner's forward, not the server's); top_k, top_p and min_p keep exactly the tokens their
// definitions give on that distribution.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <set>

#include "support/command.h"
#include "support/files.h"
#include "support/server_process.h"

namespace mlaserve::testing {
namespace {

using nlohmann::json;

constexpr const char* kPromptText = "The jury said that the";
constexpr int kMaxChoices = 128;  // the API's largest n

// softmax(logits) in double.
std::vector<double> softmax(const std::vector<double>& logits) {
  const double top = *std::max_element(logits.begin(), logits.end());
  std::vector<double> probs;
  for (const double logit : logits) probs.push_back(std::exp(logit - top));
  const double sum = std::accumulate(probs.begin(), probs.end(), 0.0);
  for (double& p : probs) p /= sum;
  return probs;
}

// Token ids by probability, most likely first.
std::vector<int> ranked(const std::vector<double>& probs) {
  std::vector<int> order(probs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return probs[a] > probs[b]; });
  return order;
}

// The chi-square statistic's value that a true null hypothesis exceeds with probability 1e-4,
// by the Wilson-Hilferty approximation (4% above the exact quantile at 3 degrees of freedom,
// 0.2% from 60 up): a real sampling bug fails the test, chance about once in 10,000 runs.
double chi_square_critical_1e4(int degrees_of_freedom) {
  constexpr double kZ = 3.7190;  // the standard normal's upper 1e-4 quantile
  const double k = degrees_of_freedom;
  const double h = 2.0 / (9.0 * k);
  return k * std::pow(1.0 - h + kZ * std::sqrt(h), 3);
}

struct ChiSquare {
  double statistic = 0.0;
  int degrees_of_freedom = 0;
};

// Observed counts of each token against `probs`: one bin per token expected at least 5 times
// (the test's usual condition), one for all the others together (merged into the smallest
// kept bin when even together they are expected fewer than 5 times).
ChiSquare chi_square(const std::vector<int>& tokens, const std::vector<double>& probs) {
  const double draws = static_cast<double>(tokens.size());
  std::vector<double> observed(probs.size(), 0.0);
  for (const int token : tokens) observed[static_cast<size_t>(token)] += 1.0;
  std::vector<double> bin_observed, bin_expected;
  double rest_observed = 0.0, rest_expected = 0.0;
  for (const int token : ranked(probs)) {
    const double expected = draws * probs[static_cast<size_t>(token)];
    if (expected >= 5.0) {
      bin_observed.push_back(observed[static_cast<size_t>(token)]);
      bin_expected.push_back(expected);
    } else {
      rest_observed += observed[static_cast<size_t>(token)];
      rest_expected += expected;
    }
  }
  if (rest_expected >= 5.0 || bin_expected.empty()) {
    bin_observed.push_back(rest_observed);
    bin_expected.push_back(rest_expected);
  } else {
    bin_observed.back() += rest_observed;
    bin_expected.back() += rest_expected;
  }
  ChiSquare result;
  for (size_t i = 0; i < bin_expected.size(); ++i) {
    const double diff = bin_observed[i] - bin_expected[i];
    result.statistic += diff * diff / bin_expected[i];
  }
  result.degrees_of_freedom = static_cast<int>(bin_expected.size()) - 1;
  return result;
}

class ServeSampling : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = std::make_unique<ServerProcess>("");
    if (server_->port() == 0) return;
    prompt_ = ServerApi(server_->port()).tokenize({{"text", kPromptText}});
    TempDir tmp;
    const json out = run_eval("models/brown-tiny", {{"prompts", {{{"ids", prompt_}}}}},
                              "--dtype float32", tmp, 0);
    probs_ = softmax(out["prompts"][0]["last_logits"].get<std::vector<double>>());
  }
  static void TearDownTestSuite() { server_.reset(); }

  void SetUp() override {
    ASSERT_GT(server_->port(), 0) << server_->log();
    ASSERT_FALSE(probs_.empty()) << "no reference logits from eval";
  }

  // The first token of `draws` one-token choices of the prompt, sampled with `params`: requests
  // of up to 128 choices, choice i seeded with first_seed + i.
  static std::vector<int> first_tokens(json params, int draws, int64_t first_seed) {
    std::vector<int> tokens;
    for (int done = 0; done < draws; done += kMaxChoices) {
      params["n"] = std::min(kMaxChoices, draws - done);
      params["seed"] = first_seed + done;
      params["max_new_tokens"] = 1;
      params["ignore_eos"] = true;
      const json body = {{"input_ids", prompt_}, {"sampling_params", params}};
      for (const json& choice : server_->call("/generate", &body)) {
        tokens.push_back(choice["output_ids"].at(0).get<int>());
      }
    }
    return tokens;
  }

  // 16 tokens of the prompt by /v1/completions with `params`.
  static std::string completion(json params) {
    params["prompt"] = kPromptText;
    params["max_tokens"] = 16;
    params["ignore_eos"] = true;
    return server_->call("/v1/completions", &params)["choices"][0]["text"].get<std::string>();
  }

  // Draws 512 first tokens with `params` and expects only tokens of `kept`, and each kept token
  // expected at least 20 times to appear (missing it by chance: below e^-20).
  static void expect_only(const json& params, const std::vector<int>& kept) {
    constexpr int kDraws = 512;
    const std::vector<int> tokens = first_tokens(params, kDraws, 5000);
    const std::set<int> allowed(kept.begin(), kept.end());
    const std::set<int> drawn(tokens.begin(), tokens.end());
    for (const int token : drawn) EXPECT_TRUE(allowed.contains(token)) << "drew " << token;
    double kept_mass = 0.0;
    for (const int token : kept) kept_mass += probs_[static_cast<size_t>(token)];
    for (const int token : kept) {
      if (kDraws * probs_[static_cast<size_t>(token)] / kept_mass >= 20.0) {
        EXPECT_TRUE(drawn.contains(token)) << "never drew " << token;
      }
    }
  }

  static std::unique_ptr<ServerProcess> server_;
  static std::vector<int> prompt_;
  static std::vector<double> probs_;  // of the first token, at temperature 1
};

std::unique_ptr<ServerProcess> ServeSampling::server_;
std::vector<int> ServeSampling::prompt_;
std::vector<double> ServeSampling::probs_;

TEST_F(ServeSampling, ASeedReproducesItsTextAndOtherSeedsDiffer) {
  const json sampled = {{"temperature", 1.0}};
  std::set<std::string> texts;
  for (int seed = 1; seed <= 8; ++seed) {
    json params = sampled;
    params["seed"] = seed;
    const std::string text = completion(params);
    EXPECT_EQ(completion(params), text) << "seed " << seed;
    texts.insert(text);
  }
  EXPECT_EQ(texts.size(), 8u) << "eight seeds gave only " << texts.size() << " different texts";
}

TEST_F(ServeSampling, TopKOneIsGreedy) {
  const std::string greedy = completion({{"temperature", 0.0}});
  for (int seed = 1; seed <= 4; ++seed) {
    EXPECT_EQ(completion({{"temperature", 1.0}, {"top_k", 1}, {"seed", seed}}), greedy)
        << "seed " << seed;
  }
}

// 4,096 draws at temperature 1 against the reference distribution (about 0.5 s). The same draws
// against the distribution at temperature 0.8 must fail, or the test could not see a sampling bug.
TEST_F(ServeSampling, FirstTokenFollowsTheSoftmaxOfTheLogits) {
  const std::vector<int> tokens = first_tokens({{"temperature", 1.0}}, 4096, 1000);
  const ChiSquare fit = chi_square(tokens, probs_);
  ASSERT_GE(fit.degrees_of_freedom, 5) << "the prompt's next token is too predictable to test";
  EXPECT_LT(fit.statistic, chi_square_critical_1e4(fit.degrees_of_freedom))
      << fit.degrees_of_freedom << " degrees of freedom";

  std::vector<double> colder_logits;
  for (const double p : probs_) colder_logits.push_back(std::log(p) / 0.8);
  const ChiSquare wrong = chi_square(tokens, softmax(colder_logits));
  EXPECT_GT(wrong.statistic, chi_square_critical_1e4(wrong.degrees_of_freedom))
      << "the test cannot tell temperature 1 from 0.8";
}

// Each filter's parameter is put halfway between two of its thresholds on the reference
// distribution, so that exactly the 4 most likely tokens pass it, far from rounding at the edge.
TEST_F(ServeSampling, TopKTopPAndMinPKeepTheTokensTheirDefinitionsGive) {
  const std::vector<int> order = ranked(probs_);
  const std::vector<int> top4(order.begin(), order.begin() + 4);
  const auto p = [&](size_t rank) { return probs_[static_cast<size_t>(order[rank])]; };
  {
    SCOPED_TRACE("top_k 4");
    expect_only({{"temperature", 1.0}, {"top_k", 4}}, top4);
  }
  {
    // The nucleus: the fewest most likely tokens whose mass reaches top_p.
    SCOPED_TRACE("top_p");
    const double mass3 = p(0) + p(1) + p(2);
    expect_only({{"temperature", 1.0}, {"top_p", mass3 + p(3) / 2}}, top4);
  }
  {
    // min_p keeps the tokens at least min_p times as likely as the most likely one.
    SCOPED_TRACE("min_p");
    expect_only({{"temperature", 1.0}, {"min_p", (p(3) + p(4)) / 2 / p(0)}}, top4);
  }
}

}  // namespace
}  // namespace mlaserve::testing
