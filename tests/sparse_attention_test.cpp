// DeepSeek-V3.2 (DeepSeek Sparse Attention) on random models made from
// tests/data/configs/odd-v32.json (index_topk 12, so most positions of these prompts attend to
// a selection, and one continuation crosses from dense to sparse) against the independent
// float64 forward in tests/reference/deepseek_reference.py: the last prompt position's and every
// greedy step's logits within 1e-4 relative L2 (float32), the greedy tokens equal, at tp 1 and on
// the parallel layouts, from bf16 and FP8 weights. The reference reports how close each
// selection and each greedy choice came to a tie; a prompt too close to one is a bad test case,
// not an engine error, and says so. Then the load errors of a malformed V3.2 model.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>

#include "support/command.h"
#include "support/files.h"
#include "support/golden.h"

namespace mlaserve::testing {
namespace {

using nlohmann::json;

// Token prompts of 40, 25 and 6 tokens (the last crosses index_topk during its continuation).
json prompts() {
  json out = json::array();
  for (int n : {40, 25, 6}) {
    std::vector<int> ids = {0};
    for (int j = 1; j < n; ++j) ids.push_back((n * 31 + j * 17) % 297 + 2);
    out.push_back({{"ids", ids}});
  }
  return out;
}

constexpr int kNewTokens = 12;

// One made model (bf16 or fp8 weights) and the float64 reference outputs for it, shared by the
// layouts.
struct MadeSparseModel {
  TempDir tmp;
  json reference;

  explicit MadeSparseModel(const std::string& dtype) {
    const auto made =
        run_command(mlaserve_bin() + " make-model --config tests/data/configs/odd-v32.json --out " +
                    (tmp / "model").string() + " --seed 11 --dtype " + dtype);
    EXPECT_EQ(made.exit_code, 0) << made.output;
    reference = run_float64_reference(tmp / "model", {{"prompts", prompts()}}, kNewTokens, tmp);
  }
};

const MadeSparseModel& made(const std::string& dtype) {
  static std::map<std::string, std::unique_ptr<MadeSparseModel>> models;
  auto& m = models[dtype];
  if (!m) m = std::make_unique<MadeSparseModel>(dtype);
  return *m;
}

struct SparseCase {
  std::string dtype;  // bf16 | fp8 (the checkpoint's weights)
  std::string flags;  // layout
};

class SparseAttention : public ::testing::TestWithParam<SparseCase> {};

TEST_P(SparseAttention, LogitsAndGreedyTokensEqualTheFloat64Reference) {
  const MadeSparseModel& model = made(GetParam().dtype);
  ASSERT_TRUE(model.reference.contains("prompts")) << "the reference did not run";
  TempDir tmp;
  const json out = run_eval(model.tmp / "model", {{"prompts", prompts()}},
                            "--dtype float32 --step-logits " + GetParam().flags, tmp, kNewTokens);
  ASSERT_TRUE(out.contains("prompts"));
  for (size_t i = 0; i < prompts().size(); ++i) {
    SCOPED_TRACE("prompt " + std::to_string(i));
    const json& want = model.reference["prompts"][i];
    const json& got = out["prompts"][i];
    // Test-case quality: no selection within 2e-5 of a tie, no greedy choice within 1e-4 (the
    // float32 logits sit ~1e-5 from the reference here).
    ASSERT_FALSE(want["min_selection_margin"].is_null()) << "no query of the prompt was sparse";
    ASSERT_GE(want["min_selection_margin"].get<double>(), 2e-5) << "choose another prompt";
    for (const json& margin : want["greedy_margins"]) ASSERT_GE(margin.get<double>(), 1e-4);
    EXPECT_EQ(got["greedy"], want["greedy"]);
    const json& want_steps = want["greedy_logits"];
    const json& got_steps = got["greedy_logits"];
    ASSERT_EQ(got_steps.size(), want_steps.size());
    for (size_t s = 0; s < want_steps.size(); ++s) {
      const auto g = got_steps[s].get<std::vector<float>>();
      const auto w = want_steps[s].get<std::vector<float>>();
      ASSERT_EQ(g.size(), w.size());
      EXPECT_LT(relative_l2(g, w.data(), g.size()), 1e-4) << "greedy step " << s;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, SparseAttention,
    ::testing::Values(SparseCase{"bf16", ""}, SparseCase{"bf16", "--tp 2"},
                      SparseCase{"bf16", "--tp 4 --dp 2 --enable-dp-attention --enable-dp-linear"},
                      SparseCase{"bf16", "--tp 4 --dp 4 --enable-dp-attention --enable-ep-moe"},
                      SparseCase{"fp8", ""},
                      SparseCase{"fp8", "--tp 4 --dp 2 --enable-dp-attention --enable-dp-linear"}),
    [](const auto& info) {
      std::string name = info.param.dtype + "_" + info.param.flags;
      for (char& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return name;
    });

// Edits the made model's config.json or drops one tensor from a copy of it, then expects the
// load to fail naming the field or tensor.
class SparseAttentionLoadErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto made =
        run_command(mlaserve_bin() + " make-model --config tests/data/configs/odd-v32.json --out " +
                    (tmp_ / "model").string() + " --seed 3");
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }
  void expect_load_error(const std::string& message) {
    write_json(tmp_ / "in.json", {{"prompts", {{{"ids", {1, 2, 3}}}}}});
    expect_fails_fast(mlaserve_bin() + " eval --model " + (tmp_ / "model").string() + " --input " +
                          (tmp_ / "in.json").string() + " --output " + (tmp_ / "out.json").string(),
                      60, {message});
  }
  void edit_config(const std::function<void(json&)>& edit) {
    json config = read_json(tmp_ / "model/config.json");
    edit(config);
    write_json(tmp_ / "model/config.json", config);
  }
  TempDir tmp_;
};

TEST_F(SparseAttentionLoadErrors, NonPositiveTopKIsRefused) {
  edit_config([](json& c) { c["index_topk"] = 0; });
  expect_load_error("'index_topk' must be positive, got 0");
}

TEST_F(SparseAttentionLoadErrors, MissingIndexerFieldIsNamed) {
  edit_config([](json& c) { c.erase("index_head_dim"); });
  expect_load_error("missing required key 'index_head_dim'");
}

TEST_F(SparseAttentionLoadErrors, IndexerShapesMustFollowTheConfig) {
  edit_config([](json& c) { c["index_head_dim"] = 32; });  // the tensors hold 16
  expect_load_error("tensor 'model.layers.0.self_attn.indexer.wq_b.weight' has shape [48, 40]");
}

TEST_F(SparseAttentionLoadErrors, AnIndexerConfigWithoutItsWeightsNamesTheTensor) {
  // A V3 model's weights under a V3.2 config: the first indexer tensor is missing.
  const auto made =
      run_command(mlaserve_bin() + " make-model --config tests/data/configs/odd-v3.json --out " +
                  (tmp_ / "model").string() + " --seed 3");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  edit_config([](json& c) {
    c["model_type"] = "deepseek_v32";
    c["index_n_heads"] = 3;
    c["index_head_dim"] = 16;
    c["index_topk"] = 12;
  });
  expect_load_error("model.layers.0.self_attn.indexer.wq_b.weight");
}

}  // namespace
}  // namespace mlaserve::testing
