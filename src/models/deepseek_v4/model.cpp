#include "models/deepseek_v4/model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/error.h"
#include "core/scratch.h"
#include "models/deepseek_v4/hyper_connections.h"
#include "models/deepseek_v4/kv_store.h"
#include "models/deepseek_v4/load.h"

namespace mlaserve::models::deepseek_v4 {

namespace {

const V4Config& checked(const V4Config& cfg, const model::RankLayout& layout) {
  check_layout(cfg, layout);
  return cfg;
}

// Every group's token ids in the MoE's row order (0 for a padding row).
std::vector<int32_t> step_tokens(const std::vector<int32_t>& tokens, model::StepComm& comm) {
  std::vector<float> local(tokens.size()), all;
  std::transform(tokens.begin(), tokens.end(), local.begin(),
                 [](int32_t id) { return static_cast<float>(id); });
  comm.gather_groups(local.data(), static_cast<int64_t>(local.size()), 1, all);
  std::vector<int32_t> ids(all.size());
  std::transform(all.begin(), all.end(), ids.begin(),
                 [](float id) { return static_cast<int32_t>(id); });
  return ids;
}

// The step's sequences, each over the cache cache_of gives it (the decoder's or the MTP block's).
template <typename CacheOf>
std::vector<SequenceInput> sequence_inputs(const model::StepInput& in, CacheOf cache_of) {
  std::vector<SequenceInput> seqs;
  size_t row = 0;
  for (const model::SequenceStep& s : in.seqs) {
    seqs.push_back({std::span(in.tokens).subspan(row, static_cast<size_t>(s.n_new)), cache_of(s)});
    row += static_cast<size_t>(s.n_new);
  }
  return seqs;
}

}  // namespace

struct DeepseekV4Model::StepRows {
  std::vector<int32_t> tokens;
  std::vector<SequenceRows> rows;
  std::vector<int32_t> moe_tokens;
  int64_t n() const { return static_cast<int64_t>(tokens.size()); }
};

DeepseekV4Model::DeepseekV4Model(const std::filesystem::path& dir, model::WeightFormat format,
                                 const model::RankLayout& layout, bool with_mtp)
    : cfg_(checked(V4Config::load(dir), layout)),
      shards_(shards(cfg_, layout)),
      attn_tp_size_(layout.attn_tp_size),
      info_(model::model_info("deepseek_v4", cfg_)),
      format_(model::resolve_weight_format(format, cfg_.fp8_block_quantized)),
      w_(load_weights(dir, cfg_, format_, layout, with_mtp)),
      window_rope_(cfg_, false),
      compress_rope_(cfg_, true) {
  info_.mtp_input_width = cfg_.hc_mult * cfg_.hidden_size;
}

SequenceCache DeepseekV4Model::new_cache(KvDtype dtype) const {
  return new_sequence_cache(cfg_, dtype, new_entry_pools(cfg_, dtype));
}

std::unique_ptr<model::KvStore> DeepseekV4Model::new_kv_store(int64_t capacity_tokens,
                                                              KvDtype dtype) const {
  check_row_dtype(dtype);
  return std::make_unique<V4KvStore>(cfg_, capacity_tokens, dtype, has_mtp());
}

std::string DeepseekV4Model::weight_format_description() const {
  const char* dtype = kernels::weight_type_name(format_.dtype);
  if (format_.quantization != model::Quantization::Fp8)
    return fmt::format("{} weights; float32 router", dtype);
  return fmt::format(
      "fp8_e4m3 linear layers (128x128 block scales){}; {} activations and other weights; "
      "float32 router",
      cfg_.fp4_experts ? ", mxfp4 routed experts (e2m1, a power-of-two scale per 32)" : "", dtype);
}

std::vector<float> DeepseekV4Model::forward(const model::StepInput& in, model::KvStore& kv,
                                            model::StepComm& comm,
                                            std::vector<float>* final_hidden) {
  auto& store = static_cast<V4KvStore&>(kv);
  const std::vector<SequenceInput> seqs =
      sequence_inputs(in, [&store](const model::SequenceStep& s) { return &store.sequence(s); });
  return logits(hidden(seqs, comm, final_hidden), in.logit_rows, comm);
}

std::vector<float> DeepseekV4Model::mtp_forward(const model::StepInput& in,
                                                const float* final_hidden, model::KvStore& kv,
                                                model::StepComm& comm,
                                                std::vector<float>* head_hidden) {
  if (!w_.mtp) fail("internal: mtp_forward without the MTP block loaded");
  const MtpWeights& m = *w_.mtp;
  auto& store = static_cast<V4KvStore&>(kv);
  const std::vector<SequenceInput> seqs = sequence_inputs(
      in, [&store](const model::SequenceStep& s) { return &store.mtp_sequence(s); });
  const StepRows step = step_rows(seqs, comm);
  const int64_t H = cfg_.hidden_size, hc = cfg_.hc_mult, n = step.n();
  const auto eps = static_cast<float>(cfg_.rms_norm_eps);
  // X [n, hc, H] = h_proj(hnorm(X_i)) per stream, plus e_proj(enorm(embed(t_{i+1}))) [n, H].
  float* normed = take(buf_.mtp_streams, n * hc * H);
  kernels::rms_norm(final_hidden, m.hnorm.data(), n * hc, H, eps, normed);
  float* X = take(buf_.streams, n * hc * H);
  linear(FlopKind::Mtp, normed, n * hc, m.h_proj, X);
  float* e = take(buf_.embedded, n * H);
  model::embed_vocab_parallel(w_.embed, shards_.vocab, cfg_.vocab_size, in.tokens, e, comm);
  kernels::rms_norm(e, m.enorm.data(), n, H, eps, e);
  float* projected = take(buf_.y, n * H);
  linear(FlopKind::Mtp, e, n, m.e_proj, projected);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < hc; ++i) {
      float* xs = X + (t * hc + i) * H;
      for (int64_t k = 0; k < H; ++k) xs[k] += projected[t * H + k];
    }
  }
  layer(m.block, cfg_.mtp_layer(), step, X, comm);
  for (const SequenceRows& s : step.rows) s.cache->n_tokens += s.n;
  if (head_hidden) {
    head_hidden->clear();
    for (const int64_t r : in.logit_rows)
      head_hidden->insert(head_hidden->end(), X + r * hc * H, X + (r + 1) * hc * H);
  }
  return logits(head_input(m.hc_head, m.norm, X, n), in.logit_rows, comm);
}

