#include "model/footprint.h"

#include <fmt/format.h>

#include <memory>
#include <vector>

#include "cache/latent_kv_pool.h"
#include "core/error.h"

namespace mlaserve::model {

namespace {

using kernels::WeightType;

constexpr int64_t kFp8Block = 128;  // the loader's FP8 block edge (weight_block_size)

// Bytes of one weight that stacks the owned blocks of several tensors (gate|up, q_a|kv_a), held
// as `type`: what kernels::Weight::bytes() counts once WeightLoader has filled it. FP8 keeps one
// scale per checkpoint block a part's rows touch, per column block of the shard (whose first
// block may start inside a 128-block); INT8 one per row; both an int32 block index per row.
int64_t held_bytes(WeightType type, const std::vector<Block>& parts, int64_t group) {
  int64_t rows = 0;
  for (const Block& b : parts) rows += b.rows;
  const int64_t cols = parts.front().cols, values = rows * cols;
  switch (type) {
    case WeightType::F32:
      return values * 4;
    case WeightType::BF16:
      return values * 2;
    case WeightType::INT8:
      return values + rows * (4 + 4);
    case WeightType::INT4:  // codes, a float32 scale per group, the block index per row
      return values / 2 + rows * ((cols + group - 1) / group * 4 + 4);
    case WeightType::MXFP4:  // codes, an E8M0 byte per group, the block index per row
      return values / 2 + rows * ((cols + group - 1) / group + 4);
    case WeightType::FP8:
      break;
  }
  int64_t scales = 0;
  for (const Block& b : parts) {
    if (b.rows == 0) continue;
    const int64_t block_rows = (b.row_begin + b.rows - 1) / kFp8Block - b.row_begin / kFp8Block + 1;
    const int64_t col_blocks = (b.cols + b.col_begin % kFp8Block + kFp8Block - 1) / kFp8Block;
    scales += block_rows * col_blocks;
  }
  return values + rows * 4 + scales * 4;
}

// Walks the model's weights in the loader's order and adds up their held bytes.
class Walker {
 public:
  Walker(const ModelConfig& cfg, const RankLayout& layout, const WeightFormat& format,
         const StoredFp8& stored_fp8)
      : cfg_(cfg), layout_(layout), format_(format), stored_fp8_(stored_fp8) {}

  // A weight stacking the owned blocks of `parts`, typed by the first part's storage.
  int64_t stacked(const std::vector<SplitTensor>& parts, bool packs = true) {
    std::vector<Block> blocks;
    for (const SplitTensor& t : parts) blocks.push_back(owned_block(layout_, t));
    const SplitTensor& first = parts.front();
    // An int4 checkpoint's packed modules are named by its config; an FP8 one's by its tensors.
    const bool stored_quantized = cfg_.int4_group_size > 0
                                      ? cfg_.stores_int4(module_name(first.name))
                                      : cfg_.fp8_block_quantized && stored_fp8_(first.name);
    const WeightType type =
        held_type(format_, first.kind, cfg_.quantized_checkpoint(), stored_quantized);
    const int64_t group = type == WeightType::MXFP4 ? 32 : format_.group_size;
    const int64_t bytes = held_bytes(type, blocks, group);
    int64_t rows = 0;
    for (const Block& b : blocks) rows += b.rows;
    if (packs) count_packed(type, 1, bytes, rows, blocks.front().cols);
    return bytes;
  }
  int64_t one(const SplitTensor& t, bool packs = true) { return stacked({t}, packs); }

  // gate_proj and up_proj stacked, then down_proj.
  int64_t mlp(const std::string& prefix, int64_t inter, WeightKind gate_up, WeightKind down) {
    const int64_t H = cfg_.hidden_size;
    return stacked({{prefix + "gate_proj.weight", gate_up, inter, H},
                    {prefix + "up_proj.weight", gate_up, inter, H}}) +
           one({prefix + "down_proj.weight", down, H, inter});
  }

  // `count` float32/bf16 matrices of rows x cols created by the loader itself (the router,
  // W_UK / W_UV).
  int64_t dense(WeightType type, int64_t count, int64_t rows, int64_t cols) {
    const int64_t bytes = rows * cols * (type == WeightType::F32 ? 4 : 2);
    count_packed(type, count, bytes, rows, cols);
    return count * bytes;
  }

