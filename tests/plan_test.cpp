// `mlaserve plan` against what the ranks of the layouts it proposes really hold: the busiest
// rank's weight bytes that the planner computes from config.json alone equal the rank reports of
// `eval` under the same layout and formats.
#include <gtest/gtest.h>

#include <algorithm>

#include "support/golden.h"

namespace mlaserve::testing {
namespace {

using nlohmann::json;

json plan(const std::string& model_dir, const std::string& flags) {
  const CommandResult r =
      run_command(mlaserve_bin() + " plan --model " + model_dir +
                  " --sockets-per-host 4 --mem-per-host 1 --json " + flags + " 2>/dev/null");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return json::parse(r.output);
}

const json& layout(const json& plans, const std::string& name) {
  for (const json& p : plans)
    if (p["layout"] == name) return p;
  throw std::runtime_error("plan has no layout " + name);
}

std::string layout_flags(const json& p) {
  std::string flags =
      " --tp " + std::to_string(p["tp"].get<int>()) + " --dp " + std::to_string(p["dp"].get<int>());
  if (p["dp_attention"].get<bool>()) flags += " --enable-dp-attention";
  if (p["ep_moe"].get<bool>()) flags += " --enable-ep-moe";
  return flags;
}

// The busiest rank of `eval` on the model in `dir` (prompts `input`) under the planned layout
// holds what the plan says; with_resident: the packed copies' estimate too.
void expect_plan_matches_ranks(const std::filesystem::path& dir, const json& input,
                               const std::string& format_flags,
                               const std::vector<std::string>& layouts, bool with_resident = true) {
  const json plans = plan(dir.string(), format_flags);
  for (const std::string& name : layouts) {
    SCOPED_TRACE(dir.string() + " " + name + format_flags);
    const json& p = layout(plans, name);
    EXPECT_TRUE(p["fits"].get<bool>()) << p["why_not"];
    TempDir tmp;
    const json out = run_eval(dir, input, format_flags + layout_flags(p), tmp, 1);
    double values = 0, resident = 0;
    for (const json& rank : out["ranks"]) {
      values = std::max(values, rank["weight_value_bytes"].get<double>());
      resident = std::max(resident, rank["resident_weight_bytes"].get<double>());
    }
    EXPECT_EQ(values, p["weight_value_bytes"].get<double>());
    // The packed copies are estimated at their values' size; oneDNN pads these tiny shards.
    if (with_resident) {
      EXPECT_NEAR(resident, p["resident_weight_bytes"].get<double>(), 0.35 * resident);
    }
  }
}

void expect_plan_matches_ranks(const char* model, const std::string& format_flags,
                               const std::vector<std::string>& layouts) {
  const GoldenModel golden(model);
  expect_plan_matches_ranks(golden.dir(), golden.eval_input({0}), format_flags, layouts);
}

TEST(Plan, BytesPerRankMatchTheLoadedRanksOfAnFp8Checkpoint) {
  expect_plan_matches_ranks("tiny-v3-fp8", "",
                            {"tp=4 dp=2 dp-attention ep-moe", "tp=2 dp=2", "tp=4 dp=1"});
}

TEST(Plan, BytesPerRankMatchTheLoadedRanksQuantizedAtLoad) {
  expect_plan_matches_ranks("tiny-v2", "--quantization int8 --dtype float32",
                            {"tp=4 dp=4 dp-attention"});
}

// With NEXTN speculation the ranks also hold the MTP layer (and its latent KV layer).
TEST(Plan, CountsTheMtpLayerForSpeculativeDecoding) {
  const std::string model = "models/brown-tiny-mtp";
  const json plain = layout(plan(model, "--dtype float32"), "tp=2 dp=2");
  const json nextn =
      layout(plan(model, "--dtype float32 --speculative-algorithm NEXTN"), "tp=2 dp=2");
  ASSERT_TRUE(nextn["fits"].get<bool>()) << nextn["why_not"];
  EXPECT_NE(nextn["command"].get<std::string>().find("--speculative-algorithm NEXTN"),
            std::string::npos);
  TempDir tmp;
  const json out = run_eval(model, {{"prompts", {{{"ids", {0, 5, 6}}}}}},
                            "--dtype float32 --mtp --tp 2 --dp 2", tmp, 1);
  double values = 0;
  for (const json& rank : out["ranks"]) {
    values = std::max(values, rank["weight_value_bytes"].get<double>());
  }
  EXPECT_EQ(values, nextn["weight_value_bytes"].get<double>());
  EXPECT_GT(nextn["weight_value_bytes"].get<double>(), plain["weight_value_bytes"].get<double>());
  // brown-tiny has 4 layers: the MTP layer's KV makes a token 5/4 as large.
  const auto bytes_per_token = [](const json& p) {
    return p["kv_bytes_per_rank"].get<double>() / p["kv_tokens_per_group"].get<double>();
  };
  EXPECT_NEAR(bytes_per_token(nextn) / bytes_per_token(plain), 1.25, 1e-3);

  const CommandResult none =
      run_command(mlaserve_bin() + " plan --model models/brown-tiny --mem-per-host 1 " +
                  "--speculative-algorithm NEXTN 2>&1");
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.output.find("no multi-token-prediction layer"), std::string::npos) << none.output;
}

// DeepSeek-V4's shares come from its own sharding (heads by output group, experts in 32-column
// blocks or whole): a random V4 model in the released layout (FP8 blocks, FP4 experts).
TEST(Plan, BytesPerRankMatchTheLoadedRanksOfDeepseekV4) {
  TempDir tmp;
  json config = read_json("tests/data/configs/v4-tiny.json");
  config["moe_intermediate_size"] = 128;
  write_json(tmp / "config.json", config);
  const auto made =
      run_command(mlaserve_bin() + " make-model --config " + (tmp / "config.json").string() +
                  " --out " + (tmp / "model").string() + " --dtype fp8 --seed 3");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  // Weights only: the bf16 compressors' packed copies are left out of V4's estimate.
  expect_plan_matches_ranks(
      tmp / "model", {{"prompts", {{{"ids", {0, 5, 6}}}}}}, "",
      {"tp=4 dp=2 dp-attention", "tp=4 dp=4 dp-attention ep-moe", "tp=2 dp=2"}, false);
}

// The figures the DeepSeek-V4 release asks of a CPU server (bf16 KV, 8 requests of 32k): V4-Flash
// (FP8 + FP4 experts with E8M0 scales, ~146 GiB) on one 256 GiB host of 2 sockets split over
// both, and on a 192 GiB host as one rank; V4-Pro (~794 GiB) on two 768 GiB hosts, which no
// layout of fewer than all 4 sockets holds.
TEST(Plan, DeepseekV4FlashOnOneHostAndProOnTwo) {
  const std::string workload = " --concurrency 8 --context 32768 --json 2>/dev/null";
  const auto plans = [&](const std::string& config, const std::string& machines) {
    const CommandResult r = run_command(mlaserve_bin() + " plan --model tests/data/configs/" +
                                        config + machines + workload);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return json::parse(r.output);
  };
  const json flash = plans("deepseek-v4-flash", " --mem-per-host 256 --sockets-per-host 2");
  EXPECT_TRUE(flash[0]["fits"].get<bool>()) << flash[0].dump();
  EXPECT_TRUE(layout(flash, "tp=2 dp=2 dp-attention ep-moe")["fits"].get<bool>());
  EXPECT_FALSE(layout(flash, "tp=1 dp=2")["fits"].get<bool>());  // a whole copy per socket
  EXPECT_TRUE(plans("deepseek-v4-flash", " --mem-per-host 192")[0]["fits"].get<bool>());
  const json pro = plans("deepseek-v4-pro", " --mem-per-host 768 --hosts 2 --sockets-per-host 2");
  EXPECT_TRUE(pro[0]["fits"].get<bool>()) << pro[0].dump();
  EXPECT_TRUE(layout(pro, "tp=4 dp=4 dp-attention ep-moe")["fits"].get<bool>());
  EXPECT_FALSE(layout(pro, "tp=2 dp=2")["fits"].get<bool>());
  EXPECT_NE(pro[0]["command"].get<std::string>().find("mpirun -np 4"), std::string::npos);
}

TEST(Plan, ExplainsWhyNothingFits) {
  const GoldenModel golden("tiny-v3");
  const CommandResult r = run_command(mlaserve_bin() + " plan --model " + golden.dir().string() +
                                      " --mem-per-host 0.001 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("the weights do not fit in a rank's memory"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("no layout fits"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace mlaserve::testing
