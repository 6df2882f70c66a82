#include "parallel/topology.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace mlaserve::parallel {
namespace {

TEST(Topology, DpAttentionIsDpMajorContiguous) {
  const ParallelOptions o{.tp = 8, .dp = 2, .dp_attention = true};
  for (int r = 0; r < 8; ++r) {
    const Topology t = compute_topology(o, r, 8);
    EXPECT_EQ(t.layout.attn_tp_size, 4);
    EXPECT_EQ(t.layout.dp_rank, r / 4);
    EXPECT_EQ(t.layout.attn_tp_rank, r % 4);
    EXPECT_EQ(t.layout.tp_rank, r);
    EXPECT_EQ(t.instances, 1);
    EXPECT_EQ(t.groups_per_instance, 2);
  }
}

TEST(Topology, PlainReplicasAreSeparateTpInstances) {
  const ParallelOptions o{.tp = 2, .dp = 2};
  const Topology t = compute_topology(o, 3, 4);
  EXPECT_EQ(t.instance, 1);
  EXPECT_EQ(t.layout.tp_rank, 1);
  EXPECT_EQ(t.layout.attn_tp_size, 2);
  EXPECT_EQ(t.groups_per_instance, 1);
}

TEST(Topology, RejectsBadLayoutsWithClearMessages) {
  auto message = [](ParallelOptions o, int world) {
    try {
      compute_topology(o, 0, world);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message({.tp = 6, .dp = 4, .dp_attention = true}, 6).find("divisible"),
            std::string::npos);
  EXPECT_NE(message({.tp = 4, .dp = 1, .dp_attention = true}, 4).find("--dp 2 or more"),
            std::string::npos);
  EXPECT_NE(
      message({.tp = 4, .dp = 2, .dp_attention = true}, 8).find("needs 4 ranks but the job has 8"),
      std::string::npos);
}

TEST(Topology, ModelMustFitTheLayout) {
  model::ModelConfig c;
  c.num_attention_heads = 6;
  c.intermediate_size = 64;
  c.n_routed_experts = 4;
  c.moe_intermediate_size = 16;
  const Topology t = compute_topology({.tp = 8, .dp = 2, .dp_attention = true}, 0, 8);
  EXPECT_THROW(check_model_fits(t, c), Error);  // 6 heads over attn_tp 4
  c.num_attention_heads = 8;
  EXPECT_NO_THROW(check_model_fits(t, c));
  const Topology ep =
      compute_topology({.tp = 8, .dp = 2, .dp_attention = true, .ep_moe = true}, 0, 8);
  EXPECT_THROW(check_model_fits(ep, c), Error);  // 8 ranks, 4 experts
}

}  // namespace
}  // namespace mlaserve::parallel