void DeepseekV4Model::embed_streams(const std::vector<int32_t>& tokens, model::StepComm& comm,
                                    float* X) const {
  const int64_t H = cfg_.hidden_size, hc = cfg_.hc_mult, n = static_cast<int64_t>(tokens.size());
  float* rows = take(buf_.embedded, n * H);
  model::embed_vocab_parallel(w_.embed, shards_.vocab, cfg_.vocab_size, tokens, rows, comm);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < hc; ++i) std::copy_n(rows + t * H, H, X + (t * hc + i) * H);
  }
}

std::vector<float> DeepseekV4Model::forward(const std::vector<int32_t>& tokens,
                                            SequenceCache& cache) const {
  const SequenceInput one{tokens, &cache};
  return forward(std::span(&one, 1));
}

std::vector<float> DeepseekV4Model::forward(std::span<const SequenceInput> seqs) const {
  model::SingleRankComm alone;
  const std::vector<float> h = hidden(seqs, alone);
  std::vector<int64_t> rows(h.size() / static_cast<size_t>(cfg_.hidden_size));
  std::iota(rows.begin(), rows.end(), 0);
  return logits(h, rows, alone);
}

std::vector<float> DeepseekV4Model::logits(const std::vector<float>& h,
                                           std::span<const int64_t> rows,
                                           model::StepComm& comm) const {
  const int64_t H = cfg_.hidden_size, m = static_cast<int64_t>(rows.size());
  float* picked = take(buf_.head_in, m * H);
  for (int64_t i = 0; i < m; ++i)
    std::copy_n(h.data() + rows[static_cast<size_t>(i)] * H, H, picked + i * H);
  float* shard = take(buf_.head_out, m * w_.head.rows());
  linear(FlopKind::Head, picked, m, w_.head, shard);
  std::vector<float> out(static_cast<size_t>(m * cfg_.vocab_size));
  comm.gather_vocab(shard, m, cfg_.vocab_size, out.data());
  return out;
}

void DeepseekV4Model::moe_exchange(const MoeWeights& w, int64_t layer, const float* x,
                                   const std::vector<int32_t>& step_tokens, int64_t n,
                                   model::StepComm& comm, float* out) const {
  const int64_t H = cfg_.hidden_size;
  std::vector<float>& all = buf_.moe_in;
  comm.gather_groups(x, n, H, all);
  const int64_t N = static_cast<int64_t>(all.size()) / H;
  float* partial = take(buf_.moe_out, N * H);
  moe(w, layer, all.data(), step_tokens.data(), N, partial);
  comm.reduce_to_group(partial, n, H, out);
}

