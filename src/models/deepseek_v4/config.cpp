#include "models/deepseek_v4/config.h"

#include <fmt/ranges.h>

#include "core/error.h"
#include "model/config_reader.h"

namespace mlaserve::models::deepseek_v4 {

using model::ConfigReader;
using nlohmann::json;

namespace {

void read_attention(const ConfigReader& c, V4Config& cfg) {
  cfg.num_attention_heads = c.positive("num_attention_heads");
  if (c.optional<int64_t>("num_key_value_heads", 1) != 1) {
    fail("{}: num_key_value_heads {} is not supported (DeepSeek-V4's attention has one KV head)",
         c.origin(), c.required<int64_t>("num_key_value_heads"));
  }
  cfg.head_dim = c.positive("head_dim");
  cfg.qk_rope_head_dim = c.positive("qk_rope_head_dim");
  if (cfg.qk_rope_head_dim % 2 != 0 || cfg.qk_rope_head_dim > cfg.head_dim) {
    fail("{}: qk_rope_head_dim {} must be even and at most head_dim {}", c.origin(),
         cfg.qk_rope_head_dim, cfg.head_dim);
  }
  cfg.q_lora_rank = c.positive("q_lora_rank");
  cfg.o_groups = c.positive("o_groups");
  cfg.o_lora_rank = c.positive("o_lora_rank");
  if (cfg.num_attention_heads % cfg.o_groups != 0) {
    fail("{}: num_attention_heads {} is not divisible by o_groups {}", c.origin(),
         cfg.num_attention_heads, cfg.o_groups);
  }
  cfg.sliding_window = c.positive("sliding_window");
  cfg.rope_theta = c.optional<double>("rope_theta", 10000.0);
  cfg.compress_rope_theta = c.optional<double>("compress_rope_theta", 160000.0);
  cfg.yarn = model::read_yarn(c);
}

// compress_ratios: one per decoder layer, optionally followed by the MTP block's (released V4
// configs list it; where one does not, the block attends its window only).
void read_compress_ratios(const ConfigReader& c, V4Config& cfg) {
  if (!c.present("compress_ratios") || !c.raw("compress_ratios").is_array())
    fail("{}: 'compress_ratios' must be a list (one ratio per layer)", c.origin());
  const json& list = c.raw("compress_ratios");
  const auto n = static_cast<int64_t>(list.size());
  if (n != cfg.num_hidden_layers && n != cfg.num_hidden_layers + cfg.num_nextn_predict_layers) {
    fail("{}: compress_ratios lists {} ratios for {} layers (and {} MTP layers)", c.origin(), n,
         cfg.num_hidden_layers, cfg.num_nextn_predict_layers);
  }
  for (int64_t i = 0; i < n; ++i) {
    const json& v = list[static_cast<size_t>(i)];
    if (!v.is_number_integer() ||
        (v.get<int64_t>() != 0 && v.get<int64_t>() != 4 && v.get<int64_t>() != 128)) {
      fail(
          "{}: compress_ratios[{}] is {}: DeepSeek-V4's layers compress by 0 (window only), 4 "
          "(CSA) or 128 (HCA)",
          c.origin(), i, v.dump());
    }
    cfg.compress_ratios.push_back(v.get<int64_t>());
  }
  cfg.compress_ratios.resize(
      static_cast<size_t>(cfg.num_hidden_layers + cfg.num_nextn_predict_layers), 0);
}

void read_indexer(const ConfigReader& c, V4Config& cfg) {
  bool any_csa = false;
  for (int64_t r : cfg.compress_ratios) any_csa = any_csa || r == 4;
  if (!any_csa) return;
  cfg.index_n_heads = c.positive("index_n_heads");
  cfg.index_head_dim = c.positive("index_head_dim");
  cfg.index_topk = c.positive("index_topk");
  if (cfg.index_head_dim < cfg.qk_rope_head_dim) {
    fail("{}: index_head_dim {} is smaller than qk_rope_head_dim {}, which its RoPE rotates",
         c.origin(), cfg.index_head_dim, cfg.qk_rope_head_dim);
  }
}

void read_moe(const ConfigReader& c, V4Config& cfg) {
  cfg.n_routed_experts = c.positive("n_routed_experts");
  if (cfg.n_routed_experts < 2) fail("{}: n_routed_experts must be at least 2", c.origin());
  cfg.n_shared_experts = c.optional<int64_t>("n_shared_experts", 1);
  if (cfg.n_shared_experts != 0 && cfg.n_shared_experts != 1) {
    fail("{}: n_shared_experts {} is not supported (0 or 1, as DeepSeek-V4)", c.origin(),
         cfg.n_shared_experts);
  }
  cfg.moe_intermediate_size = c.positive("moe_intermediate_size");
  cfg.num_hash_layers = c.optional<int64_t>("num_hash_layers", 0);
  if (cfg.num_hash_layers < 0 || cfg.num_hash_layers > cfg.num_hidden_layers) {
    fail("{}: num_hash_layers {} must be in [0, num_hidden_layers={}]", c.origin(),
         cfg.num_hash_layers, cfg.num_hidden_layers);
  }
  cfg.router = model::read_router(c, cfg.n_routed_experts);
  // DeepSeek-V4 routes one way whatever topk_method and norm_topk_prob say: the bias only
  // chooses (noaux_tc over one group), the chosen scores are normalised unless they are a
  // softmax, then scaled by routed_scaling_factor.
  cfg.router.method = kernels::RouterTopk::NoauxTc;
  cfg.router.n_group = cfg.router.topk_group = 1;
  cfg.router.norm_topk_prob = cfg.router.scoring != kernels::RouterScoring::Softmax;
  cfg.swiglu_limit = c.optional<double>("swiglu_limit", 0.0);
  if (cfg.swiglu_limit < 0) fail("{}: swiglu_limit must not be negative", c.origin());
}

void read_hyper_connections(const ConfigReader& c, V4Config& cfg) {
  cfg.hc_mult = c.positive("hc_mult");
  cfg.hc_sinkhorn_iters = c.positive("hc_sinkhorn_iters");
  cfg.hc_eps = c.optional<double>("hc_eps", 1e-6);
}

void read_weight_formats(const ConfigReader& c, V4Config& cfg) {
  cfg.fp8_block_quantized = model::read_fp8_quantization(c, "fp8");
  const auto experts = c.optional<std::string>("expert_dtype", "");
  if (!experts.empty() && experts != "fp4")
    fail("{}: expert_dtype '{}' is not supported (fp4, or none)", c.origin(), experts);
  cfg.fp4_experts = experts == "fp4";
  if (cfg.fp4_experts && cfg.hidden_size % 32 != 0)
    fail("{}: FP4 experts need hidden_size a multiple of 32", c.origin());
  if (cfg.fp4_experts && cfg.moe_intermediate_size % 32 != 0)
    fail("{}: FP4 experts need moe_intermediate_size a multiple of 32", c.origin());
}

}  // namespace

LayerKind V4Config::layer_kind(int64_t layer) const {
  switch (compress_ratio(layer)) {
    case 4:
      return LayerKind::Csa;
    case 128:
      return LayerKind::Hca;
    default:
      return LayerKind::Window;
  }
}

double V4Config::kv_values_per_token(int64_t layer) const {
  switch (layer_kind(layer)) {
    case LayerKind::Csa:
      return static_cast<double>(head_dim + index_head_dim) / 4.0;
    case LayerKind::Hca:
      return static_cast<double>(head_dim) / 128.0;
    case LayerKind::Window:
      break;
  }
  return 0.0;
}

int64_t V4Config::compressor_state_floats(int64_t layer) const {
  // Overlapping (CSA) compressors keep two running sums (this entry's and the next one's).
  switch (layer_kind(layer)) {
    case LayerKind::Csa:
      return 2 * 3 * (head_dim + index_head_dim);
    case LayerKind::Hca:
      return 3 * head_dim;
    case LayerKind::Window:
      break;
  }
  return 0;
}

V4Config V4Config::from_json(const json& j, const std::string& origin) {
  if (!j.is_object()) fail("{}: expected a JSON object", origin);
  ConfigReader c(j, origin);
  const auto type = c.required<std::string>("model_type");
  if (type != "deepseek_v4") fail("{}: model_type '{}' is not deepseek_v4", origin, type);
  if (c.optional<bool>("tie_word_embeddings", false))
    fail("{}: tie_word_embeddings true is not supported for deepseek_v4", origin);
  V4Config cfg;
  model::read_common_keys(c, cfg);
  read_attention(c, cfg);
  read_compress_ratios(c, cfg);
  read_indexer(c, cfg);
  read_moe(c, cfg);
  read_hyper_connections(c, cfg);
  read_weight_formats(c, cfg);
  return cfg;
}

V4Config V4Config::load(const std::filesystem::path& model_dir) {
  const auto path = model_dir / "config.json";
  V4Config cfg = from_json(model::read_json_file(path), path.string());
  model::add_generation_eos_ids(model_dir, cfg.eos_token_ids);
  return cfg;
}

}  // namespace mlaserve::models::deepseek_v4
