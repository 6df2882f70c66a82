#include "models/deepseek_v4/footprint.h"

#include <algorithm>

#include "core/error.h"
#include "models/deepseek_v4/kv_store.h"
#include "models/deepseek_v4/sharding.h"

namespace mlaserve::models::deepseek_v4 {

namespace {

using kernels::WeightType;
using model::StorageType;
using model::WeightKind;

// The bytes of one rank's weights as the loader holds them (WeightLoader,
// kernels::Weight::bytes()), each split tensor's block taken as the loader takes it (sharding.h).
class Counter {
 public:
  Counter(const V4Config& c, const model::WeightFormat& f, const model::RankLayout& layout)
      : c_(c), f_(f), layout_(layout) {}

  // A whole [rows, cols] linear weight stored as `stored`.
  void linear(int64_t rows, int64_t cols, StorageType stored, WeightKind kind = WeightKind::QkvA) {
    block({0, rows, 0, cols}, stored, kind);
  }
  // This rank's block of t.
  void split(const model::SplitTensor& t, StorageType stored) {
    block(model::owned_block(layout_, t), stored, t.kind);
  }
  // Block b of a linear weight stored as `stored`.
  void block(const model::Block& b, StorageType stored, WeightKind kind) {
    const WeightType held = model::stored_weight_type(f_, kind, c_.fp8_block_quantized, stored);
    const int64_t rows = b.rows, cols = b.cols;
    switch (held) {
      case WeightType::F32:
      case WeightType::BF16:
        bytes_ += rows * cols * (held == WeightType::F32 ? 4 : 2);
        return;
      case WeightType::MXFP4:  // codes, an E8M0 byte per 32, each row's index into them
        bytes_ += rows * cols / 2 + rows * (cols / 32) + rows * 4;
        return;
      case WeightType::FP8: {  // codes, 128x128 block scales, each row's index into them
        const int64_t block_rows = (b.row_begin + rows - 1) / 128 - b.row_begin / 128 + 1;
        const int64_t block_cols = (cols + b.col_begin % 128 + 127) / 128;
        bytes_ += rows * cols + block_rows * block_cols * 4 + rows * 4;
        return;
      }
      case WeightType::INT8:  // codes, a float scale per row, each row's index into them
        bytes_ += rows * cols + rows * 4 + rows * 4;
        return;
      case WeightType::INT4: {  // codes, a float scale per group, each row's index into them
        const int64_t groups = (cols + f_.group_size - 1) / f_.group_size;
        bytes_ += rows * cols / 2 + rows * groups * 4 + rows * 4;
        return;
      }
    }
  }
  void f32(int64_t n) { bytes_ += n * 4; }
  int64_t bytes() const { return bytes_; }
  const V4Shards& shards() const { return shards_; }
  // Of bytes(): the routed experts (a decode step reads those its tokens pick) and the embedding
  // (a row per token).
  int64_t routed_bytes = 0, embedding_bytes = 0;

