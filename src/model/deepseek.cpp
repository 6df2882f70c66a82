// The DeepSeek-V2/V3/V3.2 forward step, top to bottom as in the papers:
//   x = embed(tokens)
//   for each layer:  x = x + MLA(RMSNorm(x));  x = x + FFN(RMSNorm(x))   (FFN: dense or MoE)
//   logits = lm_head(RMSNorm(x))
// V3.2 (DeepSeek Sparse Attention): in each layer a lightning indexer picks, for every query of a
// sequence longer than index_topk, the index_topk earlier tokens MLA attends to.
// Shapes: T = this group's new tokens, N = tokens of every DP group (the MLP batch), H = hidden,
// nh = this rank's heads, nope/rope/v = per-head dims, kvl = kv_lora_rank, A = q_lora + kvl + rope.
#include "model/deepseek.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "core/scratch.h"

namespace mlaserve::model {

namespace {

// dst[r, :width] = src[r, offset : offset + width] for r < rows (a column slice of a row-major
// matrix).
void copy_columns(const float* src, int64_t src_width, int64_t offset, int64_t rows, int64_t width,
                  float* dst, int64_t dst_width) {
  for (int64_t r = 0; r < rows; ++r)
    std::copy_n(src + r * src_width + offset, width, dst + r * dst_width);
}

// The indexer's key LayerNorm: DeepSeek's LayerNorm default.
constexpr float kLayerNormEps = 1e-6f;

// Rows per job of the decodes' batched absorption products: the GEMV's range.
constexpr int64_t kDecodeJobRows = 8;

// The FFN runs on blocks of at most this many rows. Its buffers are a step's largest (every
// expert pick's input and output, [rows * top_k, H] each, and the experts' intermediates), and
// past a few hundred rows a block's GEMMs run as fast as one: a prefill of 8,192 tokens of the
// bench model holds ~1 GB less this way and re-reads each expert's weights 8 times, a few
// milliseconds per layer against seconds of compute.
constexpr int64_t kFfnBlockRows = 1024;

}  // namespace

const char* flop_kind_name(FlopKind kind) {
  static const char* names[] = {"qkv_a",  "q_b",    "kv_b", "absorb",  "attention", "indexer",
                                "o_proj", "router", "mlp",  "experts", "lm_head",   "mtp_eh_proj"};
  return names[static_cast<size_t>(kind)];
}

std::vector<std::pair<std::string, double>> DeepseekModel::flop_counts() const {
  std::vector<std::pair<std::string, double>> counts;
  for (size_t k = 0; k < flops_.size(); ++k)
    counts.emplace_back(flop_kind_name(static_cast<FlopKind>(k)), flops_[k]);
  return counts;
}

std::unique_ptr<KvStore> DeepseekModel::new_kv_store(int64_t capacity_tokens, KvDtype dtype) const {
  return std::make_unique<LatentKvStore>(kv_layers(), cfg_.kv_cache_dim(), capacity_tokens, dtype,
                                         cfg_.index_key_dim());
}

// The store this family made (new_kv_store): its latent pool.
static cache::LatentKvPool& latent_pool(KvStore& kv) {
  return static_cast<LatentKvStore&>(kv).pool;
}

std::vector<float> DeepseekModel::forward(const StepInput& in, KvStore& kv, StepComm& comm,
                                          std::vector<float>* final_hidden) {
  return forward(in, latent_pool(kv), comm, final_hidden);
}

std::vector<float> DeepseekModel::mtp_forward(const StepInput& in, const float* final_hidden,
                                              KvStore& kv, StepComm& comm,
                                              std::vector<float>* head_hidden) {
  return mtp_forward(in, final_hidden, latent_pool(kv), comm, head_hidden);
}

std::string DeepseekModel::weight_format_description() const {
  const char* dtype = kernels::weight_type_name(format_.dtype);
  // A dense checkpoint's embedding is quantized too; an FP8 checkpoint's stays as stored.
  const bool dense = !cfg_.fp8_block_quantized;
  const std::string quantized = fmt::format("{}linear layers{}", dense ? "embedding, " : "",
                                            format_.quantize_lm_head ? " and lm_head" : "");
  const std::string in_dtype = fmt::format("{} activations{}{}", dtype, dense ? "" : ", embedding",
                                           format_.quantize_lm_head ? "" : ", lm_head");
  switch (format_.quantization) {
    case Quantization::Fp8:
      return fmt::format("fp8_e4m3 {} (128x128 block scales); {}; float32 router", quantized,
                         in_dtype);
    case Quantization::Int8:
      return fmt::format("int8 {} (per-row scales); {}; float32 router", quantized, in_dtype);
    case Quantization::Int4:
      return fmt::format("int4 {} (a scale per {} values of a row); {}; float32 router", quantized,
                         format_.group_size, in_dtype);
    case Quantization::Mxfp4:
      return fmt::format("mxfp4 {} (e2m1, a power-of-two scale per 32 values); {}; float32 router",
                         quantized, in_dtype);
    case Quantization::Auto:
    case Quantization::None:
      break;
  }
  return fmt::format("{} weights; float32 router", dtype);
}

DeepseekModel::DeepseekModel(const std::filesystem::path& dir, WeightFormat format,
                             const RankLayout& layout, bool with_mtp)
    : cfg_(ModelConfig::load(dir)),
      format_(resolve_weight_format(format, cfg_)),
      layout_(layout),
      heads_(owned_range(layout, WeightKind::QB, cfg_.num_attention_heads)),
      embedding_rows_(owned_range(layout, WeightKind::Embedding, cfg_.vocab_size)),
      rope_(cfg_) {
  info_ = model_info(cfg_.model_type, cfg_);
  if (with_mtp && cfg_.num_nextn_predict_layers == 0) {
    fail(
        "{}: the model has no multi-token-prediction layer (num_nextn_predict_layers is 0), "
        "which speculative decoding needs",
        (dir / "config.json").string());
  }
  load(dir, with_mtp);
}

void for_each_weight(LayerWeights& L, const std::function<void(kernels::Weight&)>& fn) {
  for (kernels::Weight* w : {&L.attn.qkv_a, &L.attn.q_b, &L.attn.kv_b, &L.attn.o}) fn(*w);
  for (auto& w : L.attn.uk) fn(w);
  for (auto& w : L.attn.uv) fn(w);
  if (L.attn.indexer) {
    for (kernels::Weight* w :
         {&L.attn.indexer->wq_b, &L.attn.indexer->wk, &L.attn.indexer->weights_proj})
      fn(*w);
  }
  std::vector<MlpWeights*> mlps;
  if (L.dense) mlps.push_back(&*L.dense);
  if (L.moe) {
    fn(L.moe->router);
    for (auto& e : L.moe->experts) mlps.push_back(&e);
    if (L.moe->shared) mlps.push_back(&*L.moe->shared);
  }
  for (MlpWeights* m : mlps) {
    fn(m->gate_up);
    fn(m->down);
  }
}

void DeepseekModel::count_flops(FlopKind kind, int64_t m, const kernels::Weight& w) {
  flops_[static_cast<size_t>(kind)] += 2.0 * static_cast<double>(m * w.rows() * w.cols());
}

void DeepseekModel::linear(FlopKind kind, const float* x, int64_t m, const kernels::Weight& w,
                           float* y) {
  if (m == 0) return;
  count_flops(kind, m, w);
  kernels::matmul(x, m, w, y);
}

std::vector<float> DeepseekModel::forward(const StepInput& in, cache::LatentKvPool& kv,
                                          StepComm& comm, std::vector<float>* final_hidden) {
  const int64_t T = static_cast<int64_t>(in.tokens.size()), H = cfg_.hidden_size;
  float* x = take(buf_.x, T * H);  // the residual stream of this group's tokens
  embed_vocab_parallel(embedding_, embedding_rows_, cfg_.vocab_size, in.tokens, x, comm);
  for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l)
    decoder_layer(layers_[static_cast<size_t>(l)], l, in, x, kv, comm);
  if (final_hidden) {
    final_hidden->resize(static_cast<size_t>(T * H));
    kernels::rms_norm(x, final_norm_.data(), T, H, static_cast<float>(cfg_.rms_norm_eps),
                      final_hidden->data());
  }
  return logits(x, in.logit_rows, final_norm_, lm_head_, comm);
}

