// The DeepSeek-V2/V3 forward step, top to bottom as in the papers:
//   x = embed(tokens)
//   for each layer:  x = x + MLA(RMSNorm(x));  x = x + FFN(RMSNorm(x))   (FFN: dense or MoE)
//   logits = lm_head(RMSNorm(x))
// Shapes: T = this group's new tokens, N = tokens of every DP group (the MLP batch), H = hidden,
// nh = this rank's heads, nope/rope/v = per-head dims, kvl = kv_lora_rank, A = q_lora + kvl + rope.
#include "model/deepseek.h"

#include <algorithm>

#include "core/error.h"

namespace mlaserve::model {

namespace {

// dst[r, :width] = src[r, offset : offset + width] for r < rows (a column slice of a row-major matrix).
void copy_columns(const float* src, int64_t src_width, int64_t offset, int64_t rows, int64_t width, float* dst,
                  int64_t dst_width) {
  for (int64_t r = 0; r < rows; ++r) std::copy_n(src + r * src_width + offset, width, dst + r * dst_width);
}

}  // namespace

const char* flop_kind_name(FlopKind kind) {
  static const char* names[] = {"qkv_a", "q_b", "kv_b", "absorb", "attention", "o_proj",
                                "router", "mlp", "experts", "lm_head"};
  return names[static_cast<size_t>(kind)];
}

DeepseekModel::DeepseekModel(const std::filesystem::path& dir, kernels::WeightType type, const RankLayout& layout)
    : cfg_(ModelConfig::load(dir)),
      layout_(layout),
      heads_(shard_range(cfg_.num_attention_heads, layout.attn_tp_rank, layout.attn_tp_size)),
      vocab_(shard_range(cfg_.vocab_size, layout.attn_tp_rank, layout.attn_tp_size)),
      rope_(cfg_) {
  load(dir, type);
  auto prepare = [this](kernels::Weight& w) {
    kernels::prepare(w);
    resident_bytes_ += w.bytes();
  };
  prepare(embedding_);
  prepare(lm_head_);
  for (LayerWeights& L : layers_) {
    for (kernels::Weight* w : {&L.attn.qkv_a, &L.attn.q_b, &L.attn.kv_b, &L.attn.o}) prepare(*w);
    for (auto& w : L.attn.uk) prepare(w);
    for (auto& w : L.attn.uv) prepare(w);
    std::vector<MlpWeights*> mlps;
    if (L.dense) mlps.push_back(&*L.dense);
    if (L.moe) {
      prepare(L.moe->router);
      for (auto& e : L.moe->experts) mlps.push_back(&e);
      if (L.moe->shared) mlps.push_back(&*L.moe->shared);
    }
    for (MlpWeights* m : mlps) {
      prepare(m->gate_up);
      prepare(m->down);
    }
  }
}

void DeepseekModel::linear(FlopKind kind, const float* x, int64_t m, const kernels::Weight& w, float* y) {
  if (m == 0) return;
  flops_[static_cast<size_t>(kind)] += 2.0 * static_cast<double>(m * w.rows() * w.cols());
  kernels::matmul(x, m, w, y);
}

std::vector<float> DeepseekModel::forward(const StepInput& in, cache::LatentKvPool& kv, StepComm& comm) {
  const int64_t T = static_cast<int64_t>(in.tokens.size()), H = cfg_.hidden_size;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  std::vector<float> x(static_cast<size_t>(T * H));  // the residual stream of this group's tokens
  std::vector<float> h(x.size()), attn_out(x.size()), ffn_in, ffn_h, ffn_out;
  embed(in.tokens, x.data(), comm);

  for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l) {
    comm.begin_layer(l);
    const LayerWeights& w = layers_[static_cast<size_t>(l)];
    // x = x + MLA(RMSNorm(x)); attention runs on this group's tokens with this rank's heads.
    kernels::rms_norm(x.data(), w.attn_norm.data(), T, H, eps, h.data());
    attention(l, in, h.data(), kv, comm, attn_out.data());
    comm.attention_to_mlp(attn_out.data(), x.data(), T, H, ffn_in);  // ffn_in: [N, H], all groups

    // x = x + FFN(RMSNorm(x)); tensor-parallel over every rank, on every group's tokens.
    const int64_t N = static_cast<int64_t>(ffn_in.size()) / H;
    ffn_h.resize(ffn_in.size());
    ffn_out.assign(ffn_in.size(), 0.0f);
    kernels::rms_norm(ffn_in.data(), w.mlp_norm.data(), N, H, eps, ffn_h.data());
    if (w.dense) {
      mlp(*w.dense, ffn_h.data(), N, ffn_out.data(), FlopKind::Mlp);
    } else {
      moe(*w.moe, ffn_h.data(), N, ffn_out.data());
    }
    comm.mlp_to_attention(ffn_out.data(), x.data(), T, H);
  }
  return logits(x.data(), in.logit_rows, comm);
}

