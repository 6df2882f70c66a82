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

// The busiest rank of `eval` under the planned layout holds what the plan says.
void expect_plan_matches_ranks(const char* model, const std::string& format_flags,
                               const std::vector<std::string>& layouts) {
  const GoldenModel golden(model);
  const json plans = plan(golden.dir().string(), format_flags);
  for (const std::string& name : layouts) {
    SCOPED_TRACE(std::string(model) + " " + name + format_flags);
    const json& p = layout(plans, name);
    EXPECT_TRUE(p["fits"].get<bool>()) << p["why_not"];
    TempDir tmp;
    const json out =
        run_eval(golden, golden.eval_input({0}), format_flags + layout_flags(p), tmp, 1);
    double values = 0, resident = 0;
    for (const json& rank : out["ranks"]) {
      values = std::max(values, rank["weight_value_bytes"].get<double>());
      resident = std::max(resident, rank["resident_weight_bytes"].get<double>());
    }
    EXPECT_EQ(values, p["weight_value_bytes"].get<double>());
    // The packed copies are estimated at their values' size; oneDNN pads these tiny shards.
    EXPECT_NEAR(resident, p["resident_weight_bytes"].get<double>(), 0.35 * resident);
  }
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