  void attention(int64_t layer, RankWeights& w) {
    const ModelConfig& c = cfg_;
    const std::string p = fmt::format("model.layers.{}.self_attn.", layer);
    const int64_t H = c.hidden_size, heads = c.num_attention_heads, qk = c.qk_head_dim();
    const int64_t nope = c.qk_nope_head_dim, v = c.v_head_dim;
    const SplitTensor kv_a{p + "kv_a_proj_with_mqa.weight", WeightKind::QkvA,
                           c.kv_lora_rank + c.qk_rope_head_dim, H};
    if (c.q_lora_rank > 0) {
      // The loader types the fused weight by kv_a's storage.
      w.attention += stacked({kv_a, {p + "q_a_proj.weight", WeightKind::QkvA, c.q_lora_rank, H}});
      w.attention += one({p + "q_b_proj.weight", WeightKind::QB, heads * qk, c.q_lora_rank, qk});
    } else {
      w.attention += one(kv_a);
      w.attention += one({p + "q_proj.weight", WeightKind::QB, heads * qk, H, qk});
    }
    const int64_t kv_b = one(
        {p + "kv_b_proj.weight", WeightKind::KvB, heads * (nope + v), c.kv_lora_rank, nope + v});
    w.kv_b += kv_b;
    w.attention += kv_b;
    const int64_t local_heads = owned_range(layout_, WeightKind::QB, heads).size();
    const int64_t absorbed = dense(format_.dtype, local_heads, c.kv_lora_rank, nope) +
                             dense(format_.dtype, local_heads, v, c.kv_lora_rank);
    w.absorbed += absorbed;
    w.attention += absorbed;
    w.attention += one({p + "o_proj.weight", WeightKind::O, H, heads * v, v});
    if (c.has_indexer()) {  // the MTP layer's too, as V3.2's release has it
      const int64_t Hi = c.index_n_heads, Di = c.index_head_dim;
      w.attention += one({p + "indexer.wq_b.weight", WeightKind::Indexer, Hi * Di, c.q_lora_rank});
      w.attention += one({p + "indexer.wk.weight", WeightKind::Indexer, Di, H});
      w.attention += one({p + "indexer.weights_proj.weight", WeightKind::Indexer, Hi, H});
    }
  }

  void moe(int64_t layer, RankWeights& w) {
    const ModelConfig& c = cfg_;
    const std::string p = fmt::format("model.layers.{}.mlp.", layer);
    w.router += dense(WeightType::F32, 1, c.n_routed_experts, c.hidden_size);
    const Range experts = owned_range(layout_, WeightKind::RoutedExperts, c.n_routed_experts);
    ++w.moe_layers;
    w.experts_held = experts.size();
    for (int64_t e = experts.begin; e < experts.end; ++e) {
      w.expert_bytes = mlp(fmt::format("{}experts.{}.", p, e), c.moe_intermediate_size,
                           WeightKind::ExpertGateUp, WeightKind::ExpertDown);
    }
    if (c.n_shared_experts > 0) {
      w.shared_experts += mlp(p + "shared_experts.", c.moe_intermediate_size * c.n_shared_experts,
                              WeightKind::MlpGateUp, WeightKind::MlpDown);
    }
  }

  int64_t packed() const { return packed_; }

 private:
  // The packed copies of `count` weights of rows x cols holding `bytes` of values each, where
  // packing makes them: more memory, except that where the loader then drops the row-major
  // values (kernels::packed_copy_serves_all) a copy takes their place and adds only its padding.
  void count_packed(WeightType type, int64_t count, int64_t bytes, int64_t rows, int64_t cols) {
    const int64_t copy = kernels::packed_copy_bytes(type, rows, cols);
    if (copy == 0) return;
    packed_ += count * (kernels::packed_copy_serves_all(type, rows, cols) ? copy - bytes : copy);
  }