size_t StepBuffers::bytes() const {
  size_t total = 0;
  const auto add = [&total](const auto&... buffers) {
    ((total += buffers.capacity() * sizeof(buffers[0])), ...);
  };
  add(x, h, attn_out, ffn_in, ffn_h, ffn_out, qkv_a, token_shard, q, q_latent, latent, o);
  add(c_kv, kv_b, k, v, q_absorbed, head_in, head_out, o_latent, gate_up, act, mtp_in);
  add(index_q, index_k, index_w, selected, selected_counts, selected_slots);
  add(router_logits, gates, expert_x, expert_y, logits_h, logits_shard, expert_ids, picks);
  add(expert_begin, expert_fill, jobs, decodes);
  return total;
}

// The bounds of each take() below for a step of T group tokens, N MLP tokens and R rows of
// logits: attention's buffers scale with T (a pure prefill's normal path with its n_new <= T, the
// absorbed path with its rows <= T), the FFN's input and output with N, its intermediates with
// one block of B = min(N, kFfnBlockRows) rows, the experts' with B * top_k picks (all of them
// local in the worst case, EP included). step_buffers_test holds a largest step to them.
size_t DeepseekModel::reserve_step_buffers(int64_t T, int64_t N, int64_t R) {
  const int64_t H = cfg_.hidden_size, nh = heads_.size(), E = cfg_.n_routed_experts;
  const int64_t q_lora = cfg_.q_lora_rank, kvl = cfg_.kv_lora_rank, rope = cfg_.qk_rope_head_dim;
  const int64_t nope = cfg_.qk_nope_head_dim, qk = cfg_.qk_head_dim(), v = cfg_.v_head_dim;
  const int64_t A = layers_.front().attn.qkv_a.rows(), P = layout_.attn_tp_size;
  const int64_t head_dim = std::max({nope, kvl, v});
  const auto hold = [](auto& buffer, int64_t n) { take(buffer, n); };
  for (auto* b : {&buf_.x, &buf_.h, &buf_.attn_out}) hold(*b, T * H);
  for (auto* b : {&buf_.ffn_in, &buf_.ffn_h, &buf_.ffn_out}) hold(*b, N * H);
  if (mtp_) hold(buf_.mtp_in, T * 2 * H);
  hold(buf_.qkv_a, T * A);
  if (P > 1) hold(buf_.token_shard, (T + P - 1) / P * A);
  hold(buf_.q, T * nh * qk);
  hold(buf_.q_latent, T * q_lora);
  hold(buf_.latent, T * (kvl + rope));
  hold(buf_.o, T * nh * v);
  if (!kernels::deterministic_kernels()) {  // the normal path runs only then
    hold(buf_.c_kv, T * kvl);
    hold(buf_.kv_b, T * nh * (nope + v));
    hold(buf_.k, T * nh * qk);
    hold(buf_.v, T * nh * v);
  }
  hold(buf_.q_absorbed, T * nh * (kvl + rope));
  hold(buf_.head_in, nh * T * head_dim);
  hold(buf_.head_out, nh * T * head_dim);
  hold(buf_.o_latent, T * nh * kvl);
  if (cfg_.has_indexer()) {
    const int64_t Hi = cfg_.index_n_heads, Di = cfg_.index_head_dim;
    hold(buf_.index_q, T * Hi * Di);
    hold(buf_.index_k, T * Di);
    hold(buf_.index_w, T * Hi);
    hold(buf_.selected, T * cfg_.index_topk);
    hold(buf_.selected_counts, T);
    hold(buf_.selected_slots, cfg_.index_topk);
    if (P > 1) hold(buf_.token_shard, (T + P - 1) / P * std::max({A, Di, Hi}));
  }
  hold(buf_.logits_h, R * H);
  hold(buf_.logits_shard, R * lm_head_.rows());
  // Both MLP kinds share gate_up and act: the larger of the dense MLP and the MoE's routed picks
  // plus its shared expert's rows, for one block of B rows.
  const int64_t B = std::min(N, kFfnBlockRows), picks = B * cfg_.router.top_k;
  int64_t inter = 0, ffn_rows = B, ffn_cols = 0;  // the down projections' x: [rows, cols]
  for (const LayerWeights& L : layers_) {
    if (L.dense) {
      inter = std::max(inter, B * (L.dense->gate_up.rows() / 2));
      ffn_cols = std::max(ffn_cols, L.dense->gate_up.rows() / 2);
    }
    if (!L.moe) continue;
    const int64_t routed = L.moe->experts.empty() ? 0 : L.moe->experts[0].gate_up.rows() / 2;
    const int64_t shared = L.moe->shared ? L.moe->shared->gate_up.rows() / 2 : 0;
    inter = std::max(inter, picks * routed + B * shared);
    ffn_rows = std::max(ffn_rows, picks + B);
    ffn_cols = std::max({ffn_cols, routed, shared});
    hold(buf_.router_logits, B * E);
    hold(buf_.gates, picks);
    hold(buf_.expert_ids, picks);
    hold(buf_.picks, picks);
    hold(buf_.expert_x, picks * H);
    hold(buf_.expert_y, picks * H);
    hold(buf_.expert_begin, static_cast<int64_t>(L.moe->experts.size()) + 1);
    hold(buf_.expert_fill, static_cast<int64_t>(L.moe->experts.size()));
  }
  hold(buf_.gate_up, 2 * inter);
  hold(buf_.act, inter);
  // Matmul jobs: per head, a decode batch's rows in jobs of kDecodeJobRows or an extend's in
  // one; or every local expert and the shared one.
  int64_t jobs = nh * ((T + kDecodeJobRows - 1) / kDecodeJobRows);
  for (const LayerWeights& L : layers_)
    if (L.moe) jobs = std::max(jobs, static_cast<int64_t>(L.moe->experts.size()) + 1);
  buf_.jobs.reserve(static_cast<size_t>(jobs));
  buf_.decodes.reserve(static_cast<size_t>(T));
  // The matmuls' x operands [rows, cols] (a batch's jobs together), for the kernels' scratch.
  const std::pair<int64_t, int64_t> operands[] = {
      {T, mtp_ ? 2 * H : H}, {T, q_lora},          {T, kvl}, {T, nh * v}, {nh * T, head_dim},
      {ffn_rows, H},         {ffn_rows, ffn_cols}, {R, H}};
  for (const auto& [rows, cols] : operands) kernels::reserve_matmul_scratch(rows, cols);
  return step_buffer_bytes();
}

