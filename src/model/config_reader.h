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

// The keys every DeepSeek family's config shares.
struct CommonShape {
  int64_t vocab_size = 0, hidden_size = 0, num_hidden_layers = 0;
  int64_t num_nextn_predict_layers = 0;  // the MTP layer: 0 or 1
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
};
CommonShape read_common_shape(const ConfigReader& c);
// Reads them into a family's config (which names the fields alike).
template <typename Config>
void read_common_shape(const ConfigReader& c, Config& cfg) {
  const CommonShape s = read_common_shape(c);
  cfg.vocab_size = s.vocab_size;
  cfg.hidden_size = s.hidden_size;
  cfg.num_hidden_layers = s.num_hidden_layers;
  cfg.num_nextn_predict_layers = s.num_nextn_predict_layers;
  cfg.max_position_embeddings = s.max_position_embeddings;
  cfg.rms_norm_eps = s.rms_norm_eps;
}

// rope_scaling of type yarn (or deepseek_yarn); none without rope_scaling.
std::optional<YarnScaling> read_yarn(const ConfigReader& c);
// The MoE router: num_experts_per_tok, scoring_func, topk_method, groups, normalisation, scale.
kernels::RouterSpec read_router(const ConfigReader& c, int64_t n_routed_experts);
// quantization_config with quant_method fp8 (e4m3, 128x128 blocks, dynamic activations):
// true; no quantization_config: false; any other method fails, listing `supported`.
bool read_fp8_quantization(const ConfigReader& c, const char* supported);
// An `eos_token_id` list appended to ids; whether there was one (a single id is the caller's).
bool read_eos_ids(const nlohmann::json& j, const std::string& origin, std::vector<int64_t>& ids);
// generation_config.json's end tokens (an id or a list) added to eos_token_ids: they stop
// generation too, as HF generate, SGLang and vLLM treat them.
void add_generation_eos_ids(const nlohmann::json& j, const std::string& origin,
                            std::vector<int64_t>& eos_token_ids);
nlohmann::json read_json_file(const std::filesystem::path& path);

}  // namespace mlaserve::model
