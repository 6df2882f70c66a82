// The layout planner on the published DeepSeek-V3 and V2-Lite shapes: what fits where, and the
// relations between layouts that follow from the sharding (the bytes themselves are held to the
// loader in footprint_test and to the rank reports in tests/plan_test.cpp).
#include "parallel/layout_planner.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace mlaserve::parallel {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

struct Planner {
  model::ModelConfig cfg;
  model::WeightFormat format;

  explicit Planner(const char* config, model::Quantization q = model::Quantization::Auto)
      : cfg(model::ModelConfig::load(std::string("tests/data/configs/") + config)),
        format(model::resolve_weight_format({kernels::WeightType::BF16, q}, cfg)) {}

  std::vector<LayoutPlan> plan(const Machines& m, const Workload& w = {}) const {
    return plan_layouts(cfg, format, KvDtype::BFloat16, model::stored_fp8_by_convention, m, w);
  }
};

const LayoutPlan& find(const std::vector<LayoutPlan>& plans, const std::string& describe) {
  const auto it = std::find_if(plans.begin(), plans.end(), [&](const LayoutPlan& p) {
    return p.options.describe() == describe;
  });
  if (it == plans.end()) throw std::runtime_error("no layout " + describe);
  return *it;
}

TEST(LayoutPlanner, V3InFp8NeedsMoreThanOneHalfTerabyteHost) {
  const Planner v3("deepseek-v3");
  for (const LayoutPlan& p :
       v3.plan({.hosts = 1, .sockets_per_host = 2, .mem_per_host_bytes = 512 * kGiB})) {
    EXPECT_FALSE(p.fits) << p.options.describe();
    EXPECT_FALSE(p.why_not.empty());
  }
  const auto plans =
      v3.plan({.hosts = 1, .sockets_per_host = 2, .mem_per_host_bytes = 1024 * kGiB});
  EXPECT_TRUE(plans.front().fits);
  EXPECT_TRUE(find(plans, "tp=2 dp=1").fits);
  EXPECT_FALSE(find(plans, "tp=1 dp=2").fits);  // two whole replicas: 1.3 TB
}

// 4-bit weights put the 671B-1T models on the 2-socket hosts people own: DeepSeek-V3 at int4
// (groups of 32: ~398 GiB) on a 512 GiB host, Kimi-K2-Thinking as released (routed experts
// int4, the rest bf16: ~618 GiB) on a 768 GiB one but not on 512 GiB.
TEST(LayoutPlanner, FourBitWeightsFitTheHostsPeopleOwn) {
  const Machines half{.hosts = 1, .sockets_per_host = 2, .mem_per_host_bytes = 512 * kGiB};
  const Machines three_quarters{
      .hosts = 1, .sockets_per_host = 2, .mem_per_host_bytes = 768 * kGiB};
  const Planner v3("deepseek-v3", model::Quantization::Int4);
  EXPECT_TRUE(find(v3.plan(half), "tp=2 dp=1").fits);
  const Planner k2("kimi-k2-thinking");
  EXPECT_EQ(k2.format.quantization, model::Quantization::Int4);
  EXPECT_TRUE(find(k2.plan(three_quarters), "tp=2 dp=1").fits);
  EXPECT_FALSE(find(k2.plan(half), "tp=2 dp=1").fits);
}