size_t DeepseekModel::step_buffer_bytes() const {
  return buf_.bytes() + kernels::matmul_scratch_bytes();
}

// DeepSeek-V3 MTP: x_i = eh_proj([enorm(embed(t_{i+1})) ; hnorm(h_i)]), one decoder layer with
// its own KV cache (layer index num_hidden_layers) and RoPE at position i, then the module's
// norm and head give the logits of t_{i+2}.
std::vector<float> DeepseekModel::mtp_forward(const StepInput& in, const float* final_hidden,
                                              cache::LatentKvPool& kv, StepComm& comm,
                                              std::vector<float>* head_hidden) {
  if (!mtp_) fail("internal: mtp_forward without the MTP layer loaded");
  const int64_t T = static_cast<int64_t>(in.tokens.size()), H = cfg_.hidden_size;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  float* cat = take(buf_.mtp_in, T * 2 * H);  // [T, 2H]: embedding half first
  float* x = take(buf_.x, T * H);
  embed_vocab_parallel(mtp_->embedding ? *mtp_->embedding : embedding_, embedding_rows_,
                       cfg_.vocab_size, in.tokens, x, comm);
  for (int64_t t = 0; t < T; ++t) {
    kernels::rms_norm(x + t * H, mtp_->enorm.data(), 1, H, eps, cat + t * 2 * H);
    kernels::rms_norm(final_hidden + t * H, mtp_->hnorm.data(), 1, H, eps, cat + t * 2 * H + H);
  }
  linear(FlopKind::MtpProjection, cat, T, mtp_->eh_proj, x);
  decoder_layer(mtp_->layer, cfg_.num_hidden_layers, in, x, kv, comm);
  return logits(x, in.logit_rows, mtp_->head_norm, mtp_->head ? *mtp_->head : lm_head_, comm,
                head_hidden);
}

