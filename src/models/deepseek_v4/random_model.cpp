#include "models/deepseek_v4/random_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <numeric>

#include "core/error.h"
#include "model/random_tensors.h"
#include "model/weight_loader.h"
#include "models/deepseek_v4/config.h"

namespace mlaserve::models::deepseek_v4 {

namespace {

using model::RandomTensors;
using model::StorageType;
using model::TensorToWrite;

class Writer : public RandomTensors {
 public:
  Writer(uint64_t seed, const V4Config& c) : RandomTensors(seed), c_(c) {}

  // A linear layer's [rows, cols] weight of N(0, std²) values: FP8 (E8M0 block scales) in an
  // FP8 model, else bf16.
  void linear(const std::string& name, int64_t rows, int64_t cols, double std) {
    const std::vector<float> w = normal_values(name, rows * cols, std);
    if (c_.fp8_block_quantized) return fp8_blocks(name, rows, cols, w, Fp8Scales::E8M0);
    bf16_tensor(name, {rows, cols}, w);
  }
  void dense(const std::string& name, int64_t rows, int64_t cols, double std) {
    bf16_tensor(name, {rows, cols}, normal_values(name, rows * cols, std));
  }
  // A routed expert's weight: FP4 e2m1 codes two per I8 byte and an E8M0 scale per 32 values.
  void expert_linear(const std::string& name, int64_t rows, int64_t cols, double std) {
    if (!c_.fp4_experts) return linear(name, rows, cols, std);
    const std::vector<float> w = normal_values(name, rows * cols, std);
    const int64_t groups = cols / 32;
    TensorToWrite codes{name,
                        StorageType::I8,
                        {rows, cols / 2},
                        std::vector<uint8_t>(static_cast<size_t>(rows * cols / 2))};
    TensorToWrite scales{model::module_name(name) + ".scale",
                         StorageType::F8_E8M0,
                         {rows, groups},
                         std::vector<uint8_t>(static_cast<size_t>(rows * groups))};
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t g = 0; g < groups; ++g) {
        const float* v = w.data() + r * cols + g * 32;
        float scale = model::four_bit_group_scale(kernels::WeightType::MXFP4, v, 32);
        if (scale == 0.0f) scale = 1.0f;
        scales.bytes[static_cast<size_t>(r * groups + g)] = f32_to_e8m0(scale);
        for (int64_t k = 0; k < 32; ++k) {
          const int64_t col = g * 32 + k;
          const uint8_t code = model::four_bit_code(kernels::WeightType::MXFP4, v[k], scale);
          codes.bytes[static_cast<size_t>((r * cols + col) / 2)] |=
              static_cast<uint8_t>(code << (4 * (col % 2)));
        }
      }
    }
    add(std::move(codes));
    add(std::move(scales));
  }
  // A norm's weight near 1 (so that it matters).
  void norm(const std::string& name, int64_t n) {
    std::vector<float> v = normal_values(name, n, 0.1);
    for (float& x : v) x += 1.0f;
    bf16_tensor(name, {n}, v);
  }
  void f32(const std::string& name, std::vector<int64_t> shape, double std, float mean = 0.0f) {
    const int64_t n = std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
    std::vector<float> v = normal_values(name, n, std);
    for (float& x : v) x += mean;
    f32_tensor(name, std::move(shape), v);
  }

 private:
  const V4Config& c_;
};

void write_hc(Writer& w, const std::string& p, int64_t mixes, int64_t scales, const V4Config& c) {
  w.f32(p + "_fn", {mixes, c.hc_mult * c.hidden_size}, 0.02);
  w.f32(p + "_base", {mixes}, 0.5);
  w.f32(p + "_scale", {scales}, 0.1, 1.0f);
}

void write_compressor(Writer& w, const std::string& p, int64_t ratio, int64_t dim,
                      const V4Config& c) {
  const int64_t width = (ratio == 4 ? 2 : 1) * dim, H = c.hidden_size;
  w.dense(p + "wkv.weight", width, H, 1.0 / std::sqrt(H));
  w.dense(p + "wgate.weight", width, H, 1.0 / std::sqrt(H));
  w.f32(p + "ape", {ratio, width}, 0.5);
  w.norm(p + "norm.weight", dim);
}

void write_attention(Writer& w, const std::string& p, int64_t layer, const V4Config& c) {
  const int64_t H = c.hidden_size, nh = c.num_attention_heads, d = c.head_dim;
  const int64_t group_in = nh * d / c.o_groups, z = c.o_groups * c.o_lora_rank;
  const double residual_scale = 1.0 / std::sqrt(2.0 * c.num_hidden_layers);
  w.linear(p + "wq_a.weight", c.q_lora_rank, H, 1.0 / std::sqrt(H));
  w.norm(p + "q_norm.weight", c.q_lora_rank);
  w.linear(p + "wq_b.weight", nh * d, c.q_lora_rank, 1.0 / std::sqrt(c.q_lora_rank));
  w.linear(p + "wkv.weight", d, H, 1.0 / std::sqrt(H));
  w.norm(p + "kv_norm.weight", d);
  w.f32(p + "attn_sink", {nh}, 1.0);
  w.linear(p + "wo_a.weight", z, group_in, 1.0 / std::sqrt(group_in));
  w.linear(p + "wo_b.weight", H, z, residual_scale / std::sqrt(z));
  const int64_t ratio = c.compress_ratio(layer);
  if (ratio == 0) return;
  write_compressor(w, p + "compressor.", ratio, d, c);
  if (ratio != 4) return;
  const std::string ip = p + "indexer.";
  w.linear(ip + "wq_b.weight", c.index_n_heads * c.index_head_dim, c.q_lora_rank,
           1.0 / std::sqrt(c.q_lora_rank));
  w.dense(ip + "weights_proj.weight", c.index_n_heads, H, 1.0 / std::sqrt(H));
  write_compressor(w, ip + "compressor.", ratio, c.index_head_dim, c);
}

