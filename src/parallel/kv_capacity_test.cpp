#include "parallel/kv_capacity.h"

#include <gtest/gtest.h>

namespace mlaserve::parallel {
namespace {

model::ModelConfig v3_shapes() {
  model::ModelConfig c;
  c.num_hidden_layers = 61;
  c.kv_lora_rank = 512;
  c.qk_rope_head_dim = 64;
  return c;
}

TEST(KvCapacity, LatentIs576ValuesPerTokenPerLayer) {
  const Topology t = compute_topology({.tp = 4}, 0, 4);
  EXPECT_EQ(kv_capacity(t, v3_shapes(), 1 << 30).bytes_per_token, 61 * 576 * 4);
}

TEST(KvCapacity, DpAttentionMultipliesInstanceCapacityByDp) {
  const int64_t budget = int64_t{8} << 30;
  const KvCapacity tp4 = kv_capacity(compute_topology({.tp = 4}, 0, 4), v3_shapes(), budget);
  const KvCapacity dp4 = kv_capacity(
      compute_topology({.tp = 4, .dp = 4, .dp_attention = true}, 0, 4), v3_shapes(), budget);
  const KvCapacity dp2 = kv_capacity(
      compute_topology({.tp = 4, .dp = 2, .dp_attention = true}, 2, 4), v3_shapes(), budget);
  EXPECT_EQ(tp4.per_rank_tokens, dp4.per_rank_tokens);
  EXPECT_EQ(dp4.instance_tokens, 4 * tp4.instance_tokens);
  EXPECT_EQ(dp2.instance_tokens, 2 * tp4.instance_tokens);
}

}  // namespace
}  // namespace mlaserve::parallel