DeepseekV4Model::StepRows DeepseekV4Model::step_rows(std::span<const SequenceInput> seqs,
                                                     model::StepComm& comm) const {
  StepRows step;
  for (const SequenceInput& s : seqs) {
    const auto n = static_cast<int64_t>(s.tokens.size());
    if (s.cache->n_tokens + n > cfg_.max_position_embeddings) {
      fail("{} positions exceed max_position_embeddings {}", s.cache->n_tokens + n,
           cfg_.max_position_embeddings);
    }
    step.rows.push_back({step.n(), n, s.cache->n_tokens, s.cache});
    step.tokens.insert(step.tokens.end(), s.tokens.begin(), s.tokens.end());
  }
  // Each row's RoPE angles in both bases, once per step (every layer of a kind reads the same).
  const int64_t n = step.n();
  float* window_angles = take(buf_.window_angles, n * window_rope_.angle_floats());
  float* compress_angles = take(buf_.compress_angles, n * compress_rope_.angle_floats());
  for (const SequenceRows& s : step.rows) {
    for (int64_t r = s.row; r < s.row + s.n; ++r) {
      const int64_t pos = s.first + r - s.row;
      window_rope_.angles(pos, window_angles + r * window_rope_.angle_floats());
      compress_rope_.angles(pos, compress_angles + r * compress_rope_.angle_floats());
    }
  }
  // The token ids of every group's rows, in the MoE's row order (its hash-routed layers read
  // them): gathered once per step as float32 values (exact: check_layout holds ids below 2^24).
  step.moe_tokens = step_tokens(step.tokens, comm);
  return step;
}

void DeepseekV4Model::layer(const LayerWeights& w, int64_t l, const StepRows& step, float* X,
                            model::StepComm& comm) const {
  const int64_t H = cfg_.hidden_size, n = step.n();
  const auto eps = static_cast<float>(cfg_.rms_norm_eps);
  // The sublayers' input and output.
  float* x = take(buf_.x, n * H);
  float* y = take(buf_.y, n * H);
  HcMix mix;
  comm.begin_layer(l);
  hc_pre(cfg_, w.hc_attn, X, n, x, mix);
  kernels::rms_norm(x, w.attn_norm.data(), n, H, eps, x);
  attention(w, l, x, step.rows, n, comm, y);
  hc_post(cfg_, mix, y, n, X);

  hc_pre(cfg_, w.hc_ffn, X, n, x, mix);
  kernels::rms_norm(x, w.ffn_norm.data(), n, H, eps, x);
  moe_exchange(w.ffn, l, x, step.moe_tokens, n, comm, y);
  hc_post(cfg_, mix, y, n, X);
}

std::vector<float> DeepseekV4Model::hidden(std::span<const SequenceInput> seqs,
                                           model::StepComm& comm,
                                           std::vector<float>* streams) const {
  const StepRows step = step_rows(seqs, comm);
  const int64_t n = step.n(), width = cfg_.hc_mult * cfg_.hidden_size;
  float* X = take(buf_.streams, n * width);  // the residual streams [n, hc, H]
  embed_streams(step.tokens, comm, X);
  for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l)
    layer(w_.layers[static_cast<size_t>(l)], l, step, X, comm);
  for (const SequenceRows& s : step.rows) s.cache->n_tokens += s.n;
  if (streams) streams->assign(X, X + n * width);
  return head_input(w_.hc_head, w_.norm, X, n);
}

std::vector<float> DeepseekV4Model::head_input(const HcWeights& hc_head_weights,
                                               const std::vector<float>& norm, const float* X,
                                               int64_t n) const {
  const int64_t H = cfg_.hidden_size;
  float* x = take(buf_.x, n * H);
  hc_head(cfg_, hc_head_weights, X, n, x);
  kernels::rms_norm(x, norm.data(), n, H, static_cast<float>(cfg_.rms_norm_eps), x);
  return {x, x + n * H};
}

void DeepseekV4Model::linear(FlopKind kind, const float* x, int64_t m, const kernels::Weight& w,
                             float* y) const {
  flops_[static_cast<size_t>(kind)] +=
      2.0 * static_cast<double>(m) * static_cast<double>(w.rows() * w.cols());
  kernels::matmul(x, m, w, y);
}