// One decoder layer over the step's rows; x [T, H] is the residual stream, updated in place.
void DeepseekModel::decoder_layer(const LayerWeights& w, int64_t kv_layer, const StepInput& in,
                                  float* x, cache::LatentKvPool& kv, StepComm& comm) {
  const int64_t T = static_cast<int64_t>(in.tokens.size()), H = cfg_.hidden_size;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  float* h = take(buf_.h, T * H);
  float* attn_out = take(buf_.attn_out, T * H);
  std::vector<float>& ffn_in = buf_.ffn_in;
  comm.begin_layer(kv_layer);
  // x = x + MLA(RMSNorm(x)); attention runs on this group's tokens with this rank's heads.
  kernels::rms_norm(x, w.attn_norm.data(), T, H, eps, h);
  attention(w.attn, kv_layer, in, h, kv, comm, attn_out);
  comm.attention_to_mlp(attn_out, x, T, H, ffn_in);  // ffn_in: [N, H], all groups

  // x = x + FFN(RMSNorm(x)); tensor-parallel over every rank, on every group's tokens.
  const int64_t N = static_cast<int64_t>(ffn_in.size()) / H;
  float* ffn_h = take(buf_.ffn_h, N * H);
  float* ffn_out = take(buf_.ffn_out, N * H);
  kernels::rms_norm(ffn_in.data(), w.mlp_norm.data(), N, H, eps, ffn_h);
  for (int64_t first = 0; first < N; first += kFfnBlockRows) {
    const int64_t rows = std::min(kFfnBlockRows, N - first);
    if (w.dense) {
      mlp(*w.dense, ffn_h + first * H, rows, ffn_out + first * H, FlopKind::Mlp);
    } else {
      moe(*w.moe, ffn_h + first * H, rows, ffn_out + first * H);
    }
  }
  comm.mlp_to_attention(ffn_out, x, T, H);
}

// Multi-head Latent Attention over this rank's heads; out [T, H] holds this rank's o_proj
// partial sums (the group reduction happens in StepComm::attention_to_mlp).
void DeepseekModel::attention(const AttentionWeights& w, int64_t layer, const StepInput& in,
                              const float* x, cache::LatentKvPool& kv, StepComm& comm, float* out) {
  const int64_t T = static_cast<int64_t>(in.tokens.size());
  const int64_t q_lora = cfg_.q_lora_rank, kvl = cfg_.kv_lora_rank, rope = cfg_.qk_rope_head_dim;
  const int64_t nope = cfg_.qk_nope_head_dim, qk = cfg_.qk_head_dim(), v = cfg_.v_head_dim;
  const int64_t nh = heads_.size(), A = w.qkv_a.rows();
  const float eps = static_cast<float>(cfg_.rms_norm_eps);

  // Down-projections, one fused GEMM: [T, H] -> [T, A] = [q latent | c_kv | k_pe]. The weight
  // is replicated; with dp_linear each rank of the group computes a token shard and the shards
  // are all-gathered: the same rows as every rank computing all of them, for 1/P of the FLOPs.
  float* qkv_a = take(buf_.qkv_a, T * A);
  replicated_linear(FlopKind::QkvA, x, T, w.qkv_a, qkv_a, comm);

  // Queries [T, nh, qk]: up-projection of the normalised q latent (or q_proj of x, V2-Lite).
  float* q = take(buf_.q, T * nh * qk);
  float* q_lat = nullptr;
  if (q_lora > 0) {
    q_lat = take(buf_.q_latent, T * q_lora);
    copy_columns(qkv_a, A, 0, T, q_lora, q_lat, q_lora);
    kernels::rms_norm(q_lat, w.q_a_norm.data(), T, q_lora, eps, q_lat);
    linear(FlopKind::QB, q_lat, T, w.q_b, q);
  } else {
    linear(FlopKind::QB, x, T, w.q_b, q);
  }

  // Latent KV [T, kvl + rope] = [RMSNorm(c_kv) | RoPE(k_pe)]; RoPE on q_pe of every head too.
  float* latent = take(buf_.latent, T * (kvl + rope));
  copy_columns(qkv_a, A, q_lora, T, kvl + rope, latent, kvl + rope);
  for (int64_t t = 0; t < T; ++t) {
    float* row = latent + t * (kvl + rope);
    kernels::rms_norm(row, w.kv_a_norm.data(), 1, kvl, eps, row);
    const int32_t pos = in.positions[static_cast<size_t>(t)];
    if (pos < 0 || pos >= rope_.max_positions())
      fail("position {} exceeds the model's {} positions", pos, rope_.max_positions());
    kernels::rope_interleaved(row + kvl, 1, rope, rope, rope_.cos(pos), rope_.sin(pos));
    kernels::rope_interleaved(q + t * nh * qk + nope, nh, qk, rope, rope_.cos(pos), rope_.sin(pos));
  }

  // Store the new latents, then attend: pure prefill decompresses K/V (normal path); a sequence
  // with a cached prefix attends in latent space (absorbed path), and so does every sequence
  // under deterministic kernels, so that a token's attention is computed one way whether its
  // prompt arrives whole, in chunks or after a cached prefix. The step's decodes (one new
  // token each) go through the absorption together: one batch of W_UK and one of W_UV products
  // over all their rows, in jobs of up to kDecodeJobRows rows, instead of two batches per
  // sequence that each re-read every head's weights for a single row.
  //
  // DeepSeek Sparse Attention: a sequence no longer than index_topk attends densely, exactly as
  // without an indexer; past that, each query attends only to the tokens its indexer selects
  // (the first index_topk queries to all they see, as a dense query would), on the same path a
  // dense sequence would take: a pure prefill over its decompressed K/V, the rest in latent space.
  const auto sparse = [&](const SequenceStep& s) {
    return w.indexer && s.n_cached + s.n_new > cfg_.index_topk;
  };
  if (w.indexer) {
    const bool any_sparse = std::any_of(in.seqs.begin(), in.seqs.end(), sparse);
    index_projections(*w.indexer, layer, in, x, q_lat, any_sparse, kv, comm);
  }
  const KvRows kv_layer = kv.layer(layer);
  float* o = take(buf_.o, T * nh * v);  // [T, nh, v]
  std::vector<AbsorbedSequence>& decodes = buf_.decodes;
  decodes.clear();
  int64_t row = 0;
  for (const SequenceStep& s : in.seqs) {
    for (int64_t j = 0; j < s.n_new; ++j) {
      const int32_t slot = s.kv_slots[static_cast<size_t>(s.n_cached + j)];
      kv.write_row(layer, slot, latent + (row + j) * (kvl + rope));
    }
    if (sparse(s)) select_keys(layer, s, row, kv);
    if (s.n_cached == 0 && !kernels::deterministic_kernels()) {
      attend_normal(w, s, sparse(s) ? row : -1, q + row * nh * qk, latent + row * (kvl + rope),
                    o + row * nh * v);
    } else if (s.n_new == 1) {
      decodes.push_back({&s, row, sparse(s)});
    } else {
      const AbsorbedSequence extend{&s, row, sparse(s)};
      attend_absorbed(w, {&extend, 1}, s.n_new, q, kv_layer, o);
    }
    row += s.n_new;
  }
  if (!decodes.empty()) attend_absorbed(w, decodes, kDecodeJobRows, q, kv_layer, o);
  // Output projection of this rank's heads: [T, nh*v] -> [T, H] partial sums.
  linear(FlopKind::O, o, T, w.o, out);
}

