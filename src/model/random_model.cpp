#include "model/random_model.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <numbers>

#include "core/error.h"
#include "core/numeric.h"
#include "model/config.h"
#include "model/random_tensors.h"
#include "model/safetensors.h"

namespace mlaserve::model {

namespace {

class Writer : public RandomTensors {
 public:
  Writer(uint64_t seed, RandomWeightFormat format) : RandomTensors(seed), format_(format) {}

  // A [rows, cols] matrix with N(0, std²) entries; quantizable weights go FP8 when asked.
  void matrix(const std::string& name, int64_t rows, int64_t cols, double std, bool quantizable) {
    std::vector<float> w = normal_values(name, rows * cols, std);
    if (quantizable && format_ == RandomWeightFormat::FP8) {
      fp8_blocks(name, rows, cols, w, Fp8Scales::F32Inverse);
    } else if (quantizable && format_ == RandomWeightFormat::Int4 &&
               name.find(".mlp.experts.") != std::string::npos) {
      int4(name, rows, cols, w);
    } else {
      bf16_tensor(name, {rows, cols}, w);
    }
  }

 private:
  // compressed-tensors' pack-quantized int4 as its minmax observer makes it: per group of 32,
  // scale = max |w| / 7.5 rounded to bf16 (the stored dtype), q = clamp(round(w / scale), -8, 7)
  // stored as q + 8, eight per int32 from the low bits up; `<module>.weight_shape` int64 [2].
  void int4(const std::string& name, int64_t rows, int64_t cols, const std::vector<float>& w) {
    const std::string module = name.substr(0, name.size() - std::string(".weight").size());
    const int64_t groups = (cols + kInt4Group - 1) / kInt4Group;
    TensorToWrite packed{module + ".weight_packed",
                         StorageType::I32,
                         {rows, cols / 8},
                         std::vector<uint8_t>(static_cast<size_t>(rows * cols / 2))};
    TensorToWrite scales{module + ".weight_scale",
                         StorageType::BF16,
                         {rows, groups},
                         std::vector<uint8_t>(static_cast<size_t>(rows * groups * 2))};
    auto* scale_out = reinterpret_cast<bf16*>(scales.bytes.data());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t begin = g * kInt4Group, end = std::min(cols, begin + kInt4Group);
        float largest = 0.0f;
        for (int64_t c = begin; c < end; ++c)
          largest = std::max(largest, std::fabs(w[static_cast<size_t>(r * cols + c)]));
        const bf16 scale = f32_to_bf16(largest > 0.0f ? largest / 7.5f : 1.0f);
        scale_out[r * groups + g] = scale;
        for (int64_t c = begin; c < end; ++c) {
          const float q =
              std::clamp(std::nearbyint(w[static_cast<size_t>(r * cols + c)] / bf16_to_f32(scale)),
                         -8.0f, 7.0f);
          uint8_t& byte = packed.bytes[static_cast<size_t>((r * cols + c) / 2)];
          byte = static_cast<uint8_t>(byte | static_cast<int>(q + 8.0f) << (4 * (c % 2)));
        }
      }
    }
    TensorToWrite shape{module + ".weight_shape", StorageType::I64, {2}, std::vector<uint8_t>(16)};
    const int64_t dims[2] = {rows, cols};
    std::memcpy(shape.bytes.data(), dims, 16);
    add(std::move(packed));
    add(std::move(scales));
    add(std::move(shape));
  }

  static constexpr int64_t kInt4Group = 32;
  RandomWeightFormat format_;
};

void write_mlp(Writer& w, const std::string& prefix, int64_t hidden, int64_t inter,
               double residual_scale) {
  w.matrix(prefix + "gate_proj.weight", inter, hidden, 1.0 / std::sqrt(hidden), true);
  w.matrix(prefix + "up_proj.weight", inter, hidden, 1.0 / std::sqrt(hidden), true);
  w.matrix(prefix + "down_proj.weight", hidden, inter, residual_scale / std::sqrt(inter), true);
}

// DeepSeek-V3.2's lightning indexer, stored as its release stores it: wq_b and wk quantizable
// (FP8 in an FP8 model), weights_proj in bf16, the key's LayerNorm in float32 (a scale near 1
// and a small bias, so that both matter).
void write_indexer(Writer& w, const ModelConfig& c, const std::string& p) {
  const int64_t H = c.hidden_size, Hi = c.index_n_heads, Di = c.index_head_dim;
  w.matrix(p + "wq_b.weight", Hi * Di, c.q_lora_rank, 1.0 / std::sqrt(c.q_lora_rank), true);
  w.matrix(p + "wk.weight", Di, H, 1.0 / std::sqrt(H), true);
  std::vector<float> scale = w.normal_values(p + "k_norm.weight", Di, 0.1);
  for (float& v : scale) v += 1.0f;
  w.f32_vector(p + "k_norm.weight", std::move(scale));
  w.f32_vector(p + "k_norm.bias", w.normal_values(p + "k_norm.bias", Di, 0.1));
  w.matrix(p + "weights_proj.weight", Hi, H, 1.0 / std::sqrt(H), false);
}

