// Shape-generic code: models made by make-model with shapes unlike the golden ones must load
// and run, and the two MLA paths must agree with each other: the incremental (absorbed, KV
// cache) decode of a continuation gives the same logits as a full prefill (normal path) of it.
#include <gtest/gtest.h>

#include "support/command.h"
#include "support/files.h"
#include "support/golden.h"

namespace mlaserve::testing {
namespace {

using nlohmann::json;

struct MadeModel {
  std::string config;
  std::string format;  // bf16 | fp8
};

class MakeModel : public ::testing::TestWithParam<MadeModel> {
 protected:
  json eval(const json& prompts, int new_tokens, const std::string& flags) {
    write_json(tmp_ / "in.json", {{"prompts", prompts}});
    const auto r = run_command(mlaserve_bin() + " eval --model " + (tmp_ / "model").string() +
                               " --input " + (tmp_ / "in.json").string() + " --output " +
                               (tmp_ / "out.json").string() + " --dtype float32 --max-new-tokens " +
                               std::to_string(new_tokens) + " " + flags);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return read_json(tmp_ / "out.json");
  }
  TempDir tmp_;
};

TEST_P(MakeModel, DecodeMatchesFullRecomputeAndBatchingChangesNothing) {
  const auto made =
      run_command(mlaserve_bin() + " make-model --config tests/data/configs/" + GetParam().config +
                  " --out " + (tmp_ / "model").string() + " --seed 7 --dtype " + GetParam().format);
  ASSERT_EQ(made.exit_code, 0) << made.output;

  const json prompts = json::array(
      {{{"ids", {5, 17, 42, 99, 3, 250, 7}}}, {{"ids", {1}}}, {{"ids", {200, 11, 11, 11}}}});
  const int n_new = 12;
  const json batched = eval(prompts, n_new, "--step-logits");

  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE("prompt " + std::to_string(i));
    const json& got = batched["prompts"][i];
    // The same prompt alone gives the same tokens and logits as inside the batch.
    const json alone = eval(json::array({prompts[i]}), n_new, "--step-logits")["prompts"][0];
    EXPECT_EQ(alone["greedy"], got["greedy"]);
    EXPECT_LT(
        relative_l2(alone["last_logits"].get<std::vector<float>>(),
                    got["last_logits"].get<std::vector<float>>().data(), got["last_logits"].size()),
        1e-5);

    // Full prefill of prompt + greedy[:-1]: its positions from the prompt's last one on must
    // give the logits the incremental decode chose each greedy token from.
    std::vector<int> full = prompts[i]["ids"].get<std::vector<int>>();
    const auto greedy = got["greedy"].get<std::vector<int>>();
    full.insert(full.end(), greedy.begin(), greedy.end() - 1);
    const json recompute = eval(json::array({{{"ids", full}}}), 0, "--all-logits")["prompts"][0];
    const size_t first = prompts[i]["ids"].size() - 1;
    double norm = 0;
    for (size_t s = 0; s < greedy.size(); ++s) {
      const auto step = got["greedy_logits"][s].get<std::vector<float>>();
      const auto ref = recompute["all_logits"][first + s].get<std::vector<float>>();
      for (float v : step) ASSERT_TRUE(std::isfinite(v));
      for (float v : step) norm += v * v;
      EXPECT_LT(relative_l2(step, ref.data(), ref.size()), 1e-4) << "step " << s;
    }
    EXPECT_GT(norm, 0.0);
  }
}

// --seed decides the weights: the same seed writes the same checkpoint twice, another seed a
// different one (config.json alike).
TEST(MakeModelSeed, SameSeedSameWeightsOtherSeedOtherWeights) {
  const TempDir tmp;
  const auto make = [&](const std::string& name, int seed) {
    const auto made =
        run_command(mlaserve_bin() + " make-model --config tests/data/configs/odd-v3.json --out " +
                    (tmp / name).string() + " --seed " + std::to_string(seed));
    EXPECT_EQ(made.exit_code, 0) << made.output;
    return read_text(tmp / name / "model.safetensors");
  };
  const std::string first = make("a", 7), again = make("b", 7), other = make("c", 8);
  ASSERT_GT(first.size(), 1000u);
  EXPECT_TRUE(first == again) << "seed 7 wrote two different checkpoints";
  EXPECT_EQ(first.size(), other.size());
  EXPECT_FALSE(first == other) << "seeds 7 and 8 wrote the same checkpoint";
  EXPECT_EQ(read_text(tmp / "a" / "config.json"), read_text(tmp / "c" / "config.json"));
}

INSTANTIATE_TEST_SUITE_P(Shapes, MakeModel,
                         ::testing::Values(MadeModel{"odd-v3.json", "bf16"},
                                           MadeModel{"odd-v3.json", "fp8"},
                                           MadeModel{"odd-v2-lite.json", "bf16"}),
                         [](const auto& info) {
                           std::string n =
                               info.param.config.substr(0, info.param.config.find('.')) + "_" +
                               info.param.format;
                           for (char& c : n)
                             c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });

}  // namespace
}  // namespace mlaserve::testing
