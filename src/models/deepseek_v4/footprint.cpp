#include "models/deepseek_v4/footprint.h"

#include <algorithm>

namespace mlaserve::models::deepseek_v4 {

namespace {

using kernels::WeightType;

// How a tensor is stored in the checkpoint, which decides how it is held (as the loader does).
enum class Stored { Dense, Fp8, Fp4 };

class Counter {
 public:
  Counter(const V4Config& c, const model::WeightFormat& f) : c_(c), f_(f) {}

  // Rows [first_row, first_row + rows) of a [*, cols] linear weight.
  void linear(int64_t rows, int64_t cols, Stored stored, int64_t first_row = 0) {
    const WeightType held = held_type(stored);
    if (held == WeightType::F32 || held == WeightType::BF16) {
      bytes_ += rows * cols * (held == WeightType::F32 ? 4 : 2);
      return;
    }
    bytes_ += rows * 4;  // each row's index into the scales
    if (held == WeightType::MXFP4) {
      bytes_ += rows * cols / 2 + rows * (cols / 32) * 4;
      return;
    }
    const int64_t block_rows = (first_row + rows - 1) / 128 - first_row / 128 + 1;
    bytes_ += rows * cols + block_rows * ((cols + 127) / 128) * 4;  // FP8: 128x128 blocks
  }
  void f32(int64_t n) { bytes_ += n * 4; }
  void norm(int64_t n) { f32(n); }
  int64_t bytes() const { return bytes_; }

 private:
  WeightType held_type(Stored stored) const {
    if (stored == Stored::Dense || f_.quantization != model::Quantization::Fp8) return f_.dtype;
    return stored == Stored::Fp4 ? WeightType::MXFP4 : WeightType::FP8;
  }

  const V4Config& c_;
  const model::WeightFormat& f_;
  int64_t bytes_ = 0;
};

void compressor(Counter& n, const V4Config& c, int64_t ratio, int64_t dim) {
  const int64_t width = (ratio == 4 ? 2 : 1) * dim;
  n.linear(width, c.hidden_size, Stored::Dense);
  n.linear(width, c.hidden_size, Stored::Dense);
  n.f32(ratio * width);  // ape
  n.norm(dim);
}

void attention(Counter& n, const V4Config& c, int64_t layer) {
  const int64_t H = c.hidden_size, nh = c.num_attention_heads, d = c.head_dim;
  const Stored linear = c.fp8_block_quantized ? Stored::Fp8 : Stored::Dense;
  n.linear(c.q_lora_rank, H, linear);
  n.norm(c.q_lora_rank);
  n.linear(nh * d, c.q_lora_rank, linear);
  n.linear(d, H, linear);
  n.norm(d);
  n.f32(nh);  // sinks
  for (int64_t g = 0; g < c.o_groups; ++g)
    n.linear(c.o_lora_rank, nh * d / c.o_groups, linear, g * c.o_lora_rank);
  n.linear(H, c.o_groups * c.o_lora_rank, linear);
  const int64_t ratio = c.compress_ratio(layer);
  if (ratio > 0) compressor(n, c, ratio, d);
  if (ratio != 4) return;
  n.linear(c.index_n_heads * c.index_head_dim, c.q_lora_rank, linear);
  n.linear(c.index_n_heads, H, Stored::Dense);
  compressor(n, c, ratio, c.index_head_dim);
}

void routed_expert(Counter& n, const V4Config& c) {
  const int64_t H = c.hidden_size, I = c.moe_intermediate_size;
  const Stored experts = c.fp4_experts           ? Stored::Fp4
                         : c.fp8_block_quantized ? Stored::Fp8
                                                 : Stored::Dense;
  n.linear(I, H, experts);
  n.linear(I, H, experts);
  n.linear(H, I, experts);
}

void moe(Counter& n, const V4Config& c, int64_t layer) {
  const int64_t H = c.hidden_size, I = c.moe_intermediate_size;
  n.f32(c.n_routed_experts * H);  // the router, float32
  if (!c.hash_routed(layer)) n.f32(c.n_routed_experts);
  const Stored linear = c.fp8_block_quantized ? Stored::Fp8 : Stored::Dense;
  for (int64_t e = 0; e < c.n_routed_experts; ++e) routed_expert(n, c);
  if (c.n_shared_experts == 0) return;
  n.linear(I, H, linear);
  n.linear(I, H, linear);
  n.linear(H, I, linear);
}

}  // namespace

int64_t weight_value_bytes(const V4Config& c, const model::WeightFormat& format) {
  Counter n(c, format);
  const int64_t H = c.hidden_size, hc = c.hc_mult;
  n.linear(c.vocab_size, H, Stored::Dense);  // embedding
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    n.norm(H);
    n.norm(H);
    for (int k = 0; k < 2; ++k) n.f32(c.hc_mix_size() * (hc * H + 1) + 3);  // hc_attn, hc_ffn
    attention(n, c, l);
    moe(n, c, l);
    // tid2eid is held as int32 ids
    if (c.hash_routed(l)) n.f32(c.vocab_size * c.router.top_k);
  }
  n.f32(hc * (hc * H + 1) + 1);  // hc_head
  n.norm(H);
  n.linear(c.vocab_size, H, Stored::Dense);  // head
  return n.bytes();
}

int64_t decode_bytes_per_token(const V4Config& c, const model::WeightFormat& format) {
  Counter expert(c, format), embedding(c, format);
  routed_expert(expert, c);
  embedding.linear(c.vocab_size - 1, c.hidden_size, Stored::Dense);
  const int64_t unchosen = c.num_hidden_layers * (c.n_routed_experts - c.router.top_k);
  return weight_value_bytes(c, format) - unchosen * expert.bytes() - embedding.bytes();
}

}  // namespace mlaserve::models::deepseek_v4
