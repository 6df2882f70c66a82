// Loading one rank's shards of a DeepSeek checkpoint. What is split, and over which group, comes
// from shard_rule() in sharding.cpp; this file only maps HF tensor names onto those rules.
#include <fmt/format.h>

#include "core/error.h"
#include "model/deepseek.h"
#include "model/weight_loader.h"

namespace mlaserve::model {

namespace {

using kernels::Weight;

// Rows [units.begin, units.end) * unit_rows of an [all_units * unit_rows, cols] tensor, appended
// into dst at dst_row (rules with SplitDim::Rows).
void copy_row_units(const WeightLoader& loader, const std::string& name, int64_t all_units,
                    int64_t unit_rows, int64_t cols, Range units, Weight& dst, int64_t dst_row) {
  loader.copy_block(name, all_units * unit_rows, cols,
                    {units.begin * unit_rows, units.size() * unit_rows, 0, cols}, dst, dst_row);
}

// Columns of an [rows, all_units * unit_cols] tensor (rules with SplitDim::Cols).
Weight load_col_units(const WeightLoader& loader, const std::string& name, int64_t rows,
                      int64_t all_units, int64_t unit_cols, Range units) {
  Weight w(loader.type(), rows, units.size() * unit_cols);
  loader.copy_block(name, rows, all_units * unit_cols,
                    {0, rows, units.begin * unit_cols, units.size() * unit_cols}, w, 0);
  return w;
}

Range rule_range(const RankLayout& layout, WeightKind kind, int64_t units) {
  const ShardRule rule = shard_rule(kind);
  const GroupPosition pos = group_position(layout, rule.group);
  return rule.dim == SplitDim::None ? Range{0, units} : shard_range(units, pos.rank, pos.size);
}

// A SwiGLU MLP (dense, shared expert or routed expert) with intermediate columns `slice` of
// `inter`.
MlpWeights load_mlp(const WeightLoader& loader, const std::string& prefix, int64_t hidden,
                    int64_t inter, Range slice) {
  MlpWeights m;
  m.gate_up = Weight(loader.type(), 2 * slice.size(), hidden);
  copy_row_units(loader, prefix + "gate_proj.weight", inter, 1, hidden, slice, m.gate_up, 0);
  copy_row_units(loader, prefix + "up_proj.weight", inter, 1, hidden, slice, m.gate_up,
                 slice.size());
  m.down = load_col_units(loader, prefix + "down_proj.weight", hidden, inter, 1, slice);
  return m;
}

void set(Weight& w, int64_t r, int64_t c, float v) {
  const int64_t i = r * w.cols() + c;
  if (w.type() == kernels::WeightType::F32)
    w.f32()[i] = v;
  else
    w.b16()[i] = f32_to_bf16(v);
}

// Absorbed-path views of kv_b (per local head h, rows h*(nope+v) ...): W_UK transposed to
// [kv_lora, nope] so q_nope·W_UK is a matmul, and W_UV [v, kv_lora] as stored.
void split_kv_b(AttentionWeights& a, int64_t heads, int64_t nope, int64_t v, int64_t kv_lora) {
  for (int64_t h = 0; h < heads; ++h) {
    Weight uk(a.kv_b.type(), kv_lora, nope), uv(a.kv_b.type(), v, kv_lora);
    const int64_t base = h * (nope + v);
    for (int64_t d = 0; d < nope; ++d)
      for (int64_t c = 0; c < kv_lora; ++c) set(uk, c, d, a.kv_b.at(base + d, c));
    for (int64_t e = 0; e < v; ++e)
      for (int64_t c = 0; c < kv_lora; ++c) set(uv, e, c, a.kv_b.at(base + nope + e, c));
    a.uk.push_back(std::move(uk));
    a.uv.push_back(std::move(uv));
  }
}

}  // namespace

void DeepseekModel::load(const std::filesystem::path& dir, kernels::WeightType type) {
  const Checkpoint ckpt = Checkpoint::open(dir);
  const WeightLoader loader(ckpt, type);
  const ModelConfig& c = cfg_;
  const int64_t H = c.hidden_size, V = c.vocab_size, n_heads = c.num_attention_heads;
  const int64_t qk = c.qk_head_dim(), nope = c.qk_nope_head_dim, v = c.v_head_dim;
  const int64_t kv_a_rows = c.kv_lora_rank + c.qk_rope_head_dim;

  embedding_ = Weight(type, vocab_.size(), H);
  copy_row_units(loader, "model.embed_tokens.weight", V, 1, H, vocab_, embedding_, 0);
  lm_head_ = Weight(type, vocab_.size(), H);
  copy_row_units(loader, c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight", V,
                 1, H, vocab_, lm_head_, 0);
  final_norm_ = loader.vector("model.norm.weight", H);

  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = fmt::format("model.layers.{}.", i), attn = p + "self_attn.";
    LayerWeights L;
    L.attn_norm = loader.vector(p + "input_layernorm.weight", H);
    L.mlp_norm = loader.vector(p + "post_attention_layernorm.weight", H);

    AttentionWeights& a = L.attn;
    a.qkv_a = Weight(type, c.q_lora_rank + kv_a_rows, H);
    if (c.q_lora_rank > 0) {
      loader.copy_block(attn + "q_a_proj.weight", c.q_lora_rank, H, {0, c.q_lora_rank, 0, H},
                        a.qkv_a, 0);
      a.q_a_norm = loader.vector(attn + "q_a_layernorm.weight", c.q_lora_rank);
      a.q_b = Weight(type, heads_.size() * qk, c.q_lora_rank);
      copy_row_units(loader, attn + "q_b_proj.weight", n_heads, qk, c.q_lora_rank, heads_, a.q_b,
                     0);
    } else {
      a.q_b = Weight(type, heads_.size() * qk, H);
      copy_row_units(loader, attn + "q_proj.weight", n_heads, qk, H, heads_, a.q_b, 0);
    }
    loader.copy_block(attn + "kv_a_proj_with_mqa.weight", kv_a_rows, H, {0, kv_a_rows, 0, H},
                      a.qkv_a, c.q_lora_rank);
    a.kv_a_norm = loader.vector(attn + "kv_a_layernorm.weight", c.kv_lora_rank);
    a.kv_b = Weight(type, heads_.size() * (nope + v), c.kv_lora_rank);
    copy_row_units(loader, attn + "kv_b_proj.weight", n_heads, nope + v, c.kv_lora_rank, heads_,
                   a.kv_b, 0);
    split_kv_b(a, heads_.size(), nope, v, c.kv_lora_rank);
    a.o = load_col_units(loader, attn + "o_proj.weight", H, n_heads, v, heads_);

    if (!c.is_moe_layer(i)) {
      L.dense = load_mlp(loader, p + "mlp.", H, c.intermediate_size,
                         rule_range(layout_, WeightKind::MlpGateUp, c.intermediate_size));
    } else {
      MoeWeights m;
      m.router = loader.matrix_f32(p + "mlp.gate.weight", c.n_routed_experts, H);
      if (c.router.method == kernels::RouterTopk::NoauxTc) {
        m.correction_bias =
            loader.vector(p + "mlp.gate.e_score_correction_bias", c.n_routed_experts);
      }
      // TP-MoE: every expert, intermediate sliced over tp. EP-MoE: whole experts, split over tp.
      const int64_t inter = c.moe_intermediate_size;
      const Range experts = layout_.ep_moe
                                ? shard_range(c.n_routed_experts, layout_.tp_rank, layout_.tp_size)
                                : Range{0, c.n_routed_experts};
      const Range slice =
          layout_.ep_moe ? Range{0, inter} : rule_range(layout_, WeightKind::MlpGateUp, inter);
      m.first_local_expert = experts.begin;
      for (int64_t e = experts.begin; e < experts.end; ++e) {
        m.experts.push_back(
            load_mlp(loader, fmt::format("{}mlp.experts.{}.", p, e), H, inter, slice));
      }
      if (c.n_shared_experts > 0) {
        const int64_t shared_inter = inter * c.n_shared_experts;
        m.shared = load_mlp(loader, p + "mlp.shared_experts.", H, shared_inter,
                            rule_range(layout_, WeightKind::MlpGateUp, shared_inter));
      }
      L.moe = std::move(m);
    }
    layers_.push_back(std::move(L));
  }
}

}  // namespace mlaserve::model
