// Per-rank counters of the rank report: each rank keeps only its shards resident, and dp_linear
// shards only the extend steps that reach --dp-linear-min-tokens.
#include <algorithm>
#include <functional>

#include "support/golden.h"

namespace mlaserve::testing {
namespace {

using nlohmann::json;

std::vector<double> per_rank(const json& out, const std::function<double(const json&)>& field) {
  std::vector<double> values;
  for (const auto& rank : out["ranks"]) values.push_back(field(rank));
  return values;
}

// Without packed copies, whose padding to oneDNN's 64-row blocks would swamp these tiny models'
// shards (16 rows of an expert at tp 4).
std::vector<double> resident_bytes(const GoldenModel& golden, const std::string& flags) {
  TempDir tmp;
  const json out =
      run_eval(golden, golden.eval_input({0}), flags + " --weight-packing off", tmp, 1);
  return per_rank(out, [](const json& r) { return r["resident_weight_bytes"].get<double>(); });
}

TEST(ResidentWeights, TpRanksHoldTheirShardsAndEpRanksAreBalanced) {
  for (const char* model : {"tiny-v2", "tiny-v3"}) {
    SCOPED_TRACE(model);
    const GoldenModel golden(model);
    const double whole = resident_bytes(golden, "--tp 1").at(0);
    // Only the small replicated parts (q_a/kv_a, router, norms) are on every rank.
    const std::vector<double> tp4 = resident_bytes(golden, "--tp 4");
    ASSERT_EQ(tp4.size(), 4u);
    for (double bytes : tp4) EXPECT_LT(bytes, whole / 2);
    const std::vector<double> ep =
        resident_bytes(golden, "--tp 4 --dp 2 --enable-dp-attention --enable-ep-moe");
    ASSERT_EQ(ep.size(), 4u);
    EXPECT_LT(*std::max_element(ep.begin(), ep.end()),
              1.1 * *std::min_element(ep.begin(), ep.end()));
    EXPECT_LT(ep[0], whole);
  }
}

// 7 prompt tokens over 4 ranks (shards 2, 2, 2, 1), then 3 decode steps of 1 token.
TEST(DpLinear, ShardsOnlyExtendStepsFromTheThresholdOn) {
  const GoldenModel golden("tiny-v3");
  const json input = {{"prompts", {{{"ids", {3, 14, 15, 92, 65, 35, 89}}}}}};
  const std::string flags = "--dtype float32 --tp 4 --check-collectives";
  const auto qkv_a = [&](const std::string& extra, int new_tokens) {
    TempDir tmp;
    const json out = run_eval(golden, input, flags + extra, tmp, new_tokens);
    return per_rank(out, [](const json& r) { return r["flops"]["qkv_a"].get<double>(); });
  };
  const std::vector<double> prefill = qkv_a("", 0), replicated = qkv_a("", 4);
  const std::vector<double> below = qkv_a(" --enable-dp-linear --dp-linear-min-tokens 8", 4);
  const std::vector<double> sharded = qkv_a(" --enable-dp-linear --dp-linear-min-tokens 7", 4);
  ASSERT_EQ(replicated.size(), 4u);
  ASSERT_TRUE(below.size() == 4 && sharded.size() == 4 && prefill.size() == 4);
  const std::vector<double> shard = {2, 2, 2, 1};
  for (size_t r = 0; r < 4; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_GT(replicated[r], prefill[r]);  // the decode steps did run q_a/kv_a
    EXPECT_DOUBLE_EQ(below[r], replicated[r]);
    // The prefill drops to this rank's shard; the decode steps stay replicated.
    EXPECT_DOUBLE_EQ(sharded[r], replicated[r] - prefill[r] * (7 - shard[r]) / 7);
  }
}

}  // namespace
}  // namespace mlaserve::testing
