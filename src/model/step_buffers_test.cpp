// The step buffers reserved for the largest step hold every step up to it: neither a pure
// prefill of T tokens (the normal attention path) nor T single-token decodes (the absorbed path)
// grows them, with MoE and dense layers and the MLP batch at its bound.
#include <gtest/gtest.h>

#include <numeric>

#include "cache/latent_kv_pool.h"
#include "model/deepseek.h"

namespace mlaserve::model {
namespace {

constexpr int64_t kTokens = 40;

StepInput one_prefill(std::span<const int32_t> slots) {
  StepInput in;
  for (int64_t t = 0; t < kTokens; ++t) {
    in.tokens.push_back(static_cast<int32_t>(1 + t % 97));
    in.positions.push_back(static_cast<int32_t>(t));
    in.logit_rows.push_back(t);
  }
  in.seqs.push_back({kTokens, 0, slots.first(kTokens)});
  return in;
}

// Sequence j has cached slot j (from the prefill) and writes slot kTokens + j.
StepInput decodes(std::vector<std::vector<int32_t>>& slots) {
  StepInput in;
  for (int64_t j = 0; j < kTokens; ++j) {
    slots.push_back({static_cast<int32_t>(j), static_cast<int32_t>(kTokens + j)});
    in.tokens.push_back(static_cast<int32_t>(5 + j));
    in.positions.push_back(1);
    in.logit_rows.push_back(j);
  }
  for (const std::vector<int32_t>& s : slots) in.seqs.push_back({1, 1, s});
  return in;
}

TEST(StepBuffers, ReservedForTheLargestStepNeverGrow) {
  DeepseekModel model("models/brown-tiny", kernels::WeightType::F32);
  const ModelConfig& cfg = model.config();
  const size_t reserved = model.reserve_step_buffers(kTokens, kTokens);
  EXPECT_GT(reserved, static_cast<size_t>(kTokens * cfg.hidden_size * 4 * 8));
  cache::LatentKvPool kv(model.kv_layers(), cfg.kv_lora_rank + cfg.qk_rope_head_dim, 2 * kTokens,
                         KvDtype::Float32);
  SingleRankComm comm;
  std::vector<int32_t> slots(2 * kTokens);
  std::iota(slots.begin(), slots.end(), 0);
  model.forward(one_prefill(slots), kv, comm);
  EXPECT_EQ(model.step_buffer_bytes(), reserved);
  std::vector<std::vector<int32_t>> decode_slots;
  model.forward(decodes(decode_slots), kv, comm);
  EXPECT_EQ(model.step_buffer_bytes(), reserved);
}

}  // namespace
}  // namespace mlaserve::model