// Vocab-parallel lookup: each rank of the attention group fills the rows of tokens in its
// vocab range, the group sum completes every row.
void DeepseekModel::embed(const std::vector<int32_t>& tokens, float* x, StepComm& comm) const {
  const int64_t H = cfg_.hidden_size;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const int64_t id = tokens[t];
    if (id < 0 || id >= cfg_.vocab_size) fail("token id {} is outside the vocabulary [0, {})", id, cfg_.vocab_size);
    float* row = x + static_cast<int64_t>(t) * H;
    if (id < vocab_.begin || id >= vocab_.end) {
      std::fill(row, row + H, 0.0f);
      continue;
    }
    for (int64_t c = 0; c < H; ++c) row[c] = embedding_.at(id - vocab_.begin, c);
  }
  comm.sum_over_attn_tp(x, static_cast<int64_t>(tokens.size()) * H);
}

// Multi-head Latent Attention over this rank's heads; out [T, H] holds this rank's o_proj
// partial sums (the group reduction happens in StepComm::attention_to_mlp).
void DeepseekModel::attention(int64_t layer, const StepInput& in, const float* x, cache::LatentKvPool& kv,
                              StepComm& comm, float* out) {
  const AttentionWeights& w = layers_[static_cast<size_t>(layer)].attn;
  const int64_t T = static_cast<int64_t>(in.tokens.size());
  const int64_t q_lora = cfg_.q_lora_rank, kvl = cfg_.kv_lora_rank, rope = cfg_.qk_rope_head_dim;
  const int64_t nope = cfg_.qk_nope_head_dim, qk = cfg_.qk_head_dim(), v = cfg_.v_head_dim;
  const int64_t nh = heads_.size(), A = w.qkv_a.rows();
  const float eps = static_cast<float>(cfg_.rms_norm_eps);

  // Down-projections, one fused GEMM: [T, H] -> [T, A] = [q latent | c_kv | k_pe]. The weight
  // is replicated; with dp_linear each rank of the group computes a token shard and the shards
  // are all-gathered: the same rows as every rank computing all of them, for 1/P of the FLOPs.
  std::vector<float> qkv_a(static_cast<size_t>(T * A));
  if (comm.shard_tokens(T)) {
    const Range shard = comm.token_shard(T);
    std::vector<float> part(static_cast<size_t>(shard.size() * A));
    linear(FlopKind::QkvA, x + shard.begin * cfg_.hidden_size, shard.size(), w.qkv_a, part.data());
    comm.gather_token_rows(part.data(), T, A, qkv_a.data());
  } else {
    linear(FlopKind::QkvA, x, T, w.qkv_a, qkv_a.data());
  }

  // Queries [T, nh, qk]: up-projection of the normalised q latent (or q_proj of x, V2-Lite).
  std::vector<float> q(static_cast<size_t>(T * nh * qk));
  if (q_lora > 0) {
    std::vector<float> q_lat(static_cast<size_t>(T * q_lora));
    copy_columns(qkv_a.data(), A, 0, T, q_lora, q_lat.data(), q_lora);
    kernels::rms_norm(q_lat.data(), w.q_a_norm.data(), T, q_lora, eps, q_lat.data());
    linear(FlopKind::QB, q_lat.data(), T, w.q_b, q.data());
  } else {
    linear(FlopKind::QB, x, T, w.q_b, q.data());
  }

  // Latent KV [T, kvl + rope] = [RMSNorm(c_kv) | RoPE(k_pe)]; RoPE on q_pe of every head too.
  std::vector<float> latent(static_cast<size_t>(T * (kvl + rope)));
  copy_columns(qkv_a.data(), A, q_lora, T, kvl + rope, latent.data(), kvl + rope);
  for (int64_t t = 0; t < T; ++t) {
    float* row = latent.data() + t * (kvl + rope);
    kernels::rms_norm(row, w.kv_a_norm.data(), 1, kvl, eps, row);
    const int32_t pos = in.positions[static_cast<size_t>(t)];
    if (pos < 0 || pos >= rope_.max_positions()) fail("position {} exceeds the model's {} positions", pos, rope_.max_positions());
    kernels::rope_interleaved(row + kvl, 1, rope, rope, rope_.cos(pos), rope_.sin(pos));
    kernels::rope_interleaved(q.data() + t * nh * qk + nope, nh, qk, rope, rope_.cos(pos), rope_.sin(pos));
  }

  // Store the new latents, then attend per sequence: pure prefill decompresses K/V (normal
  // path); a sequence with a cached prefix attends in latent space (absorbed path).
  float* kv_layer = kv.layer(layer);
  std::vector<float> o(static_cast<size_t>(T * nh * v));  // [T, nh, v]
  int64_t row = 0;
  for (const SequenceStep& s : in.seqs) {
    for (int64_t j = 0; j < s.n_new; ++j) {
      const int32_t slot = s.kv_slots[static_cast<size_t>(s.n_cached + j)];
      std::copy_n(latent.data() + (row + j) * (kvl + rope), kvl + rope, kv_layer + slot * (kvl + rope));
    }
    if (s.n_cached == 0) {
      attend_normal(w, s, q.data() + row * nh * qk, latent.data() + row * (kvl + rope), o.data() + row * nh * v);
    } else {
      attend_absorbed(w, s, q.data() + row * nh * qk, kv_layer, o.data() + row * nh * v);
    }
    row += s.n_new;
  }
  // Output projection of this rank's heads: [T, nh*v] -> [T, H] partial sums.
  linear(FlopKind::O, o.data(), T, w.o, out);
}