 private:
  const V4Config& c_;
  const model::WeightFormat& f_;
  const model::RankLayout& layout_;
  V4Shards shards_ = deepseek_v4::shards(c_, layout_);
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
  const model::Range groups = n.shards().o_groups;
  n.linear(c.q_lora_rank, H, linear);
  n.split(query_up(c, "wq_b"), linear);
  n.linear(d, H, linear);
  n.f32(c.q_lora_rank + d + n.shards().heads().size());  // q_norm, kv_norm, sinks
  for (int64_t g = groups.begin; g < groups.end; ++g)
    n.block({g * c.o_lora_rank, c.o_lora_rank, 0, nh * d / c.o_groups}, linear, WeightKind::O);
  n.split(output_down(c, "wo_b"), linear);
  const int64_t ratio = c.compress_ratio(layer);
  if (ratio > 0) compressor(n, c, ratio, d);
  if (ratio != 4) return;
  n.linear(c.index_n_heads * c.index_head_dim, c.q_lora_rank, linear);
  n.linear(c.index_n_heads, H, StorageType::BF16);  // weights_proj
  compressor(n, c, ratio, c.index_head_dim);
}

// One expert's w1, w3 [I, H] and w2 [H, I] as this rank holds them.
void expert(Counter& n, const V4Config& c, StorageType stored, bool routed) {
  const int64_t before = n.bytes();
  n.split(expert_up(c, "w1", routed), stored);
  n.split(expert_up(c, "w3", routed), stored);
  n.split(expert_down(c, "w2", routed), stored);
  if (routed) n.routed_bytes += n.bytes() - before;
}

void moe(Counter& n, const V4Config& c, int64_t layer) {
  n.f32(c.n_routed_experts * c.hidden_size);  // the router, float32
  if (!c.hash_routed(layer)) n.f32(c.n_routed_experts);
  for (int64_t e = 0; e < n.shards().experts.size(); ++e) expert(n, c, expert_storage(c), true);
  if (c.n_shared_experts > 0) expert(n, c, linear_storage(c), false);
}

void layer(Counter& n, const V4Config& c, int64_t l) {
  const int64_t H = c.hidden_size, hc = c.hc_mult;
  n.f32(2 * H);                                                           // attn_norm, ffn_norm
  for (int k = 0; k < 2; ++k) n.f32(c.hc_mix_size() * (hc * H + 1) + 3);  // hc_attn, hc_ffn
  attention(n, c, l);
  moe(n, c, l);
  // tid2eid is held as int32 ids
  if (c.hash_routed(l)) n.f32(c.vocab_size * c.router.top_k);
}

// Every weight of the rank at `layout`, in the loader's order.
Counter count_weights(const V4Config& c, const model::WeightFormat& format,
                      const model::RankLayout& layout, bool with_mtp) {
  Counter n(c, format, layout);
  const int64_t H = c.hidden_size, hc = c.hc_mult;
  n.split(vocab_rows(c, "embed", WeightKind::Embedding), StorageType::BF16);
  n.embedding_bytes = n.bytes();
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) layer(n, c, l);
  n.f32(hc * (hc * H + 1) + 1);  // hc_head
  n.f32(H);                      // norm
  n.split(vocab_rows(c, "head", WeightKind::LmHead), StorageType::BF16);
  if (!with_mtp) return n;
  n.f32(3 * H);                                                   // enorm, hnorm, norm
  for (int k = 0; k < 2; ++k) n.linear(H, H, linear_storage(c));  // e_proj, h_proj
  layer(n, c, c.mtp_layer());
  n.f32(hc * (hc * H + 1) + 1);  // its hc_head
  return n;
}

}  // namespace

int64_t weight_value_bytes(const V4Config& c, const model::WeightFormat& format,
                           const model::RankLayout& layout, bool with_mtp) {
  return count_weights(c, format, layout, with_mtp).bytes();
}

model::ModelSizing sizing(const V4Config& c, const model::WeightFormat& format, KvDtype kv_dtype,
                          bool with_mtp) {
  model::ModelSizing s;
  s.model_type = "deepseek_v4";
  s.layers = c.num_hidden_layers;
  s.hidden_size = c.hidden_size;
  s.vocab_size = c.vocab_size;
  s.routed_experts = c.n_routed_experts;
  s.experts_per_token = c.router.top_k;
  const V4KvCapacity kv = kv_capacity(c, kv_dtype, 0, 0, with_mtp);
  s.kv_bytes_per_token = kv.bytes_per_token;
  // Each running request's window and compressor state, and a prefix snapshot of the same size
  // (serve reserves one per request the group may run, unless --disable-radix-cache).
  s.kv_bytes_per_request = 2 * kv.bytes_per_sequence;
  s.check_layout = [c](const model::RankLayout& layout) { check_layout(c, layout); };
  s.rank = [c, format, with_mtp](const model::RankLayout& layout) {
    const Counter n = count_weights(c, format, layout, with_mtp);
    // The kernels' packed copies of the bf16 compressor weights are left out (under 1 % of
    // V4-Flash's bytes).
    return model::RankSizing{n.bytes(), n.bytes(), n.bytes() - n.routed_bytes - n.embedding_bytes,
                             n.routed_bytes};
  };
  return s;
}

}  // namespace mlaserve::models::deepseek_v4