  const ModelConfig& cfg_;
  const RankLayout& layout_;
  const WeightFormat& format_;
  const StoredFp8& stored_fp8_;
  int64_t packed_ = 0;
};

}  // namespace

bool stored_fp8_by_convention(const std::string& name) {
  return name.rfind("model.layers.", 0) == 0 && name.find(".mlp.gate.") == std::string::npos &&
         name.find(".indexer.weights_proj.") == std::string::npos;
}

StoredFp8 stored_fp8_of(const std::filesystem::path& dir) {
  if (!std::filesystem::exists(dir / "model.safetensors") &&
      !std::filesystem::exists(dir / "model.safetensors.index.json")) {
    return stored_fp8_by_convention;
  }
  auto ckpt = std::make_shared<Checkpoint>(Checkpoint::open(dir));
  return [ckpt](const std::string& name) { return ckpt->get(name).type == StorageType::F8_E4M3; };
}

namespace {

// Decoder layer i's attention and MLP (or MoE) into w.
void add_layer(Walker& walk, const ModelConfig& cfg, int64_t i, RankWeights& w) {
  walk.attention(i, w);
  if (cfg.is_moe_layer(i)) {
    walk.moe(i, w);
  } else {
    w.dense_mlp += walk.mlp(fmt::format("model.layers.{}.mlp.", i), cfg.intermediate_size,
                            WeightKind::MlpGateUp, WeightKind::MlpDown);
  }
}

// The MTP layer (stored as layer L = num_hidden_layers): eh_proj [H, 2H] and its decoder layer.
int64_t mtp_bytes(Walker& walk, const ModelConfig& cfg) {
  const int64_t L = cfg.num_hidden_layers, H = cfg.hidden_size;
  RankWeights layer;
  add_layer(walk, cfg, L, layer);
  return layer.values() + walk.one({fmt::format("model.layers.{}.eh_proj.weight", L),
                                    WeightKind::MtpProjection, H, 2 * H});
}

}  // namespace

RankWeights rank_weights(const ModelConfig& cfg, const RankLayout& layout,
                         const WeightFormat& format, const StoredFp8& stored_fp8, bool with_mtp) {
  Walker walk(cfg, layout, format, stored_fp8);
  const int64_t H = cfg.hidden_size, V = cfg.vocab_size;
  RankWeights w;
  w.embedding = walk.one({"model.embed_tokens.weight", WeightKind::Embedding, V, H}, false);
  w.lm_head = walk.one({cfg.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight",
                        WeightKind::LmHead, V, H});
  for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) add_layer(walk, cfg, i, w);
  if (with_mtp) w.mtp = mtp_bytes(walk, cfg);
  w.packed = walk.packed();
  return w;
}

void check_layout(const ModelConfig& c, const RankLayout& l) {
  if (c.num_attention_heads % l.attn_tp_size != 0) {
    fail("num_attention_heads {} is not divisible by the attention TP size {}",
         c.num_attention_heads, l.attn_tp_size);
  }
  if (c.intermediate_size < l.tp_size)
    fail("intermediate_size {} is smaller than --tp {}", c.intermediate_size, l.tp_size);
  if (c.n_routed_experts == 0) return;
  if (l.ep_moe && c.n_routed_experts < l.tp_size) {
    fail("--enable-ep-moe needs --tp ({}) <= n_routed_experts ({})", l.tp_size, c.n_routed_experts);
  }
  if (!l.ep_moe && c.moe_intermediate_size < l.tp_size) {
    fail("moe_intermediate_size {} is smaller than --tp {} (use --enable-ep-moe)",
         c.moe_intermediate_size, l.tp_size);
  }
}

ModelSizing deepseek_sizing(const ModelConfig& cfg, const WeightFormat& format, KvDtype kv_dtype,
                            const StoredFp8& stored_fp8, bool with_mtp) {
  ModelSizing s;
  s.model_type = cfg.model_type;
  s.layers = cfg.num_hidden_layers;
  s.hidden_size = cfg.hidden_size;
  s.vocab_size = cfg.vocab_size;
  s.routed_experts = cfg.n_routed_experts;
  s.experts_per_token = cfg.router.top_k;
  s.kv_bytes_per_token =
      cache::LatentKvPool::bytes_per_token(cfg.num_hidden_layers + (with_mtp ? 1 : 0),
                                           cfg.kv_cache_dim(), kv_dtype, cfg.index_key_dim());
  s.check_layout = [cfg](const RankLayout& layout) { check_layout(cfg, layout); };
  s.rank = [cfg, format, stored_fp8, with_mtp](const RankLayout& layout) {
    const RankWeights w = rank_weights(cfg, layout, format, stored_fp8, with_mtp);
    // A decode reads the absorbed W_UK / W_UV, not kv_b.
    const int64_t step =
        w.attention - w.kv_b + w.lm_head + w.dense_mlp + w.shared_experts + w.router;
    return RankSizing{w.values(), w.resident(), step, w.routed_experts()};
  };
  return s;
}

}  // namespace mlaserve::model
