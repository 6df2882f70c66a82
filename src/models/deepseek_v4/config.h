// DeepSeek-V4's hyper-parameters from its HF config.json (model_type deepseek_v4): hybrid
// attention (a sliding window in every layer, plus compressed KV entries in most: CSA with a
// lightning indexer, or HCA), manifold-constrained hyper-connections, and DeepSeekMoE with
// sqrt-softplus scores and hash routing in the first layers.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "model/config.h"

namespace mlaserve::models::deepseek_v4 {

// What a layer's attention reads beyond its window of raw rows (compress_ratios[layer]).
enum class LayerKind {
  Window,  // 0: the window only
  Csa,     // 4: compressed sparse attention, one entry per 4 tokens, the indexer's top-k of them
  Hca,     // 128: heavily compressed attention, one entry per 128 tokens, all of them
};

struct V4Config {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;  // H
  int64_t num_hidden_layers = 0;
  int64_t num_nextn_predict_layers = 0;  // the MTP block mtp.0 (0 or 1)
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;

  // Attention: MQA with one head_dim-wide row per token that is both key and value.
  int64_t num_attention_heads = 0;
  int64_t head_dim = 0;          // d: 512 in V4
  int64_t qk_rope_head_dim = 0;  // rd: RoPE on the last rd dims of q, rows and outputs
  int64_t q_lora_rank = 0;
  int64_t o_groups = 0;     // the output projection's groups of heads
  int64_t o_lora_rank = 0;  // each group's low rank
  int64_t sliding_window = 0;
  std::vector<int64_t> compress_ratios;   // per layer, the MTP block's last: 0, 4 or 128
  double rope_theta = 10000.0;            // window-only layers (no YaRN)
  double compress_rope_theta = 160000.0;  // compressing layers (with YaRN when configured)
  std::optional<model::YarnScaling> yarn;

  // The lightning indexer of CSA layers.
  int64_t index_n_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk = 0;

  // MoE in every layer.
  int64_t n_routed_experts = 0;
  int64_t n_shared_experts = 0;  // 0 or 1
  int64_t moe_intermediate_size = 0;
  int64_t num_hash_layers = 0;  // layers [0, num_hash_layers) route by tid2eid[token]
  kernels::RouterSpec router;
  double swiglu_limit = 0.0;  // > 0: gate <= limit, |up| <= limit before SiLU(gate) * up

  // Hyper-connections: hc_mult residual streams.
  int64_t hc_mult = 0;
  int64_t hc_sinkhorn_iters = 0;
  double hc_eps = 1e-6;

  bool fp8_block_quantized = false;  // F8_E4M3 linear weights with 128x128 E8M0 scales
  bool fp4_experts = false;          // routed experts as FP4 e2m1 (I8) with E8M0 scales per 32
  int64_t bos_token_id = 0;
  std::vector<int64_t> eos_token_ids;

  LayerKind layer_kind(int64_t layer) const;
  // Tokens per compressed entry of a layer: 4, 128, or 0 for a window-only layer.
  int64_t compress_ratio(int64_t layer) const {
    return compress_ratios[static_cast<size_t>(layer)];
  }
  bool hash_routed(int64_t layer) const { return layer < num_hash_layers; }
  // The MTP block is a layer after the decoder's: its compress ratio and its KV pools.
  int64_t mtp_layer() const { return num_hidden_layers; }
  int64_t layers_with_mtp() const { return num_hidden_layers + num_nextn_predict_layers; }
  int64_t hc_mix_size() const { return (2 + hc_mult) * hc_mult; }  // hc_pre's mixes per token

  // The KV a layer keeps, in values (times the cache's bytes per value): per token of context
  // beyond the window, its compressed entries (CSA: (d + index_head_dim) / 4, HCA: d / 128,
  // window-only: 0); per sequence whatever its length, the window of raw rows and the
  // compressors' running sums (float32: 3 per dim of each unfinished entry).
  double kv_values_per_token(int64_t layer) const;
  int64_t window_values() const { return sliding_window * head_dim; }
  int64_t compressor_state_floats(int64_t layer) const;

  static V4Config from_json(const nlohmann::json& j, const std::string& origin);
  static V4Config load(const std::filesystem::path& model_dir);
};

}  // namespace mlaserve::models::deepseek_v4