std::vector<std::pair<std::string, double>> DeepseekV4Model::flop_counts() const {
  static constexpr const char* kNames[] = {"projections",   "queries", "attention",
                                           "output",        "router",  "experts",
                                           "shared_expert", "head",    "mtp_projection"};
  static_assert(std::size(kNames) == static_cast<size_t>(FlopKind::Count));
  std::vector<std::pair<std::string, double>> out;
  for (size_t k = 0; k < std::size(kNames); ++k) out.emplace_back(kNames[k], flops_[k]);
  return out;
}

size_t StepBuffers::bytes() const {
  size_t total = 0;
  const auto add = [&total](const auto&... buffers) {
    ((total += buffers.capacity() * sizeof(buffers[0])), ...);
  };
  add(streams, x, y, embedded, qr, q, kv, compressor_kv, compressor_score, index_kv, index_score);
  add(index_q, index_w, window_angles, compress_angles, o, group_in, group_out, z, token_shard);
  add(moe_in, moe_out);
  add(router_logits, pick_weights, expert_x, expert_y, gate, up, pick_ids, expert_begin);
  add(expert_next, pick_order, head_in, head_out, mtp_streams);
  return total;
}

// The bounds of each take() of the forward for T group rows, N MoE rows and R rows of logits
// (each routed expert sees at most N rows: a row picks an expert once).
size_t DeepseekV4Model::reserve_step_buffers(int64_t T, int64_t N, int64_t R) {
  StepBuffers& b = buf_;
  const int64_t H = cfg_.hidden_size, d = cfg_.head_dim, nh = shards_.heads().size();
  const int64_t ih = cfg_.index_n_heads, id = cfg_.index_head_dim, k = cfg_.router.top_k;
  const auto hold = [](auto& buffer, int64_t n) { take(buffer, n); };
  for (auto* v : {&b.x, &b.y, &b.embedded}) hold(*v, T * H);
  hold(b.streams, T * cfg_.hc_mult * H);
  if (has_mtp()) hold(b.mtp_streams, T * cfg_.hc_mult * H);
  hold(b.qr, T * cfg_.q_lora_rank);
  for (auto* v : {&b.q, &b.o}) hold(*v, T * nh * d);
  hold(b.kv, T * d);
  for (auto* v : {&b.compressor_kv, &b.compressor_score}) hold(*v, T * 2 * d);
  for (auto* v : {&b.index_kv, &b.index_score}) hold(*v, T * 2 * id);
  hold(b.index_q, T * ih * id);
  hold(b.index_w, T * ih);
  hold(b.window_angles, T * window_rope_.angle_floats());
  hold(b.compress_angles, T * compress_rope_.angle_floats());
  hold(b.group_in, T * shards_.heads_per_group * d);
  hold(b.group_out, T * cfg_.o_lora_rank);
  hold(b.z, T * shards_.o_groups.size() * cfg_.o_lora_rank);
  if (attn_tp_size_ > 1) {  // dp_linear: a token shard of the widest replicated projection
    const int64_t widest = std::max({cfg_.q_lora_rank, 2 * d, 2 * id, ih});
    hold(b.token_shard, (T + attn_tp_size_ - 1) / attn_tp_size_ * widest);
  }
  for (auto* v : {&b.moe_in, &b.moe_out, &b.expert_x, &b.expert_y}) hold(*v, N * H);
  hold(b.router_logits, N * cfg_.n_routed_experts);
  hold(b.pick_weights, N * k);
  hold(b.pick_ids, N * k);
  hold(b.pick_order, N * k);
  hold(b.expert_begin, cfg_.n_routed_experts + 1);
  hold(b.expert_next, cfg_.n_routed_experts);
  int64_t inter = 0;  // the widest expert slice held
  for (const LayerWeights& l : w_.layers) {
    if (l.ffn.shared) inter = std::max(inter, l.ffn.shared->w1.rows());
    if (!l.ffn.experts.empty()) inter = std::max(inter, l.ffn.experts.front().w1.rows());
  }
  for (auto* v : {&b.gate, &b.up}) hold(*v, N * inter);
  hold(b.head_in, R * H);
  hold(b.head_out, R * w_.head.rows());
  return b.bytes();
}

}  // namespace mlaserve::models::deepseek_v4