void DeepseekModel::replicated_linear(FlopKind kind, const float* x, int64_t T,
                                      const kernels::Weight& w, float* y, StepComm& comm) {
  model::replicated_linear(
      comm, x, T, cfg_.hidden_size, w.rows(), y, buf_.token_shard,
      [&](const float* rows, int64_t n, float* out) { linear(kind, rows, n, w, out); });
}

// The lightning indexer's inputs (DeepSeek-V3.2): per token t at position p,
//   key      k[t]    = RoPE_p(LayerNorm(x[t] wkᵀ))                              [Di]
//   queries  q[t, h] = RoPE_p((q_latent[t] wq_bᵀ)[h])                           [Hi, Di]
//   weights  w[t, h] = (x[t] weights_projᵀ)[h] · Hi^-1/2 · Di^-1/2               [Hi]
// RoPE here rotates the first qk_rope_head_dim values in half-split pairs (MLA's frequencies;
// MLA itself rotates its last values in interleaved pairs). Keys go to the cache for every
// token: a short sequence may later grow past index_topk. (DeepSeek's reference code also
// rotates q and k by a Hadamard matrix before quantizing them to FP8; the rotation is orthogonal,
// so in float the scores are the same without it.)
void DeepseekModel::index_projections(const IndexerWeights& w, int64_t layer, const StepInput& in,
                                      const float* x, const float* q_latent, bool queries,
                                      cache::LatentKvPool& kv, StepComm& comm) {
  const int64_t T = static_cast<int64_t>(in.tokens.size());
  const int64_t Hi = cfg_.index_n_heads, Di = cfg_.index_head_dim, rope = cfg_.qk_rope_head_dim;
  float* k = take(buf_.index_k, T * Di);
  replicated_linear(FlopKind::Indexer, x, T, w.wk, k, comm);
  kernels::layer_norm(k, w.k_norm_weight.data(), w.k_norm_bias.data(), T, Di, kLayerNormEps, k);
  float* q = queries ? take(buf_.index_q, T * Hi * Di) : nullptr;
  float* weights = queries ? take(buf_.index_w, T * Hi) : nullptr;
  if (queries) {
    linear(FlopKind::Indexer, q_latent, T, w.wq_b, q);
    replicated_linear(FlopKind::Indexer, x, T, w.weights_proj, weights, comm);
    const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(Hi * Di)));
    for (int64_t i = 0; i < T * Hi; ++i) weights[i] *= scale;
  }
  int64_t row = 0;
  for (const SequenceStep& s : in.seqs) {
    for (int64_t j = 0; j < s.n_new; ++j, ++row) {
      const int32_t pos = in.positions[static_cast<size_t>(row)];
      kernels::rope_half_split(k + row * Di, 1, Di, rope, rope_.cos(pos), rope_.sin(pos));
      kv.write_index_key(layer, s.kv_slots[static_cast<size_t>(s.n_cached + j)], k + row * Di);
      if (queries)
        kernels::rope_half_split(q + row * Hi * Di, Hi, Di, rope, rope_.cos(pos), rope_.sin(pos));
    }
  }
}

