// Reading an HF config.json: typed keys with errors that name the file and the key, and the
// parts every DeepSeek family shares (YaRN, the MoE router, FP8 block quantization, end tokens).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "kernels/ops.h"
#include "model/config.h"

namespace mlaserve::model {

// Reads one key with a clear error naming the file and key for a missing or mistyped value.
class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& j, std::string origin) : j_(j), origin_(std::move(origin)) {}

  template <typename T>
  T required(const char* key) const {
    if (!j_.contains(key) || j_[key].is_null()) fail("{}: missing required key '{}'", origin_, key);
    return convert<T>(key);
  }

  template <typename T>
  T optional(const char* key, T fallback) const {
    if (!j_.contains(key) || j_[key].is_null()) return fallback;
    return convert<T>(key);
  }

  bool present(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }
  const nlohmann::json& raw(const char* key) const { return j_[key]; }
  const nlohmann::json& json() const { return j_; }
  const std::string& origin() const { return origin_; }

  int64_t positive(const char* key) const {
    auto v = required<int64_t>(key);
    if (v <= 0) fail("{}: '{}' must be positive, got {}", origin_, key, v);
    return v;
  }

 private:
  template <typename T>
  T convert(const char* key) const {
    const nlohmann::json& v = j_[key];
    bool ok = false;
    if constexpr (std::is_same_v<T, bool>)
      ok = v.is_boolean();
    else if constexpr (std::is_integral_v<T>)
      ok = v.is_number_integer();
    else if constexpr (std::is_floating_point_v<T>)
      ok = v.is_number();
    else
      ok = v.is_string();
    if (!ok) fail("{}: key '{}' has the wrong type ({})", origin_, key, v.dump());
    return v.get<T>();
  }

  const nlohmann::json& j_;
  std::string origin_;
};

// num_nextn_predict_layers: the MTP layers, 0 or 1.
int64_t read_nextn_layers(const ConfigReader& c);
// eos_token_id: an id or a list (1 when absent).
std::vector<int64_t> read_eos_token_ids(const ConfigReader& c);

// The keys every DeepSeek family's config shares, read into a family's config (which names the
// fields alike): the shape, the MTP layers, the context, the norm eps, BOS and EOS.
template <typename Config>
void read_common_keys(const ConfigReader& c, Config& cfg) {
  cfg.vocab_size = c.positive("vocab_size");
  cfg.hidden_size = c.positive("hidden_size");
  cfg.num_hidden_layers = c.positive("num_hidden_layers");
  cfg.num_nextn_predict_layers = read_nextn_layers(c);
  cfg.max_position_embeddings = c.positive("max_position_embeddings");
  cfg.rms_norm_eps = c.optional<double>("rms_norm_eps", 1e-6);
  cfg.bos_token_id = c.optional<int64_t>("bos_token_id", 0);
  cfg.eos_token_ids = read_eos_token_ids(c);
}

// rope_scaling of type yarn (or deepseek_yarn); none without rope_scaling.
std::optional<YarnScaling> read_yarn(const ConfigReader& c);
// The MoE router: num_experts_per_tok, scoring_func, topk_method, groups, normalisation, scale.
kernels::RouterSpec read_router(const ConfigReader& c, int64_t n_routed_experts);
// quantization_config with quant_method fp8 (e4m3, 128x128 blocks, dynamic activations):
// true; no quantization_config: false; any other method fails, listing `supported`.
bool read_fp8_quantization(const ConfigReader& c, const char* supported);
// generation_config.json's end tokens (an id or a list) added to eos_token_ids: they stop
// generation too, as HF generate, SGLang and vLLM treat them (Kimi-K2 names [EOS] in config.json
// but ends its chat turns with <|im_end|>, which only generation_config.json lists). From the
// JSON, or from model_dir's file when there is one.
void add_generation_eos_ids(const nlohmann::json& j, const std::string& origin,
                            std::vector<int64_t>& eos_token_ids);
void add_generation_eos_ids(const std::filesystem::path& model_dir,
                            std::vector<int64_t>& eos_token_ids);
nlohmann::json read_json_file(const std::filesystem::path& path);

}  // namespace mlaserve::model
