#include "models/deepseek_v4/model.h"

#include <cstring>

#include "core/error.h"
#include "core/numeric.h"
#include "models/deepseek_v4/hyper_connections.h"
#include "models/deepseek_v4/load.h"

namespace mlaserve::models::deepseek_v4 {

DeepseekV4Model::DeepseekV4Model(const std::filesystem::path& dir, model::WeightFormat format)
    : cfg_(V4Config::load(dir)),
      w_(load_weights(dir, cfg_, model::resolve_weight_format(format, cfg_.fp8_block_quantized))),
      window_rope_(cfg_, false),
      compress_rope_(cfg_, true) {}

SequenceCache DeepseekV4Model::new_cache() const {
  SequenceCache cache;
  cache.layers.resize(static_cast<size_t>(cfg_.num_hidden_layers));
  for (LayerCache& layer : cache.layers)
    layer.window.resize(static_cast<size_t>(cfg_.sliding_window * cfg_.head_dim));
  return cache;
}

namespace {

// The embedding rows of tokens, copied into each of the hc streams: X [n, hc, H].
std::vector<float> embed_streams(const V4Config& c, const kernels::Weight& table,
                                 const std::vector<int32_t>& tokens) {
  const int64_t H = c.hidden_size, hc = c.hc_mult;
  std::vector<float> x(tokens.size() * static_cast<size_t>(hc * H));
  for (size_t t = 0; t < tokens.size(); ++t) {
    if (tokens[t] < 0 || tokens[t] >= c.vocab_size)
      fail("token id {} is outside the vocabulary (0..{})", tokens[t], c.vocab_size - 1);
    float* row = x.data() + t * static_cast<size_t>(hc * H);
    for (int64_t k = 0; k < H; ++k) row[k] = table.at(tokens[t], k);
    for (int64_t i = 1; i < hc; ++i) std::memcpy(row + i * H, row, static_cast<size_t>(H) * 4);
  }
  return x;
}

}  // namespace

std::vector<float> DeepseekV4Model::forward(const std::vector<int32_t>& tokens,
                                            SequenceCache& cache) const {
  const SequenceInput one{tokens, &cache};
  return forward(std::span(&one, 1));
}

std::vector<float> DeepseekV4Model::forward(std::span<const SequenceInput> seqs) const {
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
  std::vector<float> X = embed_streams(cfg_, w_.embed, tokens);
  std::vector<float> x(static_cast<size_t>(n * H)), y(x.size());
  HcMix mix;
  for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l) {
    const LayerWeights& w = w_.layers[static_cast<size_t>(l)];
    hc_pre(cfg_, w.hc_attn, X.data(), n, x.data(), mix);
    kernels::rms_norm(x.data(), w.attn_norm.data(), n, H, eps, x.data());
    attention(w, l, x.data(), rows, n, y.data());
    hc_post(cfg_, mix, y.data(), n, X.data());

    hc_pre(cfg_, w.hc_ffn, X.data(), n, x.data(), mix);
    kernels::rms_norm(x.data(), w.ffn_norm.data(), n, H, eps, x.data());
    moe(w.ffn, l, x.data(), tokens.data(), n, y.data());
    hc_post(cfg_, mix, y.data(), n, X.data());
  }
  for (const SequenceRows& s : rows) s.cache->n_tokens += s.n;
  hc_head(cfg_, w_.hc_head, X.data(), n, x.data());
  kernels::rms_norm(x.data(), w_.norm.data(), n, H, eps, x.data());
  std::vector<float> logits(static_cast<size_t>(n * cfg_.vocab_size));
  kernels::matmul(x.data(), n, w_.head, logits.data());
  return logits;
}

}  // namespace mlaserve::models::deepseek_v4