// I[t, s] = Σ_h w[t, h] · relu(q[t, h] · k[s]) over the cached keys s <= t; the top index_topk
// (the query's own token only if it scores among them), as positions in the sequence.
void DeepseekModel::select_keys(int64_t layer, const SequenceStep& s, int64_t row,
                                const cache::LatentKvPool& kv) {
  const int64_t Hi = cfg_.index_n_heads, Di = cfg_.index_head_dim, K = cfg_.index_topk;
  const int64_t n_kv = s.n_cached + s.n_new;
  int32_t* selected = take(buf_.selected, (row + s.n_new) * K) + row * K;
  int32_t* counts = take(buf_.selected_counts, row + s.n_new) + row;
  flops_[static_cast<size_t>(FlopKind::Indexer)] +=
      static_cast<double>(s.n_new * (2 * s.n_cached + s.n_new + 1) * Hi * Di);
  kernels::indexer_topk({s.n_new, Hi, Di, n_kv, K, format_.dtype == kernels::WeightType::BF16},
                        buf_.index_q.data() + row * Hi * Di, buf_.index_w.data() + row * Hi,
                        kv.index_keys(layer), s.kv_slots.data(), selected, counts);
}

// Normal path: K/V decompressed from c_kv by kv_b; causal MHA with head dim nope+rope, value dim v.
// selection_row >= 0: a sparse sequence, each query attending to its selection (step rows from
// selection_row in buf_.selected); -1: dense.
void DeepseekModel::attend_normal(const AttentionWeights& w, const SequenceStep& s,
                                  int64_t selection_row, const float* q, const float* latent,
                                  float* o) {
  const int64_t n = s.n_new, nh = heads_.size(), kvl = cfg_.kv_lora_rank,
                rope = cfg_.qk_rope_head_dim;
  const int64_t nope = cfg_.qk_nope_head_dim, qk = cfg_.qk_head_dim(), v = cfg_.v_head_dim;
  float* c_kv = take(buf_.c_kv, n * kvl);
  float* kv_b = take(buf_.kv_b, n * nh * (nope + v));
  copy_columns(latent, kvl + rope, 0, n, kvl, c_kv, kvl);
  linear(FlopKind::KvB, c_kv, n, w.kv_b, kv_b);  // [n, nh, nope + v]

  // k [n, nh, qk] and v [n, nh, v]; head-major ([nh, n, ...]) for the sparse kernel.
  const bool head_major = selection_row >= 0;
  const auto row = [&](int64_t t, int64_t h) { return head_major ? h * n + t : t * nh + h; };
  float* k = take(buf_.k, n * nh * qk);
  float* vv = take(buf_.v, n * nh * v);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < nh; ++h) {
      const float* src = kv_b + (t * nh + h) * (nope + v);
      float* kh = k + row(t, h) * qk;
      std::copy_n(src, nope, kh);
      std::copy_n(latent + t * (kvl + rope) + kvl, rope, kh + nope);  // k_pe is shared by all heads
      std::copy_n(src + nope, v, vv + row(t, h) * v);
    }
  }
  const kernels::PrefillAttention shape{n, nh, qk, v, static_cast<float>(cfg_.softmax_scale())};
  if (selection_row < 0) {
    flops_[static_cast<size_t>(FlopKind::Attention)] +=
        static_cast<double>(n * (n + 1) * nh * (qk + v));
    kernels::mla_attention_prefill(shape, q, k, vv, o);
    return;
  }
  const int64_t K = cfg_.index_topk;
  const int32_t* counts = buf_.selected_counts.data() + selection_row;
  double pairs = 0;
  for (int64_t i = 0; i < n; ++i) pairs += counts[i];
  flops_[static_cast<size_t>(FlopKind::Attention)] +=
      2.0 * pairs * static_cast<double>(nh * (qk + v));
  kernels::mla_attention_prefill_sparse(shape, K, q, k, vv,
                                        buf_.selected.data() + selection_row * K, counts, o);
}