// Normal path: K/V decompressed from c_kv by kv_b; causal MHA with head dim nope+rope, value dim v.
void DeepseekModel::attend_normal(const AttentionWeights& w, const SequenceStep& s, const float* q,
                                  const float* latent, float* o) {
  const int64_t n = s.n_new, nh = heads_.size(), kvl = cfg_.kv_lora_rank, rope = cfg_.qk_rope_head_dim;
  const int64_t nope = cfg_.qk_nope_head_dim, qk = cfg_.qk_head_dim(), v = cfg_.v_head_dim;
  std::vector<float> c_kv(static_cast<size_t>(n * kvl)), kv_b(static_cast<size_t>(n * nh * (nope + v)));
  copy_columns(latent, kvl + rope, 0, n, kvl, c_kv.data(), kvl);
  linear(FlopKind::KvB, c_kv.data(), n, w.kv_b, kv_b.data());  // [n, nh, nope + v]

  std::vector<float> k(static_cast<size_t>(n * nh * qk)), vv(static_cast<size_t>(n * nh * v));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < nh; ++h) {
      const float* src = kv_b.data() + (t * nh + h) * (nope + v);
      float* kh = k.data() + (t * nh + h) * qk;
      std::copy_n(src, nope, kh);
      std::copy_n(latent + t * (kvl + rope) + kvl, rope, kh + nope);  // k_pe is shared by all heads
      std::copy_n(src + nope, v, vv.data() + (t * nh + h) * v);
    }
  }
  flops_[static_cast<size_t>(FlopKind::Attention)] += static_cast<double>(n * (n + 1) * nh * (qk + v));
  kernels::mla_attention_prefill({n, nh, qk, v, static_cast<float>(cfg_.softmax_scale())}, q, k.data(), vv.data(), o);
}

// Absorbed path: q_nope·W_UK turns each head's query into latent space, attention runs as MQA
// with one KV head of dim kvl+rope over the cached latents, and W_UV maps the result back.
void DeepseekModel::attend_absorbed(const AttentionWeights& w, const SequenceStep& s, const float* q,
                                    const float* kv_layer, float* o) {
  const int64_t n = s.n_new, nh = heads_.size(), kvl = cfg_.kv_lora_rank, rope = cfg_.qk_rope_head_dim;
  const int64_t nope = cfg_.qk_nope_head_dim, qk = cfg_.qk_head_dim(), v = cfg_.v_head_dim;
  const int64_t n_kv = s.n_cached + n;
  std::vector<float> q_abs(static_cast<size_t>(n * nh * (kvl + rope))), q_nope(static_cast<size_t>(n * nope));
  std::vector<float> q_lat(static_cast<size_t>(n * kvl));
  for (int64_t h = 0; h < nh; ++h) {
    copy_columns(q, nh * qk, h * qk, n, nope, q_nope.data(), nope);
    linear(FlopKind::Absorb, q_nope.data(), n, w.uk[static_cast<size_t>(h)], q_lat.data());  // [n, kvl]
    copy_columns(q_lat.data(), kvl, 0, n, kvl, q_abs.data() + h * (kvl + rope), nh * (kvl + rope));
    copy_columns(q, nh * qk, h * qk + nope, n, rope, q_abs.data() + h * (kvl + rope) + kvl, nh * (kvl + rope));
  }
  std::vector<float> o_lat(static_cast<size_t>(n * nh * kvl));  // [n, nh, kvl]
  flops_[static_cast<size_t>(FlopKind::Attention)] += 2.0 * static_cast<double>(n * n_kv * nh * (2 * kvl + rope));
  kernels::mla_attention_absorbed({n, nh, kvl, rope, n_kv, static_cast<float>(cfg_.softmax_scale())}, q_abs.data(),
                                  kv_layer, s.kv_slots.data(), o_lat.data());
  std::vector<float> lat_h(static_cast<size_t>(n * kvl)), o_h(static_cast<size_t>(n * v));
  for (int64_t h = 0; h < nh; ++h) {
    copy_columns(o_lat.data(), nh * kvl, h * kvl, n, kvl, lat_h.data(), kvl);
    linear(FlopKind::Absorb, lat_h.data(), n, w.uv[static_cast<size_t>(h)], o_h.data());  // [n, v]
    copy_columns(o_h.data(), v, 0, n, v, o + h * v, nh * v);
  }
}

