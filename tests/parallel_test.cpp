// Every parallel layout gives the golden logits and greedy tokens (float32), and the edges of
// the plan (idle groups, uneven dp_linear shards, prefill beside decode, one-token prompts)
// behave; counters show dp_linear's FLOP cut and that only legacy padding pads.
#include "support/golden.h"

namespace mlaserve::testing {
namespace {

using nlohmann::json;

struct Layout {
  std::string model;
  std::string flags;
};

class Layouts : public ::testing::TestWithParam<Layout> {};

TEST_P(Layouts, MatchGolden) {
  const GoldenModel golden(GetParam().model);
  TempDir tmp;
  const json out = run_eval(
      golden, golden.eval_input(),
      "--dtype float32 --all-logits --step-logits --check-collectives " + GetParam().flags, tmp);
  ASSERT_TRUE(out.contains("prompts"));
  for (size_t i = 0; i < golden.prompts(); ++i) golden.check(out["prompts"][i], i, {});
  for (const auto& rank : out["ranks"]) EXPECT_EQ(rank["padded_rows"], 0) << rank.dump();
  // max_len and exact return the MLP rows to their groups by reduce-scatter (plan_scatter).
  const std::string& flags = GetParam().flags;
  for (const auto& [padding, op] :
       {std::pair{"max_len", "reduce_scatter"}, std::pair{"exact", "reduce_scatter_v"}}) {
    if (flags.find(padding) == std::string::npos) continue;
    for (const auto& rank : out["ranks"])
      EXPECT_GT(rank["collectives"][op]["calls"], 0) << rank.dump();
  }
}

std::vector<Layout> layouts() {
  const std::vector<std::string> base = {"--tp 2", "--tp 4", "--tp 8", "--tp 2 --dp 2"};
  const std::vector<std::string> dp_attention = {"--tp 4 --dp 2", "--tp 4 --dp 4", "--tp 8 --dp 2"};
  std::vector<Layout> out;
  // tiny-v3-fp8 keeps its FP8 codes and block scales (--quantization auto): every layout must
  // shard them along the checkpoint's 128-blocks, or inside one (tp 8 splits its 128 expert
  // columns into 16-column shards that start mid-block).
  for (const char* model : {"tiny-v2", "tiny-v3", "tiny-v3-fp8"}) {
    for (const auto& f : base) out.push_back({model, f});
    for (const auto& f : dp_attention) {
      const std::string dpa = f + " --enable-dp-attention";
      out.push_back({model, dpa});
      out.push_back({model, dpa + " --enable-dp-linear --dp-linear-min-tokens 1"});
      out.push_back({model, dpa + " --enable-ep-moe"});
    }
    for (const char* padding : {" --dp-padding max_len", " --dp-padding exact"}) {
      out.push_back({model, "--tp 4 --dp 2 --enable-dp-attention" + std::string(padding)});
    }
  }
  out.push_back({"tiny-v3", "--tp 8 --dp 2 --enable-dp-attention --dp-padding max_len"});
  out.push_back({"tiny-v3", "--tp 8 --dp 2 --enable-dp-attention --dp-padding exact"});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Parallel, Layouts, ::testing::ValuesIn(layouts()), [](const auto& info) {
  std::string n = info.param.model + info.param.flags;
  for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return n;
});

// One request across dp 4: three groups idle, yet every rank ran every step (they join each
// collective with 0 rows) and no MLP row was padded.
TEST(ParallelEdges, OneRequestAcrossFourGroups) {
  const GoldenModel golden("tiny-v3");
  TempDir tmp;
  const json out = run_eval(golden, golden.eval_input({2}),
                            "--dtype float32 --tp 4 --dp 4 --enable-dp-attention "
                            "--all-logits --step-logits --check-collectives",
                            tmp);
  ASSERT_TRUE(out.contains("prompts"));
  golden.check(out["prompts"][0], 2, {});
  for (const auto& rank : out["ranks"]) {
    EXPECT_EQ(rank["steps"], golden.n_greedy()) << rank.dump();
    EXPECT_EQ(rank["padded_rows"], 0) << rank.dump();
  }
}

// Three prompts over two groups, one prefill per step: in the second step group 0 prefills its
// second prompt while group 1 decodes. Prompt 0 has a single token.
TEST(ParallelEdges, PrefillBesideDecodeAndOneTokenPrompt) {
  const GoldenModel golden("tiny-v2");
  TempDir tmp;
  const json out =
      run_eval(golden, golden.eval_input({0, 1, 2}),
               "--dtype float32 --tp 4 --dp 2 --enable-dp-attention --prefill-per-step 1 "
               "--step-logits --check-collectives",
               tmp);
  ASSERT_TRUE(out.contains("prompts"));
  for (size_t i = 0; i < 3; ++i) golden.check(out["prompts"][i], i, {});
  EXPECT_EQ(out["ranks"][0]["steps"],
            golden.n_greedy() + 1);  // one extra step for the late prefill
}

// dp_linear over 4 ranks with 7 tokens: shards of 2, 2, 2, 1 rows, the q_a/kv_a FLOPs drop to
// that share on each rank, and the logits equal the replicated computation (to float32
// rounding: a 2-row shard may take the GEMV kernel where 7 rows take the GEMM one).
TEST(ParallelEdges, DpLinearSevenTokensOverFourRanks) {
  const GoldenModel golden("tiny-v3");
  TempDir tmp_on, tmp_off;
  const json input = {{"prompts", {{{"ids", {3, 14, 15, 92, 65, 35, 89}}}}}};
  const std::string flags = "--dtype float32 --tp 4 --all-logits --check-collectives";
  const json on =
      run_eval(golden, input, flags + " --enable-dp-linear --dp-linear-min-tokens 1", tmp_on, 0);
  const json off = run_eval(golden, input, flags, tmp_off, 0);
  ASSERT_TRUE(on.contains("ranks") && off.contains("ranks"));
  const std::vector<double> shard = {2, 2, 2, 1};
  for (size_t r = 0; r < 4; ++r) {
    const double replicated = off["ranks"][r]["flops"]["qkv_a"].get<double>();
    EXPECT_GT(replicated, 0);
    EXPECT_DOUBLE_EQ(on["ranks"][r]["flops"]["qkv_a"].get<double>(), replicated * shard[r] / 7)
        << "rank " << r;
    EXPECT_EQ(on["ranks"][r]["flops"]["q_b"], off["ranks"][r]["flops"]["q_b"]);
  }
  for (size_t t = 0; t < 7; ++t) {
    const auto a = on["prompts"][0]["all_logits"][t].get<std::vector<float>>();
    const auto b = off["prompts"][0]["all_logits"][t].get<std::vector<float>>();
    EXPECT_LT(relative_l2(a, b.data(), b.size()), 1e-5) << "position " << t;
  }
}

// Legacy padding (pre-#4390) pads every group to the global maximum: with one request over
// dp 2 the MLP runs 2 rows per step instead of 1. The default pads nothing. Same tokens.
TEST(ParallelEdges, LegacyPaddingCountsPaddedRows) {
  const GoldenModel golden("tiny-v3");
  TempDir tmp_legacy, tmp_default;
  const std::string flags =
      "--dtype float32 --tp 2 --dp 2 --enable-dp-attention --check-collectives";
  const json legacy =
      run_eval(golden, golden.eval_input({3}), flags + " --dp-padding legacy", tmp_legacy);
  const json normal = run_eval(golden, golden.eval_input({3}), flags, tmp_default);
  ASSERT_TRUE(legacy.contains("ranks") && normal.contains("ranks"));
  const int prompt_len = static_cast<int>(golden.prompt(3)["ids"].size());
  // Prefill pads the idle group to the prompt length, each decode step to 1 row.
  EXPECT_EQ(legacy["ranks"][0]["padded_rows"], prompt_len + golden.n_greedy() - 1);
  EXPECT_EQ(normal["ranks"][0]["padded_rows"], 0);
  EXPECT_EQ(legacy["prompts"][0]["greedy"], normal["prompts"][0]["greedy"]);
  golden.check(legacy["prompts"][0], 3, {});
}

}  // namespace
}  // namespace mlaserve::testing