// Absorbed path: q_nope·W_UK turns each head's query into latent space, attention runs as MQA
// with one KV head of dim kvl+rope over the cached latents, and W_UV maps the result back. The
// per-head products are small (kvl × nope), so each direction runs as one batch over all heads
// and all the sequences' rows, in jobs of at most job_rows rows. q is the step's [T, nh, qk],
// o its [T, nh, v]; the sequences' new rows are gathered into R rows here.
void DeepseekModel::attend_absorbed(const AttentionWeights& w,
                                    std::span<const AbsorbedSequence> seqs, int64_t job_rows,
                                    const float* q, const KvRows& kv_layer, float* o) {
  const int64_t nh = heads_.size(), kvl = cfg_.kv_lora_rank, rope = cfg_.qk_rope_head_dim;
  const int64_t nope = cfg_.qk_nope_head_dim, qk = cfg_.qk_head_dim(), v = cfg_.v_head_dim;
  const int64_t d_abs = kvl + rope;
  int64_t R = 0;
  for (const AbsorbedSequence& s : seqs) R += s.step->n_new;
  const int64_t per_head = R * std::max({nope, kvl, v});
  float* q_abs = take(buf_.q_absorbed, R * nh * d_abs);  // [R, nh, kvl + rope]
  float* head_in = take(buf_.head_in, nh * per_head);    // per head [R, nope], then [R, kvl]
  float* head_out = take(buf_.head_out, nh * per_head);  // per head [R, kvl], then [R, v]
  float* o_lat = take(buf_.o_latent, R * nh * kvl);      // [R, nh, kvl]
  // One batch of per-head products in_h [R, in] -> out_h [R, out] with weights[h].
  const auto per_head_batch = [&](const std::vector<kernels::Weight>& weights, int64_t in,
                                  int64_t out) {
    std::vector<kernels::MatmulJob>& jobs = buf_.jobs;
    jobs.clear();
    for (int64_t h = 0; h < nh; ++h) {
      for (int64_t r = 0; r < R; r += job_rows) {
        jobs.push_back({head_in + h * R * in + r * in, std::min(job_rows, R - r),
                        &weights[static_cast<size_t>(h)], head_out + h * R * out + r * out});
      }
    }
    linear_batch(FlopKind::Absorb, jobs);
  };

  int64_t r = 0;  // gathered row of the sequence's first new token
  for (const AbsorbedSequence& s : seqs) {
    for (int64_t h = 0; h < nh; ++h) {
      copy_columns(q + s.row * nh * qk, nh * qk, h * qk, s.step->n_new, nope,
                   head_in + h * R * nope + r * nope, nope);
    }
    r += s.step->n_new;
  }
  per_head_batch(w.uk, nope, kvl);
  r = 0;
  for (const AbsorbedSequence& s : seqs) {
    const int64_t n = s.step->n_new, n_kv = s.step->n_cached + n;
    for (int64_t h = 0; h < nh; ++h) {
      copy_columns(head_out + h * R * kvl + r * kvl, kvl, 0, n, kvl,
                   q_abs + r * nh * d_abs + h * d_abs, nh * d_abs);
      copy_columns(q + s.row * nh * qk, nh * qk, h * qk + nope, n, rope,
                   q_abs + r * nh * d_abs + h * d_abs + kvl, nh * d_abs);
    }
    const kernels::AbsorbedAttention shape{n,
                                           nh,
                                           kvl,
                                           rope,
                                           n_kv,
                                           static_cast<float>(cfg_.softmax_scale()),
                                           format_.dtype == kernels::WeightType::BF16};
    if (s.sparse) {
      attend_selected(shape, *s.step, s.row, q_abs + r * nh * d_abs, kv_layer,
                      o_lat + r * nh * kvl);
    } else {
      flops_[static_cast<size_t>(FlopKind::Attention)] +=
          2.0 * static_cast<double>(n * n_kv * nh * (2 * kvl + rope));
      kernels::mla_attention_absorbed(shape, q_abs + r * nh * d_abs, kv_layer,
                                      s.step->kv_slots.data(), o_lat + r * nh * kvl);
    }
    r += n;
  }
  for (int64_t h = 0; h < nh; ++h)
    copy_columns(o_lat, nh * kvl, h * kvl, R, kvl, head_in + h * R * kvl, kvl);
  per_head_batch(w.uv, kvl, v);
  r = 0;
  for (const AbsorbedSequence& s : seqs) {
    for (int64_t h = 0; h < nh; ++h) {
      copy_columns(head_out + h * R * v + r * v, v, 0, s.step->n_new, v, o + s.row * nh * v + h * v,
                   nh * v);
    }
    r += s.step->n_new;
  }
}

// Sparse MLA on the absorbed path: each query (step row `row` + i) of sequence s attends to its
// selected tokens alone, the absorbed kernel run as one query over their slots (it then sees
// every slot given).
void DeepseekModel::attend_selected(const kernels::AbsorbedAttention& shape, const SequenceStep& s,
                                    int64_t row, const float* q_abs, const KvRows& kv_layer,
                                    float* o_lat) {
  const int64_t K = cfg_.index_topk, d_abs = shape.d_latent + shape.d_rope;
  int32_t* slots = take(buf_.selected_slots, K);
  for (int64_t i = 0; i < shape.n_q; ++i) {
    kernels::AbsorbedAttention one = shape;
    one.n_q = 1;
    one.n_kv = buf_.selected_counts[static_cast<size_t>(row + i)];
    const int32_t* positions = buf_.selected.data() + (row + i) * K;
    for (int64_t j = 0; j < one.n_kv; ++j) slots[j] = s.kv_slots[static_cast<size_t>(positions[j])];
    flops_[static_cast<size_t>(FlopKind::Attention)] +=
        2.0 * static_cast<double>(one.n_kv * shape.n_heads * (2 * shape.d_latent + shape.d_rope));
    kernels::mla_attention_absorbed(one, q_abs + i * shape.n_heads * d_abs, kv_layer, slots,
                                    o_lat + i * shape.n_heads * shape.d_latent);
  }
}

void DeepseekModel::linear_batch(FlopKind kind, std::span<const kernels::MatmulJob> jobs) {
  for (const kernels::MatmulJob& job : jobs) count_flops(kind, job.m, *job.w);
  kernels::matmul_batch(jobs);
}

// SwiGLU: down(silu(gate(x)) * up(x)), gate and up in one GEMM. out [rows, H] is overwritten.
void DeepseekModel::mlp(const MlpWeights& w, const float* x, int64_t rows, float* out,
                        FlopKind kind) {
  const int64_t inter = w.gate_up.rows() / 2;
  float* gate_up = take(buf_.gate_up, rows * 2 * inter);
  float* act = take(buf_.act, rows * inter);
  linear(kind, x, rows, w.gate_up, gate_up);
  kernels::silu_mul(gate_up, rows, inter, act);
  linear(kind, act, rows, w.down, out);
}