TEST(LayoutPlanner, ShardingDividesTheWeightsAndDpAttentionMultipliesTheCache) {
  const Planner v3("deepseek-v3");
  const Machines m{.hosts = 2, .sockets_per_host = 2, .mem_per_host_bytes = 1024 * kGiB};
  const auto plans = v3.plan(m);
  const LayoutPlan& tp2 = find(plans, "tp=2 dp=2");  // two replicas of tp 2
  const LayoutPlan& tp4 = find(plans, "tp=4 dp=1");
  const LayoutPlan& dpa = find(plans, "tp=4 dp=4 dp-attention");
  // The routed experts (96 % of V3) split over the ranks; the replicated part (q_a / kv_a, the
  // router) does not.
  EXPECT_NEAR(static_cast<double>(tp4.weight_value_bytes) / tp2.weight_value_bytes, 0.5, 0.02);
  EXPECT_GT(tp4.weight_value_bytes * 4, 671e9);
  // DP attention with a = 1 holds each group's tokens once instead of on all 4 ranks: 4x the
  // cache, with the same attention weights on every rank (a little less left for the cache).
  EXPECT_GT(dpa.kv_tokens, 3 * tp4.kv_tokens);
  EXPECT_GT(dpa.weight_value_bytes, tp4.weight_value_bytes);
  EXPECT_EQ(find(plans, "tp=1 dp=4").why_not, "the weights do not fit in a rank's memory");
}

TEST(LayoutPlanner, BatchingSharesTheWeightStreamAndTpCommunicates) {
  const Planner lite("deepseek-v2-lite");
  // V2-Lite in bf16 is 31 GB, held twice (the row-major values for decode, oneDNN's packed copy
  // for prefill): 63 GB on each replica's ranks.
  const Machines m{.hosts = 1, .sockets_per_host = 4, .mem_per_host_bytes = 512 * kGiB};
  const auto one = lite.plan(m, {.context = 4096, .concurrency = 1});
  const auto many = lite.plan(m, {.context = 4096, .concurrency = 32});
  for (const LayoutPlan& p : one) {
    SCOPED_TRACE(p.options.describe());
    ASSERT_TRUE(p.fits) << p.why_not;
    // 32 tokens (8 per replica of tp=1 dp=4) pick most of the 64 experts, but read the
    // attention, dense and shared weights once.
    EXPECT_LT(find(many, p.options.describe()).decode_bytes_per_token,
              p.decode_bytes_per_token / 2);
  }
  EXPECT_EQ(find(one, "tp=1 dp=4").comm_bytes_per_token, 0.0);
  EXPECT_LT(find(one, "tp=4 dp=4 dp-attention").comm_bytes_per_token,
            find(one, "tp=4 dp=1").comm_bytes_per_token);
  // Four replicas each stream the whole model for one token; tp 4 streams a quarter per rank.
  EXPECT_GT(find(one, "tp=1 dp=4").decode_bytes_per_token,
            3 * find(one, "tp=4 dp=1").decode_bytes_per_token);
  // Sorted: no fitting layout after one that does not fit, decode bytes non-decreasing up to
  // the 2 % tie.
  for (size_t i = 1; i < one.size(); ++i)
    EXPECT_LE(one[i - 1].decode_bytes_per_token, 1.02 * one[i].decode_bytes_per_token);
}

TEST(LayoutPlanner, LayoutsTheModelCannotTakeSayWhy) {
  const Planner lite("deepseek-v2-lite");  // 16 heads
  const auto plans =
      lite.plan({.hosts = 3, .sockets_per_host = 2, .mem_per_host_bytes = 64 * kGiB});
  const LayoutPlan& tp6 = find(plans, "tp=6 dp=1");
  EXPECT_FALSE(tp6.fits);
  EXPECT_NE(tp6.why_not.find("num_attention_heads 16 is not divisible"), std::string::npos);
  EXPECT_TRUE(find(plans, "tp=2 dp=3").attention_spans_hosts == false);
  EXPECT_TRUE(find(plans, "tp=6 dp=3 dp-attention").attention_spans_hosts == false);
  EXPECT_TRUE(find(plans, "tp=6 dp=2 dp-attention").attention_spans_hosts);
}

TEST(LayoutPlanner, AskingForTooMuchKvIsNamed) {
  const Planner lite("deepseek-v2-lite");
  const auto plans =
      lite.plan({.hosts = 1, .sockets_per_host = 1, .mem_per_host_bytes = 128 * kGiB},
                {.context = 163840, .concurrency = 64});
  EXPECT_EQ(plans.front().why_not, "the KV cache holds fewer tokens than concurrency x context");
}

}  // namespace
}  // namespace mlaserve::parallel
