#include "models/deepseek_v4/sharding.h"

#include "core/error.h"

namespace mlaserve::models::deepseek_v4 {

using model::WeightKind;

namespace {

// The MoE's intermediate columns split in blocks of 32 (an MXFP4 scale group) when they can be.
int64_t intermediate_unit(const V4Config& c) {
  return c.moe_intermediate_size % 32 == 0 ? 32 : 1;
}

}  // namespace

V4Shards shards(const V4Config& c, const model::RankLayout& layout) {
  V4Shards s;
  s.heads_per_group = c.num_attention_heads / c.o_groups;
  s.o_groups = model::owned_range(layout, WeightKind::QB, c.o_groups);
  s.vocab = model::owned_range(layout, WeightKind::Embedding, c.vocab_size);
  s.experts = model::owned_range(layout, WeightKind::RoutedExperts, c.n_routed_experts);
  return s;
}

void check_layout(const V4Config& c, const model::RankLayout& layout) {
  if (c.o_groups < layout.attn_tp_size) {
    fail(
        "deepseek_v4 splits attention heads in whole output groups: its o_groups {} do not "
        "spread over {} attention ranks (use --enable-dp-attention with a --dp that leaves at "
        "most {} ranks per group)",
        c.o_groups, layout.attn_tp_size, c.o_groups);
  }
  if (layout.ep_moe && c.n_routed_experts < layout.tp_size) {
    fail("--enable-ep-moe needs --tp ({}) <= n_routed_experts ({})", layout.tp_size,
         c.n_routed_experts);
  }
  // Sliced over every tp rank: the routed experts under TP-MoE, the shared expert always.
  const int64_t blocks = c.moe_intermediate_size / intermediate_unit(c);
  const bool sliced = !layout.ep_moe || c.n_shared_experts > 0;
  if (sliced && blocks < layout.tp_size) {
    fail(
        "deepseek_v4 slices {} moe_intermediate_size {} in {}-column blocks: {} blocks do not "
        "spread over --tp {}{}",
        layout.ep_moe ? "the shared expert's" : "each expert's", c.moe_intermediate_size,
        intermediate_unit(c), blocks, layout.tp_size,
        c.n_shared_experts == 0 ? " (use --enable-ep-moe)" : "");
  }
  // The MoE's token ids cross the DP gather as float32 values: exact below 2^24.
  if (c.vocab_size > (int64_t{1} << 24))
    fail("deepseek_v4: vocab_size {} is over 2^24", c.vocab_size);
}

model::SplitTensor query_up(const V4Config& c, const std::string& name) {
  const int64_t rows = c.num_attention_heads * c.head_dim;
  return {name, WeightKind::QB, rows, c.q_lora_rank, rows / c.o_groups};
}

model::SplitTensor output_down(const V4Config& c, const std::string& name) {
  return {name, WeightKind::O, c.hidden_size, c.o_groups * c.o_lora_rank, c.o_lora_rank};
}

model::SplitTensor vocab_rows(const V4Config& c, const std::string& name, WeightKind kind) {
  return {name, kind, c.vocab_size, c.hidden_size};
}

model::SplitTensor expert_up(const V4Config& c, const std::string& name, bool routed) {
  return {name, routed ? WeightKind::ExpertGateUp : WeightKind::MlpGateUp, c.moe_intermediate_size,
          c.hidden_size, intermediate_unit(c)};
}

model::SplitTensor expert_down(const V4Config& c, const std::string& name, bool routed) {
  return {name, routed ? WeightKind::ExpertDown : WeightKind::MlpDown, c.hidden_size,
          c.moe_intermediate_size, intermediate_unit(c)};
}

}  // namespace mlaserve::models::deepseek_v4
