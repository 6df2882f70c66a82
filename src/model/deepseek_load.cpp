// Loading one rank's shards of a DeepSeek checkpoint. Which part of each tensor a rank holds
// comes from the table in sharding.cpp (shard_rule / owned_range); this file only maps HF tensor
// names and shapes onto the table's weight kinds.
#include <fmt/format.h>

#include <cstring>
#include <optional>

#include "core/error.h"
#include "model/deepseek.h"
#include "model/load_progress.h"
#include "model/weight_loader.h"

namespace mlaserve::model {

namespace {

using kernels::Weight;

// Copies this rank's block of t into dst from row dst_row (fused weights stack several).
void copy_owned(const WeightLoader& loader, const RankLayout& layout, const SplitTensor& t,
                Weight& dst, int64_t dst_row) {
  loader.copy_block(t.name, t.rows, t.cols, owned_block(layout, t), dst, dst_row);
}

// The tensor lm_head reads: the embedding's when the model ties them.
std::string lm_head_name(const ModelConfig& c) {
  return c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
}

// This rank's block of t as a new weight.
Weight load_owned(const WeightLoader& loader, const RankLayout& layout, const SplitTensor& t) {
  const Block b = owned_block(layout, t);
  Weight w = loader.new_weight(t.name, b.rows, b.cols, t.kind);
  copy_owned(loader, layout, t, w, 0);
  return w;
}

// A SwiGLU MLP (dense, shared expert or one routed expert) with `inter` intermediate columns,
// split by the gate_up / down kinds' rules: gate rows, then up rows, in one weight.
MlpWeights load_mlp(const WeightLoader& loader, const RankLayout& layout, const std::string& prefix,
                    int64_t hidden, int64_t inter, WeightKind gate_up, WeightKind down) {
  const SplitTensor gate{prefix + "gate_proj.weight", gate_up, inter, hidden};
  const SplitTensor up{prefix + "up_proj.weight", gate_up, inter, hidden};
  const int64_t local_inter = owned_block(layout, gate).rows;
  MlpWeights m;
  m.gate_up = loader.new_weight(gate.name, 2 * local_inter, hidden, gate_up);
  copy_owned(loader, layout, gate, m.gate_up, 0);
  copy_owned(loader, layout, up, m.gate_up, local_inter);
  m.down = load_owned(loader, layout, {prefix + "down_proj.weight", down, hidden, inter});
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
// [kv_lora, nope] so q_nope·W_UK is a matmul, and W_UV [v, kv_lora] as stored; in the compute
// dtype whatever kv_b's format (the transpose crosses kv_b's scale blocks).
void split_kv_b(AttentionWeights& a, kernels::WeightType dtype, int64_t heads, int64_t nope,
                int64_t v, int64_t kv_lora) {
  for (int64_t h = 0; h < heads; ++h) {
    Weight uk(dtype, kv_lora, nope), uv(dtype, v, kv_lora);
    const int64_t base = h * (nope + v);
    for (int64_t d = 0; d < nope; ++d)
      for (int64_t c = 0; c < kv_lora; ++c) set(uk, c, d, a.kv_b.at(base + d, c));
    for (int64_t e = 0; e < v; ++e)
      for (int64_t c = 0; c < kv_lora; ++c) set(uv, e, c, a.kv_b.at(base + nope + e, c));
    a.uk.push_back(std::move(uk));
    a.uv.push_back(std::move(uv));
  }
}

// DeepSeek-V3.2's lightning indexer of the layer whose attention tensors start with `attn`,
// whole on every rank; dtypes as stored (FP8 with block scales, bf16, f32).
IndexerWeights load_indexer(const WeightLoader& loader, const RankLayout& lay, const ModelConfig& c,
                            const std::string& attn) {
  const std::string p = attn + "indexer.";
  const int64_t H = c.hidden_size, Hi = c.index_n_heads, Di = c.index_head_dim;
  IndexerWeights w;
  w.wq_b =
      load_owned(loader, lay, {p + "wq_b.weight", WeightKind::Indexer, Hi * Di, c.q_lora_rank});
  w.wk = load_owned(loader, lay, {p + "wk.weight", WeightKind::Indexer, Di, H});
  w.k_norm_weight = loader.vector(p + "k_norm.weight", Di);
  w.k_norm_bias = loader.vector(p + "k_norm.bias", Di);
  w.weights_proj = load_owned(loader, lay, {p + "weights_proj.weight", WeightKind::Indexer, Hi, H});
  return w;
}

// Decoder layer `index` (the MTP module's is num_hidden_layers): norms, MLA (with V3.2's indexer
// when with_indexer), and a dense MLP or the MoE.
LayerWeights load_layer(const WeightLoader& loader, const ModelConfig& c, const RankLayout& lay,
                        int64_t index, int64_t local_heads, bool with_indexer) {
  const std::string p = fmt::format("model.layers.{}.", index), attn = p + "self_attn.";
  const int64_t H = c.hidden_size, n_heads = c.num_attention_heads;
  const int64_t qk = c.qk_head_dim(), nope = c.qk_nope_head_dim, v = c.v_head_dim;
  const int64_t kv_a_rows = c.kv_lora_rank + c.qk_rope_head_dim;
  LayerWeights L;
  L.attn_norm = loader.vector(p + "input_layernorm.weight", H);
  L.mlp_norm = loader.vector(p + "post_attention_layernorm.weight", H);

  AttentionWeights& a = L.attn;
  a.qkv_a = loader.new_weight(attn + "kv_a_proj_with_mqa.weight", c.q_lora_rank + kv_a_rows, H,
                              WeightKind::QkvA);
  if (c.q_lora_rank > 0) {
    copy_owned(loader, lay, {attn + "q_a_proj.weight", WeightKind::QkvA, c.q_lora_rank, H}, a.qkv_a,
               0);
    a.q_a_norm = loader.vector(attn + "q_a_layernorm.weight", c.q_lora_rank);
    a.q_b = load_owned(loader, lay,
                       {attn + "q_b_proj.weight", WeightKind::QB, n_heads * qk, c.q_lora_rank, qk});
  } else {
    a.q_b = load_owned(loader, lay, {attn + "q_proj.weight", WeightKind::QB, n_heads * qk, H, qk});
  }
  copy_owned(loader, lay, {attn + "kv_a_proj_with_mqa.weight", WeightKind::QkvA, kv_a_rows, H},
             a.qkv_a, c.q_lora_rank);
  a.kv_a_norm = loader.vector(attn + "kv_a_layernorm.weight", c.kv_lora_rank);
  a.kv_b = load_owned(
      loader, lay,
      {attn + "kv_b_proj.weight", WeightKind::KvB, n_heads * (nope + v), c.kv_lora_rank, nope + v});
  split_kv_b(a, loader.dtype(), local_heads, nope, v, c.kv_lora_rank);
  a.o = load_owned(loader, lay, {attn + "o_proj.weight", WeightKind::O, H, n_heads * v, v});
  if (with_indexer) a.indexer = load_indexer(loader, lay, c, attn);

  if (!c.is_moe_layer(index)) {
    L.dense = load_mlp(loader, lay, p + "mlp.", H, c.intermediate_size, WeightKind::MlpGateUp,
                       WeightKind::MlpDown);
    return L;
  }
  MoeWeights m;
  m.router = loader.matrix_f32(p + "mlp.gate.weight", c.n_routed_experts, H);
  if (c.router.method == kernels::RouterTopk::NoauxTc)
    m.correction_bias = loader.vector(p + "mlp.gate.e_score_correction_bias", c.n_routed_experts);
  const Range experts = owned_range(lay, WeightKind::RoutedExperts, c.n_routed_experts);
  m.first_local_expert = experts.begin;
  for (int64_t e = experts.begin; e < experts.end; ++e) {
    m.experts.push_back(load_mlp(loader, lay, fmt::format("{}mlp.experts.{}.", p, e), H,
                                 c.moe_intermediate_size, WeightKind::ExpertGateUp,
                                 WeightKind::ExpertDown));
  }
  if (c.n_shared_experts > 0) {
    m.shared = load_mlp(loader, lay, p + "mlp.shared_experts.", H,
                        c.moe_intermediate_size * c.n_shared_experts, WeightKind::MlpGateUp,
                        WeightKind::MlpDown);
  }
  L.moe = std::move(m);
  return L;
}

// Whether two stored tensors hold the same bytes (same type and shape); their pages are dropped
// again after the comparison.
bool same_tensor(const Checkpoint& ckpt, const std::string& a, const std::string& b) {
  const TensorInfo& x = ckpt.get(a);
  const TensorInfo& y = ckpt.get(b);
  const bool same = x.type == y.type && x.shape == y.shape && x.nbytes == y.nbytes &&
                    std::memcmp(x.data, y.data, x.nbytes) == 0;
  release_pages(x);
  release_pages(y);
  return same;
}

// The MTP module's copy of a main tensor (main_name) as `spec`, unless it equals the main one.
std::optional<kernels::Weight> load_unless_shared(const Checkpoint& ckpt,
                                                  const WeightLoader& loader, const RankLayout& lay,
                                                  const SplitTensor& spec,
                                                  const std::string& main_name) {
  if (same_tensor(ckpt, spec.name, main_name)) return std::nullopt;
  return load_owned(loader, lay, spec);
}

// The MTP module (layer L = num_hidden_layers) as DeepSeek-V3 stores it: its input norms and
// projection, a decoder layer, and shared_head / embed_tokens (copies of lm_head and the main
// embedding, sharded as they are, loaded only where they differ from them).
MtpWeights load_mtp(const Checkpoint& ckpt, const WeightLoader& loader, const ModelConfig& c,
                    const RankLayout& lay, int64_t local_heads) {
  const int64_t L = c.num_hidden_layers, H = c.hidden_size, V = c.vocab_size;
  const std::string p = fmt::format("model.layers.{}.", L);
  MtpWeights m;
  m.enorm = loader.vector(p + "enorm.weight", H);
  m.hnorm = loader.vector(p + "hnorm.weight", H);
  m.eh_proj = load_owned(loader, lay, {p + "eh_proj.weight", WeightKind::MtpProjection, H, 2 * H});
  // V3.2 releases give the MTP layer an indexer; a checkpoint without one keeps it dense.
  const bool indexer = c.has_indexer() && ckpt.contains(p + "self_attn.indexer.wq_b.weight");
  m.layer = load_layer(loader, c, lay, L, local_heads, indexer);
  m.head_norm = loader.vector(p + "shared_head.norm.weight", H);
  m.head = load_unless_shared(ckpt, loader, lay,
                              {p + "shared_head.head.weight", WeightKind::LmHead, V, H},
                              lm_head_name(c));
  m.embedding = load_unless_shared(ckpt, loader, lay,
                                   {p + "embed_tokens.weight", WeightKind::Embedding, V, H},
                                   "model.embed_tokens.weight");
  return m;
}

}  // namespace

void DeepseekModel::load(const std::filesystem::path& dir, bool with_mtp) {
  const Checkpoint ckpt = Checkpoint::open(dir, cfg_.tensor_prefix);
  const WeightLoader loader(ckpt, format_, cfg_);
  const ModelConfig& c = cfg_;
  const RankLayout& lay = layout_;
  const int64_t H = c.hidden_size, V = c.vocab_size;

  // One rank per model instance reports (tp rank 0 of each replica).
  LoadProgress progress(c.num_hidden_layers + (with_mtp ? 1 : 0), lay.tp_rank == 0);
  // Each weight gets the kernels' packed copy (kernels::prepare) as soon as it is loaded, so that
  // the memory check after each layer sees what the layers really hold; where that copy serves
  // every product, the row-major values go at once (a bf16 weight is then held once). Embeddings:
  // only rows are read (embed()), nothing to pack.
  const auto hold = [this](Weight& w, bool packable = true) {
    value_bytes_ += w.bytes();
    if (packable) {
      kernels::prepare(w);
      kernels::drop_row_major_if_unneeded(w);
    }
    resident_bytes_ += w.bytes() + w.packed_bytes;
  };
  embedding_ = load_owned(loader, lay, {"model.embed_tokens.weight", WeightKind::Embedding, V, H});
  hold(embedding_, false);
  lm_head_ = load_owned(loader, lay, {lm_head_name(c), WeightKind::LmHead, V, H});
  hold(lm_head_);
  final_norm_ = loader.vector("model.norm.weight", H);
  const size_t base_values = value_bytes_, base_resident = resident_bytes_;
  const auto layers_loaded = [&](int64_t layers_done) {
    progress.layer_loaded(layers_done, value_bytes_ - base_values, resident_bytes_ - base_resident);
  };
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    layers_.push_back(load_layer(loader, c, lay, i, heads_.size(), c.has_indexer()));
    for_each_weight(layers_.back(), hold);
    layers_loaded(i + 1);
  }
  if (with_mtp) {
    mtp_ = load_mtp(ckpt, loader, c, lay, heads_.size());
    for_each_weight(mtp_->layer, hold);
    hold(mtp_->eh_proj);
    if (mtp_->head) hold(*mtp_->head);
    if (mtp_->embedding) hold(*mtp_->embedding, false);
    layers_loaded(c.num_hidden_layers + 1);
  }
  progress.done(value_bytes_);
}

}  // namespace mlaserve::model
