#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"
#include "model/config_reader.h"

namespace mlaserve::model {

// compressed-tensors' `ignore` list: module names, and "re:" patterns compiled once (a model
// has ~10^5 tensors to ask about). The patterns are Python regexes that compressed-tensors
// applies with re.match (anchored at the start only); PCRE2 reads that syntax, reports a bad
// pattern as an error and bounds a match's backtracking, where std::regex recursed and
// overflowed on hostile patterns (config_fuzz).
struct Int4Ignore {
  std::vector<std::string> names;
  std::vector<std::shared_ptr<pcre2_code>> patterns;
  std::shared_ptr<pcre2_match_context> limits;
};

namespace {

std::shared_ptr<pcre2_code> compile_ignore_pattern(const std::string& pattern,
                                                   const std::string& where) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_ANCHORED | PCRE2_UTF, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    fail("{}.ignore: bad regex 're:{}' at offset {}: {}", where, pattern, offset,
         reinterpret_cast<const char*>(message));
  }
  return {code, pcre2_code_free};
}

std::shared_ptr<pcre2_match_context> match_limits() {
  std::shared_ptr<pcre2_match_context> context(pcre2_match_context_create(nullptr),
                                               pcre2_match_context_free);
  pcre2_set_match_limit(context.get(), 100000);
  pcre2_set_depth_limit(context.get(), 1000);
  return context;
}

}  // namespace

using nlohmann::json;

int64_t read_nextn_layers(const ConfigReader& c) {
  const auto n = c.optional<int64_t>("num_nextn_predict_layers", 0);
  if (n < 0 || n > 1) {
    fail("{}: num_nextn_predict_layers {} is not supported (0 or 1, as DeepSeek-V3 and V4)",
         c.origin(), n);
  }
  return n;
}

std::optional<YarnScaling> read_yarn(const ConfigReader& c) {
  if (!c.present("rope_scaling")) return std::nullopt;
  const json& rs = c.raw("rope_scaling");
  ConfigReader r(rs, c.origin() + " rope_scaling");
  const std::string type =
      rs.contains("type") ? r.required<std::string>("type") : r.required<std::string>("rope_type");
  if (type != "yarn" && type != "deepseek_yarn") {
    fail("{}: rope_scaling type '{}' is not supported (only yarn)", c.origin(), type);
  }
  YarnScaling y;
  y.factor = r.required<double>("factor");
  y.original_max_position_embeddings = r.required<int64_t>("original_max_position_embeddings");
  y.beta_fast = r.optional<double>("beta_fast", 32.0);
  y.beta_slow = r.optional<double>("beta_slow", 1.0);
  y.mscale = r.optional<double>("mscale", 1.0);
  y.mscale_all_dim = r.optional<double>("mscale_all_dim", 0.0);
  return y;
}

namespace {

// RouterSpec counts are ints: a larger value would wrap into a different, plausible count.
int router_int(const ConfigReader& c, const char* key, int64_t value) {
  if (value < INT32_MIN || value > INT32_MAX)
    fail("{}: '{}' {} is out of range", c.origin(), key, value);
  return static_cast<int>(value);
}

}  // namespace

