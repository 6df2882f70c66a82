// DeepSeek-V4's MoE: every layer routes each token to top_k experts (by score, or in the first
// num_hash_layers by a table from token id) plus the shared expert; SwiGLU clamped at
// swiglu_limit in both (elementwise over the intermediate columns, so a slice of them computes
// its share exactly). Every rank routes every row alike and computes its experts' share.
#include <algorithm>
#include <cmath>

#include "core/scratch.h"
#include "models/deepseek_v4/model.h"

namespace mlaserve::models::deepseek_v4 {

// out [m, H] = w2 · (silu(min(g, L)) · clamp(u, -L, L)), g = w1 x, u = w3 x (L = 0: no clamp),
// its products counted as `kind`.
void DeepseekV4Model::expert_forward(const ExpertWeights& w, const float* x, int64_t m,
                                     FlopKind kind, float* out) const {
  const auto limit = static_cast<float>(cfg_.swiglu_limit);
  const int64_t I = w.w1.rows();
  float* g = take(buf_.gate, m * I);
  float* u = take(buf_.up, m * I);
  linear(kind, x, m, w.w1, g);
  linear(kind, x, m, w.w3, u);
  for (int64_t i = 0; i < m * I; ++i) {
    float gate = g[i], up = u[i];
    if (limit > 0) {
      gate = std::min(gate, limit);
      up = std::clamp(up, -limit, limit);
    }
    g[i] = gate / (1.0f + std::exp(-gate)) * up;
  }
  linear(kind, g, m, w.w2, out);
}

void DeepseekV4Model::moe(const MoeWeights& w, int64_t layer, const float* x, const int32_t* tokens,
                          int64_t n, float* out) const {
  const int64_t H = cfg_.hidden_size, E = cfg_.n_routed_experts, k = cfg_.router.top_k;
  StepBuffers& b = buf_;
  float* logits = take(b.router_logits, n * E);
  linear(FlopKind::Router, x, n, w.gate, logits);
  int32_t* ids = take(b.pick_ids, n * k);
  float* weights = take(b.pick_weights, n * k);
  kernels::RouterSpec spec = cfg_.router;
  spec.correction_bias = w.bias.data();
  for (int64_t t = 0; t < n; ++t) {
    const float* l = logits + t * E;
    int32_t* chosen = ids + t * k;
    if (cfg_.hash_routed(layer)) {
      std::copy_n(w.tid2eid.data() + static_cast<int64_t>(tokens[t]) * k, k, chosen);
      kernels::route_given(l, spec, chosen, weights + t * k);
    } else {
      kernels::route(l, spec, chosen, weights + t * k);
    }
  }
  // Shared expert for every row (this rank's slice), then each routed expert this rank holds
  // (its slice, or the whole expert under EP) over the rows that chose it.
  std::fill(out, out + n * H, 0.0f);
  if (w.shared) expert_forward(*w.shared, x, n, FlopKind::SharedExpert, out);
  // The picks grouped by expert (a counting sort): expert e's are order[begin[e], begin[e + 1]).
  std::vector<int64_t>&begin = b.expert_begin, &next = b.expert_next, &order = b.pick_order;
  begin.assign(static_cast<size_t>(E + 1), 0);
  for (int64_t i = 0; i < n * k; ++i) ++begin[static_cast<size_t>(ids[i]) + 1];
  for (int64_t e = 0; e < E; ++e)
    begin[static_cast<size_t>(e + 1)] += begin[static_cast<size_t>(e)];
  order.resize(static_cast<size_t>(n * k));
  next.assign(begin.begin(), begin.end() - 1);
  for (int64_t i = 0; i < n * k; ++i)
    order[static_cast<size_t>(next[static_cast<size_t>(ids[i])]++)] = i;
  for (int64_t e = shards_.experts.begin; e < shards_.experts.end; ++e) {
    const int64_t first = begin[static_cast<size_t>(e)],
                  m = begin[static_cast<size_t>(e + 1)] - first;
    if (m == 0) continue;
    float* rows = take(b.expert_x, m * H);
    float* y = take(b.expert_y, m * H);
    for (int64_t i = 0; i < m; ++i)
      std::copy_n(x + order[static_cast<size_t>(first + i)] / k * H, H, rows + i * H);
    expert_forward(w.experts[static_cast<size_t>(e - shards_.experts.begin)], rows, m,
                   FlopKind::Experts, y);
    for (int64_t i = 0; i < m; ++i) {
      const int64_t pick = order[static_cast<size_t>(first + i)], row = pick / k;
      for (int64_t c = 0; c < H; ++c) out[row * H + c] += weights[pick] * y[i * H + c];
    }
  }
}

}  // namespace mlaserve::models::deepseek_v4
