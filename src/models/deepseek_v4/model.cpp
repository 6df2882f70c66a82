#include "models/deepseek_v4/model.h"

#include <fmt/format.h>

#include <cstring>
#include <numeric>

#include "core/error.h"
#include "core/scratch.h"
#include "models/deepseek_v4/hyper_connections.h"
#include "models/deepseek_v4/kv_store.h"
#include "models/deepseek_v4/load.h"

namespace mlaserve::models::deepseek_v4 {

namespace {

const V4Config& single_rank(const V4Config& cfg, const model::RankLayout& layout) {
  if (layout.tp_size != 1) {
    fail(
        "deepseek_v4 runs with --tp 1 for now (one rank per model instance; replicas are "
        "fine); its tensor-parallel and DP-attention layouts are not built yet");
  }
  return cfg;
}

}  // namespace

DeepseekV4Model::DeepseekV4Model(const std::filesystem::path& dir, model::WeightFormat format,
                                 const model::RankLayout& layout)
    : cfg_(single_rank(V4Config::load(dir), layout)),
      info_(model::model_info("deepseek_v4", cfg_)),
      format_(model::resolve_weight_format(format, cfg_.fp8_block_quantized)),
      w_(load_weights(dir, cfg_, format_)),
      window_rope_(cfg_, false),
      compress_rope_(cfg_, true) {}

SequenceCache DeepseekV4Model::new_cache(KvDtype dtype) const {
  return new_sequence_cache(cfg_, dtype);
}

std::unique_ptr<model::KvStore> DeepseekV4Model::new_kv_store(int64_t capacity_tokens,
                                                              KvDtype dtype) const {
  check_row_dtype(dtype);
  return std::make_unique<V4KvStore>(cfg_, capacity_tokens, dtype);
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
                                            model::StepComm&, std::vector<float>* final_hidden) {
  auto& store = static_cast<V4KvStore&>(kv);
  std::vector<SequenceInput> seqs;
  size_t row = 0;
  for (const model::SequenceStep& s : in.seqs) {
    seqs.push_back(
        {std::span(in.tokens).subspan(row, static_cast<size_t>(s.n_new)), &store.sequence(s)});
    row += static_cast<size_t>(s.n_new);
  }
  std::vector<float> h = hidden(seqs);
  std::vector<float> out = logits(h, in.logit_rows);
  if (final_hidden) *final_hidden = std::move(h);
  return out;
}

namespace {

// The embedding rows of tokens, copied into each of the hc streams: x [n, hc, H].
void embed_streams(const V4Config& c, const kernels::Weight& table,
                   const std::vector<int32_t>& tokens, float* x) {
  const int64_t H = c.hidden_size, hc = c.hc_mult;
  for (size_t t = 0; t < tokens.size(); ++t) {
    if (tokens[t] < 0 || tokens[t] >= c.vocab_size)
      fail("token id {} is outside the vocabulary (0..{})", tokens[t], c.vocab_size - 1);
    float* row = x + t * static_cast<size_t>(hc * H);
    for (int64_t k = 0; k < H; ++k) row[k] = table.at(tokens[t], k);
    for (int64_t i = 1; i < hc; ++i) std::memcpy(row + i * H, row, static_cast<size_t>(H) * 4);
  }
}

}  // namespace

std::vector<float> DeepseekV4Model::forward(const std::vector<int32_t>& tokens,
                                            SequenceCache& cache) const {
  const SequenceInput one{tokens, &cache};
  return forward(std::span(&one, 1));
}

std::vector<float> DeepseekV4Model::forward(std::span<const SequenceInput> seqs) const {
  const std::vector<float> h = hidden(seqs);
  std::vector<int64_t> rows(h.size() / static_cast<size_t>(cfg_.hidden_size));
  std::iota(rows.begin(), rows.end(), 0);
  return logits(h, rows);
}

std::vector<float> DeepseekV4Model::logits(const std::vector<float>& h,
                                           std::span<const int64_t> rows) const {
  const int64_t H = cfg_.hidden_size;
  thread_local std::vector<float> picked_buf;
  float* picked = take(picked_buf, static_cast<int64_t>(rows.size()) * H);
  for (size_t i = 0; i < rows.size(); ++i)
    std::copy_n(h.data() + rows[i] * H, H, picked + i * static_cast<size_t>(H));
  std::vector<float> out(rows.size() * static_cast<size_t>(cfg_.vocab_size));
  kernels::matmul(picked, static_cast<int64_t>(rows.size()), w_.head, out.data());
  return out;
}

std::vector<float> DeepseekV4Model::hidden(std::span<const SequenceInput> seqs) const {
  const int64_t H = cfg_.hidden_size;
  const auto eps = static_cast<float>(cfg_.rms_norm_eps);
  std::vector<int32_t> tokens;
  std::vector<SequenceRows> rows;
  for (const SequenceInput& s : seqs) {
    const auto n = static_cast<int64_t>(s.tokens.size());
    if (s.cache->n_tokens + n > cfg_.max_position_embeddings) {
      fail("{} positions exceed max_position_embeddings {}", s.cache->n_tokens + n,
           cfg_.max_position_embeddings);
    }
    rows.push_back({static_cast<int64_t>(tokens.size()), n, s.cache->n_tokens, s.cache});
    tokens.insert(tokens.end(), s.tokens.begin(), s.tokens.end());
  }
  const auto n = static_cast<int64_t>(tokens.size());
  // The residual streams and the sublayers' input and output: scratch kept across steps.
  thread_local std::vector<float> streams_buf, x_buf, y_buf;
  float* X = take(streams_buf, n * cfg_.hc_mult * H);
  float* x = take(x_buf, n * H);
  float* y = take(y_buf, n * H);
  embed_streams(cfg_, w_.embed, tokens, X);
  HcMix mix;
  for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l) {
    const LayerWeights& w = w_.layers[static_cast<size_t>(l)];
    hc_pre(cfg_, w.hc_attn, X, n, x, mix);
    kernels::rms_norm(x, w.attn_norm.data(), n, H, eps, x);
    attention(w, l, x, rows, n, y);
    hc_post(cfg_, mix, y, n, X);

    hc_pre(cfg_, w.hc_ffn, X, n, x, mix);
    kernels::rms_norm(x, w.ffn_norm.data(), n, H, eps, x);
    moe(w.ffn, l, x, tokens.data(), n, y);
    hc_post(cfg_, mix, y, n, X);
  }
  for (const SequenceRows& s : rows) s.cache->n_tokens += s.n;
  hc_head(cfg_, w_.hc_head, X, n, x);
  kernels::rms_norm(x, w_.norm.data(), n, H, eps, x);
  return {x, x + n * H};
}

}  // namespace mlaserve::models::deepseek_v4