kernels::RouterSpec read_router(const ConfigReader& c, int64_t n_routed_experts) {
  kernels::RouterSpec r;
  r.n_experts = router_int(c, "n_routed_experts", n_routed_experts);
  r.top_k = router_int(c, "num_experts_per_tok", c.positive("num_experts_per_tok"));
  r.n_group = router_int(c, "n_group", c.optional<int64_t>("n_group", 1));
  r.topk_group = router_int(c, "topk_group", c.optional<int64_t>("topk_group", 1));
  r.norm_topk_prob = c.optional<bool>("norm_topk_prob", false);
  r.routed_scaling_factor = static_cast<float>(c.optional<double>("routed_scaling_factor", 1.0));

  const auto scoring = c.optional<std::string>("scoring_func", "softmax");
  if (scoring == "softmax")
    r.scoring = kernels::RouterScoring::Softmax;
  else if (scoring == "sigmoid")
    r.scoring = kernels::RouterScoring::Sigmoid;
  else if (scoring == "sqrtsoftplus")
    r.scoring = kernels::RouterScoring::SqrtSoftplus;
  else
    fail("{}: scoring_func '{}' is not supported (softmax, sigmoid, sqrtsoftplus)", c.origin(),
         scoring);

  const auto method = c.optional<std::string>("topk_method", "greedy");
  if (method == "greedy")
    r.method = kernels::RouterTopk::Greedy;
  else if (method == "group_limited_greedy")
    r.method = kernels::RouterTopk::GroupLimitedGreedy;
  else if (method == "noaux_tc")
    r.method = kernels::RouterTopk::NoauxTc;
  else
    fail("{}: topk_method '{}' is not supported (greedy, group_limited_greedy, noaux_tc)",
         c.origin(), method);

  if (r.n_group <= 0 || r.n_experts % r.n_group != 0) {
    fail("{}: n_routed_experts {} is not divisible by n_group {}", c.origin(), r.n_experts,
         r.n_group);
  }
  if (r.topk_group <= 0 || r.topk_group > r.n_group) {
    fail("{}: topk_group {} must be in [1, n_group={}]", c.origin(), r.topk_group, r.n_group);
  }
  if (r.top_k > r.n_experts) {
    fail("{}: num_experts_per_tok {} exceeds n_routed_experts {}", c.origin(), r.top_k,
         r.n_experts);
  }
  if (r.method == kernels::RouterTopk::NoauxTc && r.n_experts / r.n_group < 2) {
    fail("{}: noaux_tc needs at least 2 experts per group (n_routed_experts / n_group)",
         c.origin());
  }
  return r;
}

namespace {

// compressed-tensors (the format of Kimi-K2-Thinking's int4 release): one config group of
// weight-only symmetric int4 with group-wise scales, stored pack-quantized. Anything else
// (activation quantization, asymmetric zero points, other bit widths or strategies) is refused.
void read_compressed_tensors(const ConfigReader& c, const json& q, ModelConfig& cfg) {
  const std::string where = c.origin() + ": quantization_config";
  const auto format = ConfigReader(q, where).optional<std::string>("format", "");
  if (format != "pack-quantized")
    fail("{}.format '{}' is not supported (pack-quantized)", where, format);
  if (!q.contains("config_groups") || !q["config_groups"].is_object() ||
      q["config_groups"].size() != 1) {
    fail("{}.config_groups must hold exactly one group (int4 weights)", where);
  }
  const json& group = q["config_groups"].begin().value();
  if (!group.is_object() || !group.contains("weights") || !group["weights"].is_object())
    fail("{}.config_groups: the group has no 'weights' scheme", where);
  if (group.contains("input_activations") && !group["input_activations"].is_null())
    fail("{}: quantized input activations are not supported (weight-only int4)", where);
  const json& w = group["weights"];
  const auto field = [&](const char* name) { return w.contains(name) ? w[name] : json(); };
  if (field("num_bits") != 4 || field("type") != "int" || field("symmetric") != true ||
      field("strategy") != "group") {
    fail("{}: weights {} are not supported (num_bits 4, type int, symmetric, strategy group)",
         where, w.dump());
  }
  const json size = field("group_size");
  if (!size.is_number_integer() || size.get<int64_t>() <= 0 || size.get<int64_t>() % 32 != 0 ||
      (size.get<int64_t>() > 64 && size.get<int64_t>() % 128 != 0)) {
    fail("{}: weights.group_size {} is not supported (32, 64 or a multiple of 128)", where,
         size.dump());
  }
  cfg.int4_group_size = size.get<int64_t>();
  auto compiled = std::make_shared<Int4Ignore>();
  if (q.contains("ignore")) {
    if (!q["ignore"].is_array()) fail("{}.ignore must be a list of module names", where);
    for (const json& entry : q["ignore"]) {
      if (!entry.is_string()) fail("{}.ignore holds a non-string {}", where, entry.dump());
      const auto name = entry.get<std::string>();
      if (!name.starts_with("re:")) {
        compiled->names.push_back(name);
        continue;
      }
      compiled->patterns.push_back(compile_ignore_pattern(name.substr(3), where));
    }
  }
  compiled->limits = match_limits();
  cfg.int4_ignore = std::move(compiled);
}

// An `eos_token_id` list appended to ids; whether there was one (a single id is the caller's).
bool read_eos_ids(const json& j, const std::string& origin, std::vector<int64_t>& ids) {
  if (!j.contains("eos_token_id") || !j["eos_token_id"].is_array()) return false;
  for (const auto& v : j["eos_token_id"]) {
    if (!v.is_number_integer())
      fail("{}: 'eos_token_id' lists {}, not a token id", origin, v.dump());
    ids.push_back(v.get<int64_t>());
  }
  return true;
}

}  // namespace