// SwiGLU: down(silu(gate(x)) * up(x)), gate and up in one GEMM. out [rows, H] is overwritten.
void DeepseekModel::mlp(const MlpWeights& w, const float* x, int64_t rows, float* out, FlopKind kind) {
  const int64_t inter = w.gate_up.rows() / 2;
  std::vector<float> gate_up(static_cast<size_t>(rows * 2 * inter)), act(static_cast<size_t>(rows * inter));
  linear(kind, x, rows, w.gate_up, gate_up.data());
  kernels::silu_mul(gate_up.data(), rows, inter, act.data());
  linear(kind, act.data(), rows, w.down, out);
}

// DeepSeekMoE: each token picks top_k routed experts; out = Σ w_k · expert_k(x) + shared(x).
// Tokens are grouped by expert so each expert's weights stream once per step.
void DeepseekModel::moe(const MoeWeights& w, const float* x, int64_t rows, float* out) {
  const int64_t H = cfg_.hidden_size, E = cfg_.n_routed_experts, k = cfg_.router.top_k;
  std::vector<float> router_logits(static_cast<size_t>(rows * E));
  linear(FlopKind::Router, x, rows, w.router, router_logits.data());
  kernels::RouterSpec spec = cfg_.router;
  spec.correction_bias = w.correction_bias.empty() ? nullptr : w.correction_bias.data();
  std::vector<int32_t> ids(static_cast<size_t>(rows * k));
  std::vector<float> weights(ids.size());
  for (int64_t t = 0; t < rows; ++t) {
    kernels::route(router_logits.data() + t * E, spec, ids.data() + t * k, weights.data() + t * k);
  }

  std::vector<std::vector<int64_t>> picks(w.experts.size());  // per local expert: indices into ids
  for (int64_t i = 0; i < rows * k; ++i) {
    const int64_t local = ids[static_cast<size_t>(i)] - w.first_local_expert;
    if (local >= 0 && local < static_cast<int64_t>(w.experts.size())) picks[static_cast<size_t>(local)].push_back(i);
  }
  std::vector<float> xe, ye;
  for (size_t e = 0; e < w.experts.size(); ++e) {
    const auto& pick = picks[e];
    if (pick.empty()) continue;
    const int64_t n = static_cast<int64_t>(pick.size());
    xe.resize(static_cast<size_t>(n * H));
    ye.resize(xe.size());
    for (int64_t j = 0; j < n; ++j) std::copy_n(x + (pick[static_cast<size_t>(j)] / k) * H, H, xe.data() + j * H);
    mlp(w.experts[e], xe.data(), n, ye.data(), FlopKind::Experts);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t i = pick[static_cast<size_t>(j)];
      const float g = weights[static_cast<size_t>(i)];
      float* dst = out + (i / k) * H;
      for (int64_t c = 0; c < H; ++c) dst[c] += g * ye[static_cast<size_t>(j * H + c)];
    }
  }
  if (w.shared) {
    std::vector<float> shared(static_cast<size_t>(rows * H));
    mlp(*w.shared, x, rows, shared.data(), FlopKind::Mlp);
    for (int64_t i = 0; i < rows * H; ++i) out[i] += shared[static_cast<size_t>(i)];
  }
}

std::vector<float> DeepseekModel::logits(const float* x, const std::vector<int64_t>& rows, StepComm& comm) {
  const int64_t H = cfg_.hidden_size, R = static_cast<int64_t>(rows.size());
  std::vector<float> h(static_cast<size_t>(R * H));
  for (int64_t r = 0; r < R; ++r) std::copy_n(x + rows[static_cast<size_t>(r)] * H, H, h.data() + r * H);
  kernels::rms_norm(h.data(), final_norm_.data(), R, H, static_cast<float>(cfg_.rms_norm_eps), h.data());
  std::vector<float> shard(static_cast<size_t>(R * vocab_.size())), full(static_cast<size_t>(R * cfg_.vocab_size));
  linear(FlopKind::LmHead, h.data(), R, lm_head_, shard.data());
  comm.gather_vocab(shard.data(), R, cfg_.vocab_size, full.data());
  return full;
}

}  // namespace mlaserve::model
