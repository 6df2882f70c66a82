// The model hyper-parameters read from an HF config.json (deepseek_v2 / deepseek_v3 /
// deepseek_v32).
// Anything we do not implement is rejected by name rather than silently ignored.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/ops.h"

namespace mlaserve::model {

struct YarnScaling {
  double factor = 1.0;
  int64_t original_max_position_embeddings = 4096;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 1.0;
  double mscale_all_dim = 0.0;
};

struct ModelConfig {
  std::string model_type;  // deepseek_v2 | deepseek_v3 | deepseek_v32 | kimi_k2 | kimi_k25
  // What the checkpoint's tensor names start with beyond the names the loader asks for:
  // "language_model." in Kimi-K2.5, whose language model sits beside a vision tower (not read).
  std::string tensor_prefix;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  // DeepSeek-V3's multi-token-prediction module, stored as layer num_hidden_layers (0 or 1).
  int64_t num_nextn_predict_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;

  // MLA
  int64_t q_lora_rank = 0;  // 0: no q LoRA (q_proj), as in V2-Lite
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  double rope_theta = 10000.0;
  std::optional<YarnScaling> yarn;

  // DeepSeek Sparse Attention (V3.2): each layer's lightning indexer scores every earlier token
  // with index_n_heads heads of index_head_dim and MLA attends to the index_topk best only.
  // All 0 for a model without it.
  int64_t index_n_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk = 0;

  // MLP / MoE
  int64_t intermediate_size = 0;      // dense layers
  int64_t moe_intermediate_size = 0;  // each routed expert
  int64_t n_routed_experts = 0;       // 0: every layer dense
  int64_t n_shared_experts = 0;
  int64_t first_k_dense_replace = 0;
  int64_t moe_layer_freq = 1;
  kernels::RouterSpec router;  // scoring, top-k method, groups (bias pointer left null)

  bool tie_word_embeddings = false;
  bool fp8_block_quantized = false;  // quantization_config fp8 e4m3, 128x128 block scales
  // quantization_config compressed-tensors pack-quantized int4 (Kimi-K2-Thinking): the group
  // size (0: not such a checkpoint) and the `ignore` list of modules left unquantized (names,
  // and "re:" regexes over module names compiled once; stores_int4 reads it).
  int64_t int4_group_size = 0;
  std::shared_ptr<const struct Int4Ignore> int4_ignore;
  // Whether the checkpoint stores a module (a tensor name less ".weight") as packed int4.
  bool stores_int4(const std::string& module) const;
  bool quantized_checkpoint() const { return fp8_block_quantized || int4_group_size > 0; }
  int64_t bos_token_id = 0;
  std::vector<int64_t> eos_token_ids;

  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  int64_t kv_cache_dim() const { return kv_lora_rank + qk_rope_head_dim; }  // 576 for V3
  bool has_indexer() const { return index_topk > 0; }
  // Values per token per layer of the indexer's key cache (0 without an indexer).
  int64_t index_key_dim() const { return has_indexer() ? index_head_dim : 0; }
  bool is_moe_layer(int64_t layer) const;
  // qk_head_dim^-0.5 * yarn_mscale(factor, mscale_all_dim)^2 (both MLA paths use it).
  double softmax_scale() const;

  static ModelConfig from_json(const nlohmann::json& j, const std::string& origin);
  // generation_config.json's eos_token_id (an id or a list) added to eos_token_ids.
  void add_generation_config(const nlohmann::json& j, const std::string& origin);
  static ModelConfig load(const std::filesystem::path& model_dir);
};

// DeepSeek YaRN: mscale = 0.1 * m * ln(factor) + 1 for factor > 1, else 1.
double yarn_mscale(double factor, double m);

}  // namespace mlaserve::model