std::vector<int64_t> read_eos_token_ids(const ConfigReader& c) {
  std::vector<int64_t> ids;
  if (!read_eos_ids(c.json(), c.origin(), ids))
    ids.push_back(c.optional<int64_t>("eos_token_id", 1));
  return ids;
}

bool read_fp8_quantization(const ConfigReader& c, const char* supported) {
  if (!c.present("quantization_config")) return false;
  const json& q = c.raw("quantization_config");
  ConfigReader r(q, c.origin() + " quantization_config");
  const auto method = r.required<std::string>("quant_method");
  if (method != "fp8") {
    fail("{}: quantization_config.quant_method '{}' is not supported ({})", c.origin(), method,
         supported);
  }
  const auto fmt = r.optional<std::string>("fmt", "e4m3");
  if (fmt != "e4m3")
    fail("{}: quantization_config.fmt '{}' is not supported (e4m3)", c.origin(), fmt);
  if (q.contains("weight_block_size") && q["weight_block_size"] != json::array({128, 128})) {
    fail("{}: quantization_config.weight_block_size {} is not supported ([128, 128])", c.origin(),
         q["weight_block_size"].dump());
  }
  // Dynamic: activations are quantized per token group at run time (DeepSeek-V3's scheme), which
  // this engine replaces by computing activations in float; a static scheme would need scales
  // from the checkpoint that nothing here reads.
  const auto activations = r.optional<std::string>("activation_scheme", "dynamic");
  if (activations != "dynamic") {
    fail("{}: quantization_config.activation_scheme '{}' is not supported (dynamic)", c.origin(),
         activations);
  }
  return true;
}

namespace {

void read_quantization(const ConfigReader& c, ModelConfig& cfg) {
  if (c.present("quantization_config")) {
    const json& q = c.raw("quantization_config");
    if (q.is_object() && q.value("quant_method", json()) == "compressed-tensors")
      return read_compressed_tensors(c, q, cfg);
  }
  cfg.fp8_block_quantized = read_fp8_quantization(c, "fp8, compressed-tensors");
}

// DeepSeek-V3.2's lightning indexer. Its queries come from MLA's q latent, so it needs q LoRA;
// its RoPE rotates the first qk_rope_head_dim values of each head, which must fit.
void read_indexer(const ConfigReader& c, ModelConfig& cfg) {
  cfg.index_n_heads = c.positive("index_n_heads");
  cfg.index_head_dim = c.positive("index_head_dim");
  cfg.index_topk = c.positive("index_topk");
  if (cfg.q_lora_rank <= 0) {
    fail("{}: deepseek_v32's indexer reads the q latent, so q_lora_rank must be positive",
         c.origin());
  }
  if (cfg.index_head_dim < cfg.qk_rope_head_dim) {
    fail("{}: index_head_dim {} is smaller than qk_rope_head_dim {}, which its RoPE rotates",
         c.origin(), cfg.index_head_dim, cfg.qk_rope_head_dim);
  }
}

void check_supported(const ConfigReader& c) {
  const auto act = c.optional<std::string>("hidden_act", "silu");
  if (act != "silu") fail("{}: hidden_act '{}' is not supported (silu)", c.origin(), act);
  if (c.optional<bool>("attention_bias", false))
    fail("{}: attention_bias true is not supported", c.origin());
  if (c.optional<bool>("mlp_bias", false)) fail("{}: mlp_bias true is not supported", c.origin());
  if (!c.optional<bool>("rope_interleave", true)) {
    fail("{}: rope_interleave false is not supported (DeepSeek rotates interleaved pairs)",
         c.origin());
  }
}

}  // namespace