// DeepSeekMoE: each token picks top_k routed experts; out = shared(x) + Σ w_k · expert_k(x).
// The picks are grouped by expert, so each active expert's weights stream once per call (a
// step, or an FFN block of a longer one), and all active experts and the shared expert run
// together: one batch of gate_up products, one of down products (at decode, every expert's few
// rows go to the GEMV in a single pass).
void DeepseekModel::moe(const MoeWeights& w, const float* x, int64_t rows, float* out) {
  const int64_t H = cfg_.hidden_size, E = cfg_.n_routed_experts, k = cfg_.router.top_k;
  float* router_logits = take(buf_.router_logits, rows * E);
  linear(FlopKind::Router, x, rows, w.router, router_logits);
  kernels::RouterSpec spec = cfg_.router;
  spec.correction_bias = w.correction_bias.empty() ? nullptr : w.correction_bias.data();
  int32_t* ids = take(buf_.expert_ids, rows * k);
  float* gates = take(buf_.gates, rows * k);
  for (int64_t t = 0; t < rows; ++t)
    kernels::route(router_logits + t * E, spec, ids + t * k, gates + t * k);

  // picks[begin[e], begin[e + 1]): the indices into ids of local expert e's picks (counting sort).
  const auto local_experts = static_cast<int64_t>(w.experts.size());
  const auto local = [&](int64_t i) { return ids[i] - w.first_local_expert; };
  int64_t* begin = take(buf_.expert_begin, local_experts + 1);
  int64_t* fill = take(buf_.expert_fill, local_experts);
  std::fill(begin, begin + local_experts + 1, 0);
  for (int64_t i = 0; i < rows * k; ++i) {
    if (local(i) >= 0 && local(i) < local_experts) ++begin[local(i) + 1];
  }
  for (int64_t e = 0; e < local_experts; ++e) begin[e + 1] += begin[e];
  std::copy_n(begin, local_experts, fill);
  const int64_t picked = begin[local_experts];
  int64_t* picks = take(buf_.picks, picked);
  for (int64_t i = 0; i < rows * k; ++i) {
    if (local(i) >= 0 && local(i) < local_experts) picks[fill[local(i)]++] = i;
  }

  // Rows of x in pick order, then both halves of the SwiGLU for every expert with picks. All
  // routed experts have one shape; the shared expert's rows follow theirs in the buffers.
  const int64_t inter = local_experts > 0 ? w.experts[0].gate_up.rows() / 2 : 0;
  const int64_t shared_inter = w.shared ? w.shared->gate_up.rows() / 2 : 0;
  float* xe = take(buf_.expert_x, picked * H);
  for (int64_t j = 0; j < picked; ++j) std::copy_n(x + picks[j] / k * H, H, xe + j * H);
  float* gate_up = take(buf_.gate_up, picked * 2 * inter + rows * 2 * shared_inter);
  float* act = take(buf_.act, picked * inter + rows * shared_inter);
  float* ye = take(buf_.expert_y, picked * H);
  float* shared_gate_up = gate_up + picked * 2 * inter;
  float* shared_act = act + picked * inter;
  std::vector<kernels::MatmulJob>& jobs = buf_.jobs;
  const auto run_experts = [&](auto job_of) {
    jobs.clear();
    for (int64_t e = 0; e < local_experts; ++e) {
      if (begin[e + 1] > begin[e])
        jobs.push_back(
            job_of(w.experts[static_cast<size_t>(e)], begin[e], begin[e + 1] - begin[e]));
    }
    for (const kernels::MatmulJob& job : jobs) count_flops(FlopKind::Experts, job.m, *job.w);
  };
  run_experts([&](const MlpWeights& e, int64_t first, int64_t n) {
    return kernels::MatmulJob{xe + first * H, n, &e.gate_up, gate_up + first * 2 * inter};
  });
  if (w.shared) {
    jobs.push_back({x, rows, &w.shared->gate_up, shared_gate_up});
    count_flops(FlopKind::Mlp, rows, w.shared->gate_up);
  }
  kernels::matmul_batch(jobs);
  kernels::silu_mul(gate_up, picked, inter, act);
  if (w.shared) kernels::silu_mul(shared_gate_up, rows, shared_inter, shared_act);
  run_experts([&](const MlpWeights& e, int64_t first, int64_t n) {
    return kernels::MatmulJob{act + first * inter, n, &e.down, ye + first * H};
  });
  if (w.shared) {
    jobs.push_back({shared_act, rows, &w.shared->down, out});  // the shared output starts the sum
    count_flops(FlopKind::Mlp, rows, w.shared->down);
  } else {
    std::fill(out, out + rows * H, 0.0f);
  }
  kernels::matmul_batch(jobs);
  for (int64_t j = 0; j < picked; ++j) {
    const float g = gates[picks[j]];
    float* dst = out + picks[j] / k * H;
    for (int64_t c = 0; c < H; ++c) dst[c] += g * ye[j * H + c];
  }
}

std::vector<float> DeepseekModel::logits(const float* x, const std::vector<int64_t>& rows,
                                         const std::vector<float>& norm,
                                         const kernels::Weight& head, StepComm& comm,
                                         std::vector<float>* normed_rows) {
  const int64_t H = cfg_.hidden_size, R = static_cast<int64_t>(rows.size());
  float* h = take(buf_.logits_h, R * H);
  for (int64_t r = 0; r < R; ++r) std::copy_n(x + rows[static_cast<size_t>(r)] * H, H, h + r * H);
  kernels::rms_norm(h, norm.data(), R, H, static_cast<float>(cfg_.rms_norm_eps), h);
  if (normed_rows) normed_rows->assign(h, h + R * H);
  float* shard = take(buf_.logits_shard, R * head.rows());
  std::vector<float> full(static_cast<size_t>(R * cfg_.vocab_size));
  linear(FlopKind::LmHead, h, R, head, shard);
  comm.gather_vocab(shard, R, cfg_.vocab_size, full.data());
  return full;
}

}  // namespace mlaserve::model