// tid2eid: top_k distinct experts per token id, I64 as released.
void write_hash_table(Writer& w, const std::string& name, const V4Config& c) {
  const int64_t k = c.router.top_k, E = c.n_routed_experts;
  model::Random rng{model::hash_name(name, 7)};
  std::vector<int64_t> ids(static_cast<size_t>(c.vocab_size * k));
  std::vector<int64_t> experts(static_cast<size_t>(E));
  for (int64_t t = 0; t < c.vocab_size; ++t) {
    std::iota(experts.begin(), experts.end(), 0);
    for (int64_t i = 0; i < k; ++i) {  // a partial Fisher-Yates shuffle
      const auto j = i + static_cast<int64_t>(rng.next() % static_cast<uint64_t>(E - i));
      std::swap(experts[static_cast<size_t>(i)], experts[static_cast<size_t>(j)]);
      ids[static_cast<size_t>(t * k + i)] = experts[static_cast<size_t>(i)];
    }
  }
  TensorToWrite t{name, StorageType::I64, {c.vocab_size, k}, std::vector<uint8_t>(ids.size() * 8)};
  std::memcpy(t.bytes.data(), ids.data(), t.bytes.size());
  w.add(std::move(t));
}

void write_moe(Writer& w, const std::string& p, int64_t layer, const V4Config& c) {
  const int64_t H = c.hidden_size, I = c.moe_intermediate_size;
  const double residual_scale = 1.0 / std::sqrt(2.0 * c.num_hidden_layers);
  w.dense(p + "gate.weight", c.n_routed_experts, H, 1.0 / std::sqrt(H));
  if (c.hash_routed(layer)) {
    write_hash_table(w, p + "gate.tid2eid", c);
  } else {
    w.f32(p + "gate.bias", {c.n_routed_experts}, 0.05);
  }
  for (int64_t e = 0; e < c.n_routed_experts; ++e) {
    const std::string ep = fmt::format("{}experts.{}.", p, e);
    w.expert_linear(ep + "w1.weight", I, H, 1.0 / std::sqrt(H));
    w.expert_linear(ep + "w3.weight", I, H, 1.0 / std::sqrt(H));
    w.expert_linear(ep + "w2.weight", H, I, residual_scale / std::sqrt(I));
  }
  if (c.n_shared_experts == 0) return;
  w.linear(p + "shared_experts.w1.weight", I, H, 1.0 / std::sqrt(H));
  w.linear(p + "shared_experts.w3.weight", I, H, 1.0 / std::sqrt(H));
  w.linear(p + "shared_experts.w2.weight", H, I, residual_scale / std::sqrt(I));
}

// Layer i's tensors, named p + ... (layers.i., or mtp.0. for the MTP block's layer).
void write_layer(Writer& w, const std::string& p, int64_t i, const V4Config& c) {
  w.norm(p + "attn_norm.weight", c.hidden_size);
  w.norm(p + "ffn_norm.weight", c.hidden_size);
  write_hc(w, p + "hc_attn", c.hc_mix_size(), 3, c);
  write_hc(w, p + "hc_ffn", c.hc_mix_size(), 3, c);
  write_attention(w, p + "attn.", i, c);
  write_moe(w, p + "ffn.", i, c);
}

// The MTP block mtp.0 as DeepSeek releases it (the embedding and head are the model's).
void write_mtp(Writer& w, const V4Config& c) {
  const std::string p = "mtp.0.";
  const int64_t H = c.hidden_size;
  for (const char* norm : {"enorm", "hnorm", "norm"}) w.norm(p + norm + ".weight", H);
  w.linear(p + "e_proj.weight", H, H, 1.0 / std::sqrt(H));
  w.linear(p + "h_proj.weight", H, H, 1.0 / std::sqrt(H));
  write_layer(w, p, c.mtp_layer(), c);
  write_hc(w, p + "hc_head", c.hc_mult, 1, c);
}

}  // namespace

void write_random_model(const nlohmann::json& config, const std::filesystem::path& out_dir,
                        uint64_t seed) {
  const V4Config c = V4Config::from_json(config, "make-model --config");
  Writer w(seed, c);
  w.dense("embed.weight", c.vocab_size, c.hidden_size, 1.0);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    write_layer(w, fmt::format("layers.{}.", i), i, c);
  write_hc(w, "hc_head", c.hc_mult, 1, c);
  w.norm("norm.weight", c.hidden_size);
  w.dense("head.weight", c.vocab_size, c.hidden_size, 1.0 / std::sqrt(c.hidden_size));
  if (c.num_nextn_predict_layers > 0) write_mtp(w, c);
  std::filesystem::create_directories(out_dir);
  model::write_safetensors(out_dir / "model.safetensors", w.tensors());
  nlohmann::json out = config;
  out["torch_dtype"] = "bfloat16";
  std::ofstream(out_dir / "config.json") << out.dump(2) << "\n";
}

}  // namespace mlaserve::models::deepseek_v4