bool ModelConfig::is_moe_layer(int64_t layer) const {
  return n_routed_experts > 0 && layer >= first_k_dense_replace && layer % moe_layer_freq == 0;
}

double yarn_mscale(double factor, double m) {
  return factor <= 1.0 ? 1.0 : 0.1 * m * std::log(factor) + 1.0;
}

double ModelConfig::softmax_scale() const {
  double scale = 1.0 / std::sqrt(static_cast<double>(qk_head_dim()));
  if (yarn && yarn->mscale_all_dim != 0.0) {
    const double m = yarn_mscale(yarn->factor, yarn->mscale_all_dim);
    scale *= m * m;
  }
  return scale;
}

namespace {

// Kimi-K2.5 (model_type kimi_k25) is Kimi-K2's language model (its text_config, a kimi_k2 config)
// beside a vision tower: the text weights are K2's names under "language_model.", the tower's
// (vision_tower.*, mm_projector.*) are not read, so images are not served. The quantization
// config may sit at the top (it covers the whole checkpoint) or in text_config.
ModelConfig kimi_k25_language_model(const json& j, const std::string& origin) {
  const auto text = j.find("text_config");
  if (text == j.end() || !text->is_object())
    fail("{}: kimi_k25 needs a text_config object (its language model's config)", origin);
  json merged = *text;
  for (const char* key : {"quantization_config", "bos_token_id", "eos_token_id"}) {
    if (!merged.contains(key) && j.contains(key)) merged[key] = j[key];
  }
  ModelConfig cfg = ModelConfig::from_json(merged, origin + ": text_config");
  if (cfg.model_type != "kimi_k2" && cfg.model_type != "deepseek_v3")
    fail("{}: text_config.model_type '{}' is not kimi_k2", origin, cfg.model_type);
  cfg.model_type = "kimi_k25";
  cfg.tensor_prefix = "language_model.";
  return cfg;
}

}  // namespace

ModelConfig ModelConfig::from_json(const json& j, const std::string& origin) {
  if (!j.is_object()) fail("{}: expected a JSON object", origin);
  if (j.value("model_type", json()) == "kimi_k25") return kimi_k25_language_model(j, origin);
  ConfigReader c(j, origin);
  ModelConfig cfg;
  cfg.model_type = c.required<std::string>("model_type");
  // Kimi-K2 is DeepSeek-V3's architecture under its own name (its config carries the same
  // fields: MLA, noaux_tc routing with n_group 1, YaRN).
  if (cfg.model_type != "deepseek_v2" && cfg.model_type != "deepseek_v3" &&
      cfg.model_type != "deepseek_v32" && cfg.model_type != "kimi_k2") {
    fail(
        "{}: model_type '{}' is not supported (deepseek_v2, deepseek_v3, deepseek_v32, kimi_k2, "
        "kimi_k25, deepseek_v4)",
        origin, cfg.model_type);
  }
  check_supported(c);
  read_common_keys(c, cfg);
  cfg.num_attention_heads = c.positive("num_attention_heads");

  cfg.q_lora_rank = c.optional<int64_t>("q_lora_rank", 0);
  cfg.kv_lora_rank = c.positive("kv_lora_rank");
  cfg.qk_nope_head_dim = c.positive("qk_nope_head_dim");
  cfg.qk_rope_head_dim = c.positive("qk_rope_head_dim");
  cfg.v_head_dim = c.positive("v_head_dim");
  if (cfg.qk_rope_head_dim % 2 != 0)
    fail("{}: qk_rope_head_dim {} must be even", origin, cfg.qk_rope_head_dim);
  cfg.rope_theta = c.optional<double>("rope_theta", 10000.0);
  cfg.yarn = read_yarn(c);
  if (cfg.model_type == "deepseek_v32") read_indexer(c, cfg);

  cfg.intermediate_size = c.positive("intermediate_size");
  cfg.n_routed_experts = c.optional<int64_t>("n_routed_experts", 0);
  if (cfg.n_routed_experts > 0) {
    cfg.moe_intermediate_size = c.positive("moe_intermediate_size");
    cfg.n_shared_experts = c.optional<int64_t>("n_shared_experts", 0);
    cfg.first_k_dense_replace = c.optional<int64_t>("first_k_dense_replace", 0);
    cfg.moe_layer_freq = c.optional<int64_t>("moe_layer_freq", 1);
    if (cfg.moe_layer_freq <= 0) fail("{}: moe_layer_freq must be positive", origin);
    cfg.router = read_router(c, cfg.n_routed_experts);
  }
  cfg.tie_word_embeddings = c.optional<bool>("tie_word_embeddings", false);
  read_quantization(c, cfg);

  return cfg;
}

