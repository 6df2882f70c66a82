#include "models/deepseek_v4/footprint.h"

#include <algorithm>

#include "core/error.h"

namespace mlaserve::models::deepseek_v4 {

namespace {

using kernels::WeightType;
using model::StorageType;
using model::WeightKind;

// The bytes of weights as the loader holds them (WeightLoader, kernels::Weight::bytes()).
class Counter {
 public:
  Counter(const V4Config& c, const model::WeightFormat& f) : c_(c), f_(f) {}

  // Rows [first_row, first_row + rows) of a [*, cols] linear weight stored as `stored`.
  void linear(int64_t rows, int64_t cols, StorageType stored, int64_t first_row = 0,
              WeightKind kind = WeightKind::QkvA) {
    const WeightType held = model::stored_weight_type(f_, kind, c_.fp8_block_quantized, stored);
    switch (held) {
      case WeightType::F32:
      case WeightType::BF16:
        bytes_ += rows * cols * (held == WeightType::F32 ? 4 : 2);
        return;
      case WeightType::MXFP4:  // codes, a float scale per 32, each row's index into them
        bytes_ += rows * cols / 2 + rows * (cols / 32) * 4 + rows * 4;
        return;
      case WeightType::FP8: {  // codes, 128x128 block scales, each row's index into them
        const int64_t block_rows = (first_row + rows - 1) / 128 - first_row / 128 + 1;
        bytes_ += rows * cols + block_rows * ((cols + 127) / 128) * 4 + rows * 4;
        return;
      }
      case WeightType::INT8:
      case WeightType::INT4:
        break;
    }
    fail("internal: DeepSeek-V4's footprint does not model {} weights",
         kernels::weight_type_name(held));
  }
  void f32(int64_t n) { bytes_ += n * 4; }
  int64_t bytes() const { return bytes_; }

 private:
  const V4Config& c_;
  const model::WeightFormat& f_;
  int64_t bytes_ = 0;
};

// How the checkpoint stores the linear weights (FP8 blocks, or bf16) and the routed experts.
StorageType linear_storage(const V4Config& c) {
  return c.fp8_block_quantized ? StorageType::F8_E4M3 : StorageType::BF16;
}
StorageType expert_storage(const V4Config& c) {
  return c.fp4_experts ? StorageType::I8 : linear_storage(c);
}

void compressor(Counter& n, const V4Config& c, int64_t ratio, int64_t dim) {
  const int64_t width = (ratio == 4 ? 2 : 1) * dim;
  n.linear(width, c.hidden_size, StorageType::BF16);  // wkv
  n.linear(width, c.hidden_size, StorageType::BF16);  // wgate
  n.f32(ratio * width + dim);                         // ape, norm
}

void attention(Counter& n, const V4Config& c, int64_t layer) {
  const int64_t H = c.hidden_size, nh = c.num_attention_heads, d = c.head_dim;
  const StorageType linear = linear_storage(c);
  n.linear(c.q_lora_rank, H, linear);
  n.linear(nh * d, c.q_lora_rank, linear);
  n.linear(d, H, linear);
  n.f32(c.q_lora_rank + d + nh);  // q_norm, kv_norm, sinks
  for (int64_t g = 0; g < c.o_groups; ++g)
    n.linear(c.o_lora_rank, nh * d / c.o_groups, linear, g * c.o_lora_rank);
  n.linear(H, c.o_groups * c.o_lora_rank, linear);
  const int64_t ratio = c.compress_ratio(layer);
  if (ratio > 0) compressor(n, c, ratio, d);
  if (ratio != 4) return;
  n.linear(c.index_n_heads * c.index_head_dim, c.q_lora_rank, linear);
  n.linear(c.index_n_heads, H, StorageType::BF16);  // weights_proj
  compressor(n, c, ratio, c.index_head_dim);
}

// One expert's w1, w3 [I, H] and w2 [H, I].
void expert(Counter& n, const V4Config& c, StorageType stored) {
  const int64_t H = c.hidden_size, I = c.moe_intermediate_size;
  n.linear(I, H, stored);
  n.linear(I, H, stored);
  n.linear(H, I, stored);
}

void moe(Counter& n, const V4Config& c, int64_t layer) {
  n.f32(c.n_routed_experts * c.hidden_size);  // the router, float32
  if (!c.hash_routed(layer)) n.f32(c.n_routed_experts);
  for (int64_t e = 0; e < c.n_routed_experts; ++e) expert(n, c, expert_storage(c));
  if (c.n_shared_experts > 0) expert(n, c, linear_storage(c));
}

}  // namespace

int64_t weight_value_bytes(const V4Config& c, const model::WeightFormat& format) {
  Counter n(c, format);
  const int64_t H = c.hidden_size, hc = c.hc_mult;
  n.linear(c.vocab_size, H, StorageType::BF16, 0, WeightKind::Embedding);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    n.f32(2 * H);                                                           // attn_norm, ffn_norm
    for (int k = 0; k < 2; ++k) n.f32(c.hc_mix_size() * (hc * H + 1) + 3);  // hc_attn, hc_ffn
    attention(n, c, l);
    moe(n, c, l);
    // tid2eid is held as int32 ids
    if (c.hash_routed(l)) n.f32(c.vocab_size * c.router.top_k);
  }
  n.f32(hc * (hc * H + 1) + 1);  // hc_head
  n.f32(H);                      // norm
  n.linear(c.vocab_size, H, StorageType::BF16, 0, WeightKind::LmHead);
  return n.bytes();
}

int64_t decode_bytes_per_token(const V4Config& c, const model::WeightFormat& format) {
  Counter one_expert(c, format), embedding(c, format);
  expert(one_expert, c, expert_storage(c));
  embedding.linear(c.vocab_size - 1, c.hidden_size, StorageType::BF16, 0, WeightKind::Embedding);
  const int64_t unchosen = c.num_hidden_layers * (c.n_routed_experts - c.router.top_k);
  return weight_value_bytes(c, format) - unchosen * one_expert.bytes() - embedding.bytes();
}

}  // namespace mlaserve::models::deepseek_v4
