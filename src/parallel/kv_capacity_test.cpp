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
  EXPECT_EQ(kv_capacity(t, v3_shapes(), KvDtype::Float32, 1 << 30).bytes_per_token, 61 * 576 * 4);
}

TEST(KvCapacity, DpAttentionMultipliesInstanceCapacityByDp) {
  const int64_t budget = int64_t{8} << 30;
  const KvCapacity tp4 =
      kv_capacity(compute_topology({.tp = 4}, 0, 4), v3_shapes(), KvDtype::BFloat16, budget);
  const KvCapacity dp4 =
      kv_capacity(compute_topology({.tp = 4, .dp = 4, .dp_attention = true}, 0, 4), v3_shapes(),
                  KvDtype::BFloat16, budget);
  const KvCapacity dp2 =
      kv_capacity(compute_topology({.tp = 4, .dp = 2, .dp_attention = true}, 2, 4), v3_shapes(),
                  KvDtype::BFloat16, budget);
  EXPECT_EQ(tp4.per_rank_tokens, dp4.per_rank_tokens);
  EXPECT_EQ(dp4.instance_tokens, 4 * tp4.instance_tokens);
  EXPECT_EQ(dp2.instance_tokens, 2 * tp4.instance_tokens);
}

// At the same memory a bf16 cache holds exactly twice the tokens of a float32 one (a budget of
// whole float32 tokens, so no rounding), and fp8_e4m3 with its per-row scales 2304 / 580 times.
TEST(KvCapacity, SmallerKvDtypeHoldsMoreTokensInTheSameMemory) {
  const Topology t = compute_topology({.tp = 2, .dp = 2, .dp_attention = true}, 0, 2);
  const int64_t budget = int64_t{61} * 576 * 4 * 10000;
  const KvCapacity f32 = kv_capacity(t, v3_shapes(), KvDtype::Float32, budget);
  const KvCapacity bf16 = kv_capacity(t, v3_shapes(), KvDtype::BFloat16, budget);
  const KvCapacity fp8 = kv_capacity(t, v3_shapes(), KvDtype::Fp8E4m3, budget);
  EXPECT_EQ(f32.per_rank_tokens, 10000);
  EXPECT_EQ(bf16.bytes_per_token, 61 * 576 * 2);
  EXPECT_EQ(bf16.per_rank_tokens, 2 * f32.per_rank_tokens);
  EXPECT_EQ(bf16.instance_tokens, 2 * f32.instance_tokens);
  EXPECT_EQ(fp8.bytes_per_token, 61 * (576 + 4));
  EXPECT_EQ(fp8.per_rank_tokens, 10000 * 576 * 4 / 580);
}

}  // namespace
}  // namespace mlaserve::parallel