void add_generation_eos_ids(const json& j, const std::string& origin,
                            std::vector<int64_t>& eos_token_ids) {
  if (!j.is_object()) fail("{}: not a JSON object", origin);
  std::vector<int64_t> ids;
  if (!read_eos_ids(j, origin, ids) && j.contains("eos_token_id") && !j["eos_token_id"].is_null())
    ids.push_back(ConfigReader(j, origin).required<int64_t>("eos_token_id"));
  for (int64_t id : ids) {
    if (std::find(eos_token_ids.begin(), eos_token_ids.end(), id) == eos_token_ids.end())
      eos_token_ids.push_back(id);
  }
}

void add_generation_eos_ids(const std::filesystem::path& model_dir,
                            std::vector<int64_t>& eos_token_ids) {
  const auto generation = model_dir / "generation_config.json";
  if (std::filesystem::exists(generation))
    add_generation_eos_ids(read_json_file(generation), generation.string(), eos_token_ids);
}

void ModelConfig::add_generation_config(const json& j, const std::string& origin) {
  add_generation_eos_ids(j, origin, eos_token_ids);
}

json read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) fail("cannot open {}", path.string());
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    fail("{}: invalid JSON: {}", path.string(), e.what());
  }
}

ModelConfig ModelConfig::load(const std::filesystem::path& model_dir) {
  const auto path = model_dir / "config.json";
  ModelConfig cfg = from_json(read_json_file(path), path.string());
  add_generation_eos_ids(model_dir, cfg.eos_token_ids);
  return cfg;
}

bool ModelConfig::stores_int4(const std::string& module) const {
  // compressed-tensors quantizes the Linear modules its config targets: an embedding never.
  if (int4_group_size == 0 || module.ends_with("embed_tokens")) return false;
  if (!int4_ignore) return true;
  const Int4Ignore& ignore = *int4_ignore;
  // The list names modules as the checkpoint does (with tensor_prefix).
  const std::string name = tensor_prefix + module;
  if (std::find(ignore.names.begin(), ignore.names.end(), name) != ignore.names.end()) return false;
  for (const auto& pattern : ignore.patterns) {
    const std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
        pcre2_match_data_create_from_pattern(pattern.get(), nullptr), pcre2_match_data_free);
    const int found = pcre2_match(pattern.get(), reinterpret_cast<PCRE2_SPTR>(name.data()),
                                  name.size(), 0, 0, match.get(), ignore.limits.get());
    if (found >= 0) return false;
    if (found != PCRE2_ERROR_NOMATCH)
      fail(
          "config.json: quantization_config.ignore: a pattern cannot be matched against '{}' "
          "(PCRE2 error {}: too complex?)",
          module, found);
  }
  return true;
}

}  // namespace mlaserve::model