void write_layer(Writer& w, const ModelConfig& c, int64_t i) {
  const std::string p = fmt::format("model.layers.{}.", i), a = p + "self_attn.";
  const int64_t H = c.hidden_size, heads = c.num_attention_heads;
  const double residual_scale = 1.0 / std::sqrt(2.0 * c.num_hidden_layers);
  w.ones(p + "input_layernorm.weight", H);
  w.ones(p + "post_attention_layernorm.weight", H);
  if (c.q_lora_rank > 0) {
    w.matrix(a + "q_a_proj.weight", c.q_lora_rank, H, 1.0 / std::sqrt(H), true);
    w.ones(a + "q_a_layernorm.weight", c.q_lora_rank);
    w.matrix(a + "q_b_proj.weight", heads * c.qk_head_dim(), c.q_lora_rank,
             1.0 / std::sqrt(c.q_lora_rank), true);
  } else {
    w.matrix(a + "q_proj.weight", heads * c.qk_head_dim(), H, 1.0 / std::sqrt(H), true);
  }
  w.matrix(a + "kv_a_proj_with_mqa.weight", c.kv_cache_dim(), H, 1.0 / std::sqrt(H), true);
  w.ones(a + "kv_a_layernorm.weight", c.kv_lora_rank);
  w.matrix(a + "kv_b_proj.weight", heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank,
           1.0 / std::sqrt(c.kv_lora_rank), true);
  w.matrix(a + "o_proj.weight", H, heads * c.v_head_dim,
           residual_scale / std::sqrt(heads * c.v_head_dim), true);
  if (c.has_indexer()) write_indexer(w, c, a + "indexer.");
  if (!c.is_moe_layer(i)) {
    write_mlp(w, p + "mlp.", H, c.intermediate_size, residual_scale);
    return;
  }
  // Router logits of O(1) spread so expert choice is well separated; small bias as V3 learns.
  w.matrix(p + "mlp.gate.weight", c.n_routed_experts, H, 1.0 / std::sqrt(H), false);
  if (c.router.method == kernels::RouterTopk::NoauxTc) {
    std::vector<float> bias =
        w.normal_values(p + "mlp.gate.e_score_correction_bias", c.n_routed_experts, 0.05);
    w.f32_vector(p + "mlp.gate.e_score_correction_bias", std::move(bias));
  }
  for (int64_t e = 0; e < c.n_routed_experts; ++e) {
    write_mlp(w, fmt::format("{}mlp.experts.{}.", p, e), H, c.moe_intermediate_size,
              residual_scale);
  }
  if (c.n_shared_experts > 0) {
    write_mlp(w, p + "mlp.shared_experts.", H, c.moe_intermediate_size * c.n_shared_experts,
              residual_scale);
  }
}

// DeepSeek-V3's MTP module as layer L = num_hidden_layers (random like the rest: its drafts
// are rarely accepted, but a verify step costs what it costs with a trained one).
void write_mtp_layer(Writer& w, const ModelConfig& c) {
  const int64_t L = c.num_hidden_layers, H = c.hidden_size, V = c.vocab_size;
  const std::string p = fmt::format("model.layers.{}.", L);
  w.ones(p + "enorm.weight", H);
  w.ones(p + "hnorm.weight", H);
  w.matrix(p + "eh_proj.weight", H, 2 * H, 1.0 / std::sqrt(2 * H), true);
  write_layer(w, c, L);
  w.ones(p + "shared_head.norm.weight", H);
  w.matrix(p + "shared_head.head.weight", V, H, 1.0 / std::sqrt(H), false);
  w.matrix(p + "embed_tokens.weight", V, H, 1.0, false);
}

}  // namespace

void write_random_model(const nlohmann::json& config, const std::filesystem::path& out_dir,
                        uint64_t seed, RandomWeightFormat format) {
  nlohmann::json cfg_json = config;
  if (format == RandomWeightFormat::FP8) {
    cfg_json["quantization_config"] = {{"activation_scheme", "dynamic"},
                                       {"fmt", "e4m3"},
                                       {"quant_method", "fp8"},
                                       {"weight_block_size", {128, 128}}};
  }
  if (format == RandomWeightFormat::Int4) {
    // Kimi-K2-Thinking's quantization_config: every Linear but those `ignore` names.
    const nlohmann::json weights = {{"num_bits", 4},
                                    {"type", "int"},
                                    {"symmetric", true},
                                    {"strategy", "group"},
                                    {"group_size", 32},
                                    {"dynamic", false},
                                    {"actorder", nullptr},
                                    {"observer", "minmax"},
                                    {"observer_kwargs", nlohmann::json::object()},
                                    {"block_structure", nullptr}};
    cfg_json["quantization_config"] = {{"quant_method", "compressed-tensors"},
                                       {"format", "pack-quantized"},
                                       {"quantization_status", "compressed"},
                                       {"kv_cache_scheme", nullptr},
                                       {"config_groups",
                                        {{"group_0",
                                          {{"targets", {"Linear"}},
                                           {"input_activations", nullptr},
                                           {"output_activations", nullptr},
                                           {"weights", weights}}}}},
                                       {"ignore",
                                        {"lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
                                         "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"}}};
  }
  cfg_json["torch_dtype"] = "bfloat16";
  const ModelConfig c = ModelConfig::from_json(cfg_json, "make-model --config");

  Writer w(seed, format);
  w.matrix("model.embed_tokens.weight", c.vocab_size, c.hidden_size, 1.0, false);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) write_layer(w, c, i);
  if (c.num_nextn_predict_layers > 0) write_mtp_layer(w, c);
  w.ones("model.norm.weight", c.hidden_size);
  if (!c.tie_word_embeddings) {
    w.matrix("lm_head.weight", c.vocab_size, c.hidden_size, 1.0 / std::sqrt(c.hidden_size), false);
  }

  std::filesystem::create_directories(out_dir);
  write_safetensors(out_dir / "model.safetensors", w.tensors());
  std::ofstream(out_dir / "config.json") << cfg_json.dump(2) << "\n";
}

}  // namespace mlaserve::model
