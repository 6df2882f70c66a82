#include "models/deepseek_v4/load.h"

#include <fmt/format.h>

#include <cstring>

#include "core/error.h"
#include "models/deepseek_v4/sharding.h"

namespace mlaserve::models::deepseek_v4 {

using kernels::Weight;
using model::WeightKind;

namespace {

class Reader {
 public:
  Reader(const model::Checkpoint& ckpt, const model::WeightFormat& format, const V4Config& cfg,
         const model::RankLayout& layout)
      : ckpt_(ckpt),
        loader_(ckpt, format, cfg.fp8_block_quantized),
        cfg_(cfg),
        layout_(layout),
        shards_(deepseek_v4::shards(cfg, layout)) {}

  const V4Shards& shards() const { return shards_; }

  // A linear layer's [rows, cols] weight, rows [row_begin, row_begin + n) of it when n > 0.
  Weight linear(const std::string& name, int64_t rows, int64_t cols, WeightKind kind,
                int64_t row_begin = 0, int64_t n = 0) const {
    return prepared(block(name, rows, cols, kind, row_begin, n));
  }
  // This rank's block of t (sharding.h); keep_rows as prepared().
  Weight split(const model::SplitTensor& t, bool keep_rows = false) const {
    const model::Block b = model::owned_block(layout_, t);
    Weight w = loader_.new_weight(t.name, b.rows, b.cols, t.kind);
    loader_.copy_block(t.name, t.rows, t.cols, b, w, 0);
    return prepared(std::move(w), keep_rows);
  }
  size_t value_bytes() const { return value_bytes_; }
  size_t resident_bytes() const { return resident_bytes_; }

  // Float32 parameters: norms, biases, hyper-connection and sink parameters, ape.
  std::vector<float> values(const std::string& name, int64_t n) const {
    return values(name, n, {0, n});
  }
  // Its values [keep.begin, keep.end) (a split vector: the sinks of this rank's heads).
  std::vector<float> values(const std::string& name, int64_t n, model::Range keep) const {
    const std::vector<float> all = loader_.vector(name, n);
    counted(keep.size() * 4);
    return {all.begin() + keep.begin, all.begin() + keep.end};
  }
  Weight f32_matrix(const std::string& name, int64_t rows, int64_t cols) const {
    return prepared(loader_.matrix_f32(name, rows, cols));
  }
  std::vector<float> matrix_values(const std::string& name, int64_t rows, int64_t cols) const {
    const Weight w = loader_.matrix_f32(name, rows, cols);
    counted(rows * cols * 4);
    return {w.f32(), w.f32() + rows * cols};
  }
  // tid2eid: I64 (as released) or I32 [V, top_k], every id an expert.
  std::vector<int32_t> expert_table(const std::string& name) const {
    const model::TensorInfo& t = ckpt_.get(name);
    const std::vector<int64_t> shape = {cfg_.vocab_size, cfg_.router.top_k};
    const bool wide = t.type == model::StorageType::I64;
    if (t.shape != shape || (!wide && t.type != model::StorageType::I32)) {
      fail("{}: '{}' must be I64/I32 [{}, {}], got {} [{}]", t.file, name, shape[0], shape[1],
           model::storage_type_name(t.type), fmt::join(t.shape, ", "));
    }
    std::vector<int32_t> ids(static_cast<size_t>(shape[0] * shape[1]));
    for (size_t i = 0; i < ids.size(); ++i) {
      int64_t id = 0;
      if (wide) std::memcpy(&id, t.data + 8 * i, 8);
      int32_t narrow = 0;
      if (!wide) std::memcpy(&narrow, t.data + 4 * i, 4);
      if (!wide) id = narrow;
      if (id < 0 || id >= cfg_.n_routed_experts)
        fail("{}: '{}' names expert {} (of {})", t.file, name, id, cfg_.n_routed_experts);
      ids[i] = static_cast<int32_t>(id);
    }
    counted(static_cast<int64_t>(ids.size()) * 4);
    return ids;
  }

