#include "support/demo_reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "support/command.h"
#include "support/files.h"

namespace mlaserve::testing {

std::vector<int> top_ids(const std::vector<float>& logits, size_t k) {
  std::vector<int> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + static_cast<long>(k), ids.end(), [&](int a, int b) {
    return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)];
  });
  ids.resize(k);
  return ids;
}

void expect_demo_reference_prompts(const std::string& model_dir, const std::string& flags) {
  const nlohmann::json reference = read_json(model_dir + "/reference.json");
  const nlohmann::json& prompts = reference["prompts"];
  nlohmann::json input = {{"prompts", nlohmann::json::array()}};
  size_t longest = 0;
  for (const nlohmann::json& p : prompts) {
    input["prompts"].push_back({{"ids", p["ids"]}});
    longest = std::max(longest, p["greedy_ids"].size());
  }
  TempDir tmp;
  const nlohmann::json out =
      run_eval(model_dir, input, "--dtype float32 " + flags, tmp, static_cast<int>(longest));
  ASSERT_TRUE(out.contains("prompts"));
  for (size_t i = 0; i < prompts.size(); ++i) {
    const nlohmann::json& want = prompts[i];
    const nlohmann::json& got = out["prompts"][i];
    SCOPED_TRACE(want["prompt"].get<std::string>());
    const auto logits = got["last_logits"].get<std::vector<float>>();
    const auto want_ids = want["top10_ids"].get<std::vector<int>>();
    const auto want_logits = want["top10_logits"].get<std::vector<double>>();
    EXPECT_EQ(top_ids(logits, want_ids.size()), want_ids);
    for (size_t k = 0; k < want_ids.size(); ++k) {
      EXPECT_NEAR(logits[static_cast<size_t>(want_ids[k])], want_logits[k],
                  1e-4 * std::fabs(want_logits[k]))
          << "top " << k << ", id " << want_ids[k];
    }
    const auto want_greedy = want["greedy_ids"].get<std::vector<int>>();
    const auto got_greedy = got["greedy"].get<std::vector<int>>();
    ASSERT_GE(got_greedy.size(), want_greedy.size());
    EXPECT_EQ(std::vector<int>(got_greedy.begin(),
                               got_greedy.begin() + static_cast<long>(want_greedy.size())),
              want_greedy);
  }
}

}  // namespace mlaserve::testing
