// The step buffers reserved for the largest step hold every step up to it: neither a pure
// prefill of T tokens (the normal attention path) nor T single-token decodes (the absorbed path)
// grows them, with MoE and dense layers and the MLP batch at its bound; nor does the matmuls'
// scratch for bf16 weights grow.
#include <gtest/gtest.h>

#include <numeric>

#include "cache/latent_kv_pool.h"
#include "kernels/ops.h"
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
  DeepseekModel model("models/brown-tiny", kernels::WeightType::BF16);
  const ModelConfig& cfg = model.config();
  const size_t reserved = model.reserve_step_buffers(kTokens, kTokens, kTokens);
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

// Rows [first, first + n) of a prompt of ids 1 + t % 97 after `first` cached tokens, with the
// logits of its last row; the prompt's KV slots are 0, 1, ...
StepInput prompt_chunk(int64_t first, int64_t n, std::span<const int32_t> slots) {
  StepInput in;
  for (int64_t t = first; t < first + n; ++t) {
    in.tokens.push_back(static_cast<int32_t>(1 + t % 97));
    in.positions.push_back(static_cast<int32_t>(t));
  }
  in.logit_rows.push_back(n - 1);
  in.seqs.push_back({n, first, slots.first(static_cast<size_t>(first + n))});
  return in;
}

// A step past one FFN block (1,024 rows) runs its FFN in blocks; under deterministic kernels its
// last token's logits have the same bits as when the prompt comes in chunks that each fit one.
TEST(StepBuffers, AStepPastOneFfnBlockEqualsItsPromptInChunks) {
  constexpr int64_t kPrompt = 1500, kChunk = 500;
  kernels::use_deterministic_kernels(true);
  DeepseekModel model("models/brown-tiny", kernels::WeightType::BF16);
  const ModelConfig& cfg = model.config();
  SingleRankComm comm;
  std::vector<int32_t> slots(kPrompt);
  std::iota(slots.begin(), slots.end(), 0);
  const auto pool = [&] {
    return cache::LatentKvPool(model.kv_layers(), cfg.kv_lora_rank + cfg.qk_rope_head_dim, kPrompt,
                               KvDtype::Float32);
  };
  cache::LatentKvPool whole_kv = pool(), chunked_kv = pool();
  const std::vector<float> whole = model.forward(prompt_chunk(0, kPrompt, slots), whole_kv, comm);
  std::vector<float> chunked;
  for (int64_t first = 0; first < kPrompt; first += kChunk)
    chunked = model.forward(prompt_chunk(first, kChunk, slots), chunked_kv, comm);
  kernels::use_deterministic_kernels(false);
  ASSERT_EQ(whole.size(), static_cast<size_t>(cfg.vocab_size));
  EXPECT_EQ(whole, chunked);
}

}  // namespace
}  // namespace mlaserve::model