 private:
  Weight block(const std::string& name, int64_t rows, int64_t cols, WeightKind kind,
               int64_t row_begin, int64_t n) const {
    const int64_t held = n > 0 ? n : rows;
    Weight w = loader_.new_weight(name, held, cols, kind);
    loader_.copy_block(name, rows, cols, {row_begin, held, 0, cols}, w, 0);
    return w;
  }
  void counted(int64_t bytes) const {
    value_bytes_ += static_cast<size_t>(bytes);
    resident_bytes_ += static_cast<size_t>(bytes);
  }
  // The kernels' packed copy made, the weight's bytes counted; keep_rows: the row-major values
  // stay even where the packed copy serves every product (the embedding is read by rows).
  Weight prepared(Weight w, bool keep_rows = false) const {
    kernels::prepare(w);
    value_bytes_ += w.bytes();
    if (!keep_rows) kernels::drop_row_major_if_unneeded(w);
    resident_bytes_ += w.bytes() + w.packed_bytes;
    return w;
  }

  const model::Checkpoint& ckpt_;
  model::WeightLoader loader_;
  const V4Config& cfg_;
  const model::RankLayout& layout_;
  V4Shards shards_;
  mutable size_t value_bytes_ = 0, resident_bytes_ = 0;
};

HcWeights hc_weights(const Reader& r, const std::string& p, int64_t mixes, int64_t scales,
                     const V4Config& c) {
  return {r.f32_matrix(p + "_fn", mixes, c.hc_mult * c.hidden_size), r.values(p + "_base", mixes),
          r.values(p + "_scale", scales)};
}

CompressorWeights compressor(const Reader& r, const std::string& p, int64_t ratio, int64_t dim,
                             const V4Config& c) {
  CompressorWeights w;
  w.ratio = ratio;
  w.dim = dim;
  w.overlap = ratio == 4;
  w.wkv = r.linear(p + "wkv.weight", w.width(), c.hidden_size, WeightKind::QkvA);
  w.wgate = r.linear(p + "wgate.weight", w.width(), c.hidden_size, WeightKind::QkvA);
  w.ape = r.matrix_values(p + "ape", ratio, w.width());
  w.norm = r.values(p + "norm.weight", dim);
  return w;
}

AttentionWeights attention(const Reader& r, const std::string& p, int64_t layer,
                           const V4Config& c) {
  const int64_t H = c.hidden_size, nh = c.num_attention_heads, d = c.head_dim;
  AttentionWeights w;
  w.wq_a = r.linear(p + "wq_a.weight", c.q_lora_rank, H, WeightKind::QkvA);
  w.q_norm = r.values(p + "q_norm.weight", c.q_lora_rank);
  w.wq_b = r.split(query_up(c, p + "wq_b.weight"));
  w.wkv = r.linear(p + "wkv.weight", d, H, WeightKind::QkvA);
  w.kv_norm = r.values(p + "kv_norm.weight", d);
  const model::Range heads = r.shards().heads(), groups = r.shards().o_groups;
  w.sink = r.values(p + "attn_sink", nh, heads);
  const int64_t group_in = nh * d / c.o_groups;
  for (int64_t g = groups.begin; g < groups.end; ++g) {
    w.wo_a.push_back(r.linear(p + "wo_a.weight", c.o_groups * c.o_lora_rank, group_in,
                              WeightKind::O, g * c.o_lora_rank, c.o_lora_rank));
  }
  w.wo_b = r.split(output_down(c, p + "wo_b.weight"));
  const int64_t ratio = c.compress_ratio(layer);
  if (ratio == 0) return w;
  w.compressor = compressor(r, p + "compressor.", ratio, d, c);
  if (ratio != 4) return w;
  const std::string ip = p + "indexer.";
  w.indexer =
      IndexerWeights{r.linear(ip + "wq_b.weight", c.index_n_heads * c.index_head_dim, c.q_lora_rank,
                              WeightKind::Indexer),
                     r.linear(ip + "weights_proj.weight", c.index_n_heads, H, WeightKind::Indexer),
                     compressor(r, ip + "compressor.", ratio, c.index_head_dim, c)};
  return w;
}

ExpertWeights expert(const Reader& r, const std::string& p, const V4Config& c, bool routed) {
  return {r.split(expert_up(c, p + "w1.weight", routed)),
          r.split(expert_up(c, p + "w3.weight", routed)),
          r.split(expert_down(c, p + "w2.weight", routed))};
}

MoeWeights moe(const Reader& r, const std::string& p, int64_t layer, const V4Config& c) {
  MoeWeights w;
  w.gate = r.f32_matrix(p + "gate.weight", c.n_routed_experts, c.hidden_size);
  if (c.hash_routed(layer)) {
    w.tid2eid = r.expert_table(p + "gate.tid2eid");
  } else {
    w.bias = r.values(p + "gate.bias", c.n_routed_experts);
  }
  for (int64_t e = r.shards().experts.begin; e < r.shards().experts.end; ++e)
    w.experts.push_back(expert(r, fmt::format("{}experts.{}.", p, e), c, true));
  if (c.n_shared_experts > 0) w.shared = expert(r, p + "shared_experts.", c, false);
  return w;
}

// Layer i's tensors, named p + ... (layers.i., or mtp.0. for the MTP block's layer).
LayerWeights layer(const Reader& r, const std::string& p, int64_t i, const V4Config& c) {
  LayerWeights w;
  w.attn_norm = r.values(p + "attn_norm.weight", c.hidden_size);
  w.ffn_norm = r.values(p + "ffn_norm.weight", c.hidden_size);
  w.hc_attn = hc_weights(r, p + "hc_attn", c.hc_mix_size(), 3, c);
  w.hc_ffn = hc_weights(r, p + "hc_ffn", c.hc_mix_size(), 3, c);
  w.attn = attention(r, p + "attn.", i, c);
  w.ffn = moe(r, p + "ffn.", i, c);
  return w;
}

MtpWeights mtp(const Reader& r, const V4Config& c) {
  const std::string p = "mtp.0.";
  const int64_t H = c.hidden_size;
  MtpWeights w;
  w.enorm = r.values(p + "enorm.weight", H);
  w.hnorm = r.values(p + "hnorm.weight", H);
  w.norm = r.values(p + "norm.weight", H);
  w.e_proj = r.linear(p + "e_proj.weight", H, H, WeightKind::MtpProjection);
  w.h_proj = r.linear(p + "h_proj.weight", H, H, WeightKind::MtpProjection);
  w.block = layer(r, p, c.mtp_layer(), c);
  w.hc_head = hc_weights(r, p + "hc_head", c.hc_mult, 1, c);
  return w;
}

}  // namespace

V4Weights load_weights(const std::filesystem::path& dir, const V4Config& cfg,
                       const model::WeightFormat& format, const model::RankLayout& layout,
                       bool with_mtp) {
  const model::Checkpoint ckpt = model::Checkpoint::open(dir);
  const Reader r(ckpt, format, cfg, layout);
  V4Weights w;
  // The embedding keeps its row-major values: it is read by rows.
  w.embed = r.split(vocab_rows(cfg, "embed.weight", WeightKind::Embedding), true);
  for (int64_t i = 0; i < cfg.num_hidden_layers; ++i)
    w.layers.push_back(layer(r, fmt::format("layers.{}.", i), i, cfg));
  w.hc_head = hc_weights(r, "hc_head", cfg.hc_mult, 1, cfg);
  w.norm = r.values("norm.weight", cfg.hidden_size);
  w.head = r.split(vocab_rows(cfg, "head.weight", WeightKind::LmHead));
  if (with_mtp) w.mtp = mtp(r, cfg);
  w.value_bytes = r.value_bytes();
  w.resident_bytes = r.resident_bytes();
  return w;
}

}  // namespace mlaserve::models::deepseek_v4
