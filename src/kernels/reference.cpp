#include "kernels/reference.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <vector>

namespace mlaserve::kernels::ref {

void matmul(const float* x, int64_t m, const Weight& w, float* y) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t n = 0; n < w.rows(); ++n) {
      float sum = 0.0f;
      for (int64_t k = 0; k < w.cols(); ++k) sum += x[i * w.cols() + k] * w.at(n, k);
      y[i * w.rows() + n] = sum;
    }
  }
}

void matmul_batch(std::span<const MatmulJob> jobs) {
  for (const MatmulJob& job : jobs) ref::matmul(job.x, job.m, *job.w, job.y);
}

void rms_norm(const float* x, const float* gamma, int64_t rows, int64_t dim, float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * dim;
    float sum_sq = 0.0f;
    for (int64_t i = 0; i < dim; ++i) sum_sq += row[i] * row[i];
    const float inv_rms = 1.0f / std::sqrt(sum_sq / static_cast<float>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) y[r * dim + i] = row[i] * inv_rms * gamma[i];
  }
}

void silu_mul(const float* gate_up, int64_t rows, int64_t inter, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* gate = gate_up + r * 2 * inter;
    const float* up = gate + inter;
    for (int64_t i = 0; i < inter; ++i) {
      out[r * inter + i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
    }
  }
}

void softmax(float* x, int64_t n) {
  const float max = *std::max_element(x, x + n);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += (x[i] = std::exp(x[i] - max));
  for (int64_t i = 0; i < n; ++i) x[i] /= sum;
}

KthLargest kth_largest(const float* x, int64_t n, int64_t k) {
  std::vector<float> values(x, x + n);
  for (float& v : values) v = std::isnan(v) ? -INFINITY : v;
  std::nth_element(values.begin(), values.begin() + (k - 1), values.end(), std::greater<>());
  const float kth = values[static_cast<size_t>(k - 1)];
  return {kth, std::count_if(values.begin(), values.end(), [&](float v) { return v > kth; })};
}

NucleusBar nucleus_bar(const float* w, int64_t n, double target) {
  std::vector<float> sorted(w, w + n);
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  double mass = 0.0;
  for (size_t i = 0; i < sorted.size(); ++i) {
    mass += sorted[i];
    if (mass < target) continue;
    const auto first_equal = std::find(sorted.begin(), sorted.end(), sorted[i]) - sorted.begin();
    return {sorted[i], static_cast<int64_t>(i) - first_equal + 1};
  }
  return {0.0f, 0};
}

int64_t first_argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) return i;
    if (x[i] > x[best]) best = i;
  }
  return best;
}

void temperature_weights(const float* logits, int64_t n, float max_logit, float temperature,
                         float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::exp((logits[i] - max_logit) / temperature);
}

void rope_interleaved(float* x, int64_t n_vectors, int64_t stride, int64_t dim,
                      const float* cos_theta, const float* sin_theta) {
  for (int64_t v = 0; v < n_vectors; ++v) {
    float* vec = x + v * stride;
    for (int64_t i = 0; i < dim / 2; ++i) {
      const float a = vec[2 * i], b = vec[2 * i + 1];
      vec[2 * i] = a * cos_theta[i] - b * sin_theta[i];
      vec[2 * i + 1] = a * sin_theta[i] + b * cos_theta[i];
    }
  }
}

namespace {

// Indices of the k largest values (ties: lower index first), in descending order of value.
std::vector<int32_t> top_k_indices(const std::vector<float>& values, int k) {
  std::vector<int32_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return values[a] > values[b]; });
  order.resize(static_cast<size_t>(k));
  return order;
}

// Keeps the topk_group best groups of `choice` (group score from group_score()) and sets the
// experts of every other group to -inf.
template <typename GroupScore>
void mask_to_best_groups(std::vector<float>& choice, const RouterSpec& spec, GroupScore score) {
  const int per_group = spec.n_experts / spec.n_group;
  std::vector<float> group_scores(static_cast<size_t>(spec.n_group));
  for (int g = 0; g < spec.n_group; ++g) {
    std::vector<float> members(choice.begin() + g * per_group,
                               choice.begin() + (g + 1) * per_group);
    group_scores[static_cast<size_t>(g)] = score(members);
  }
  std::vector<bool> keep(static_cast<size_t>(spec.n_group), false);
  for (int32_t g : top_k_indices(group_scores, spec.topk_group))
    keep[static_cast<size_t>(g)] = true;
  for (int e = 0; e < spec.n_experts; ++e) {
    if (!keep[static_cast<size_t>(e / per_group)]) {
      choice[static_cast<size_t>(e)] = -std::numeric_limits<float>::infinity();
    }
  }
}

}  // namespace

namespace {

std::vector<float> router_scores(const float* logits, const RouterSpec& spec) {
  std::vector<float> scores(logits, logits + spec.n_experts);
  switch (spec.scoring) {
    case RouterScoring::Softmax:
      softmax(scores.data(), spec.n_experts);
      break;
    case RouterScoring::Sigmoid:
      for (float& s : scores) s = 1.0f / (1.0f + std::exp(-s));
      break;
    case RouterScoring::SqrtSoftplus:  // softplus(x) = log(1 + e^x), = x to float precision past 20
      for (float& s : scores) s = std::sqrt(s > 20.0f ? s : std::log1p(std::exp(s)));
      break;
  }
  return scores;
}

// The combine weights of the chosen experts: their unbiased scores, normalised and scaled.
void combine_weights(const std::vector<float>& scores, const RouterSpec& spec,
                     const int32_t* experts, float* weights) {
  float sum = 0.0f;
  for (int i = 0; i < spec.top_k; ++i) {
    weights[i] = scores[static_cast<size_t>(experts[i])];
    sum += weights[i];
  }
  // V3 (noaux_tc): normalise if asked, then always scale. V2: normalise or scale, not both.
  const bool normalise =
      spec.norm_topk_prob && (spec.method == RouterTopk::NoauxTc || spec.top_k > 1);
  const bool scale = spec.method == RouterTopk::NoauxTc || !normalise;
  for (int i = 0; i < spec.top_k; ++i) {
    if (normalise) weights[i] /= sum + 1e-20f;
    if (scale) weights[i] *= spec.routed_scaling_factor;
  }
}

}  // namespace

void route(const float* logits, const RouterSpec& spec, int32_t* expert_ids, float* weights) {
  const std::vector<float> scores = router_scores(logits, spec);
  std::vector<float> choice = scores;
  if (spec.method == RouterTopk::NoauxTc) {
    for (int e = 0; e < spec.n_experts; ++e)
      choice[static_cast<size_t>(e)] += spec.correction_bias[e];
    mask_to_best_groups(choice, spec, [](std::vector<float> m) {  // sum of the top 2
      std::partial_sort(m.begin(), m.begin() + 2, m.end(), std::greater<float>());
      return m[0] + m[1];
    });
  } else if (spec.method == RouterTopk::GroupLimitedGreedy) {
    mask_to_best_groups(choice, spec, [](const std::vector<float>& m) {
      return *std::max_element(m.begin(), m.end());
    });
  }
  const std::vector<int32_t> chosen = top_k_indices(choice, spec.top_k);
  std::copy(chosen.begin(), chosen.begin() + spec.top_k, expert_ids);
  combine_weights(scores, spec, expert_ids, weights);
}

void route_given(const float* logits, const RouterSpec& spec, const int32_t* experts,
                 float* weights) {
  combine_weights(router_scores(logits, spec), spec, experts, weights);
}

void sink_attention(const SinkAttention& s, const float* q, const float* const* rows,
                    const float* sink, float* out) {
  std::vector<float> p(static_cast<size_t>(s.n_rows + 1));
  for (int64_t h = 0; h < s.n_heads; ++h) {
    const float* qh = q + h * s.dim;
    for (int64_t j = 0; j < s.n_rows; ++j) {
      float dot = 0.0f;
      for (int64_t k = 0; k < s.dim; ++k) dot += qh[k] * rows[j][k];
      p[static_cast<size_t>(j)] = dot * s.scale;
    }
    p[static_cast<size_t>(s.n_rows)] = sink[h];
    softmax(p.data(), s.n_rows + 1);
    float* o = out + h * s.dim;
    std::fill(o, o + s.dim, 0.0f);
    for (int64_t j = 0; j < s.n_rows; ++j)
      for (int64_t k = 0; k < s.dim; ++k) o[k] += p[static_cast<size_t>(j)] * rows[j][k];
  }
}

void mla_attention_absorbed(const AbsorbedAttention& s, const float* q, const KvRows& kv,
                            const int32_t* kv_slots, float* out) {
  const int64_t d_qk = s.d_latent + s.d_rope;
  std::vector<float> rows(static_cast<size_t>(s.n_kv * d_qk));  // the sequence's rows, decoded
  for (int64_t j = 0; j < s.n_kv; ++j) decode_kv_row(kv, kv_slots[j], rows.data() + j * d_qk);
  std::vector<float> p(static_cast<size_t>(s.n_kv));
  const bool round_q = absorbed_scores_in_bf16(s, kv);
  std::vector<float> q_rounded(static_cast<size_t>(d_qk));
  for (int64_t i = 0; i < s.n_q; ++i) {
    const int64_t visible = s.n_kv - s.n_q + i + 1;
    for (int64_t h = 0; h < s.n_heads; ++h) {
      const float* qh = q + (i * s.n_heads + h) * d_qk;
      if (round_q) {  // as the fast path's bf16 scores (ops.h)
        for (int64_t d = 0; d < d_qk; ++d)
          q_rounded[static_cast<size_t>(d)] = bf16_to_f32(f32_to_bf16(qh[d]));
        qh = q_rounded.data();
      }
      for (int64_t j = 0; j < visible; ++j) {
        const float* k = rows.data() + j * d_qk;
        float dot = 0.0f;
        for (int64_t d = 0; d < d_qk; ++d) dot += qh[d] * k[d];
        p[static_cast<size_t>(j)] = dot * s.scale;
      }
      softmax(p.data(), visible);
      float* o = out + (i * s.n_heads + h) * s.d_latent;
      std::fill(o, o + s.d_latent, 0.0f);
      for (int64_t j = 0; j < visible; ++j) {
        const float* c_kv = rows.data() + j * d_qk;
        for (int64_t d = 0; d < s.d_latent; ++d) o[d] += p[static_cast<size_t>(j)] * c_kv[d];
      }
    }
  }
}

void mla_attention_prefill(const PrefillAttention& s, const float* q, const float* k,
                           const float* v, float* out) {
  std::vector<float> p(static_cast<size_t>(s.n_tokens));
  for (int64_t i = 0; i < s.n_tokens; ++i) {
    for (int64_t h = 0; h < s.n_heads; ++h) {
      const float* qh = q + (i * s.n_heads + h) * s.d_qk;
      for (int64_t j = 0; j <= i; ++j) {
        const float* kh = k + (j * s.n_heads + h) * s.d_qk;
        float dot = 0.0f;
        for (int64_t d = 0; d < s.d_qk; ++d) dot += qh[d] * kh[d];
        p[static_cast<size_t>(j)] = dot * s.scale;
      }
      softmax(p.data(), i + 1);
      float* o = out + (i * s.n_heads + h) * s.d_v;
      std::fill(o, o + s.d_v, 0.0f);
      for (int64_t j = 0; j <= i; ++j) {
        const float* vh = v + (j * s.n_heads + h) * s.d_v;
        for (int64_t d = 0; d < s.d_v; ++d) o[d] += p[static_cast<size_t>(j)] * vh[d];
      }
    }
  }
}

void mla_attention_prefill_sparse(const PrefillAttention& s, int64_t top_k, const float* q,
                                  const float* k, const float* v, const int32_t* selected,
                                  const int32_t* counts, float* out) {
  std::vector<float> p(static_cast<size_t>(top_k));
  for (int64_t i = 0; i < s.n_tokens; ++i) {
    const int32_t* keys = selected + i * top_k;
    const int64_t n = counts[i];
    for (int64_t h = 0; h < s.n_heads; ++h) {
      const float* qh = q + (i * s.n_heads + h) * s.d_qk;
      for (int64_t j = 0; j < n; ++j) {
        const float* kh = k + (h * s.n_tokens + keys[j]) * s.d_qk;
        float dot = 0.0f;
        for (int64_t d = 0; d < s.d_qk; ++d) dot += qh[d] * kh[d];
        p[static_cast<size_t>(j)] = dot * s.scale;
      }
      softmax(p.data(), n);
      float* o = out + (i * s.n_heads + h) * s.d_v;
      std::fill(o, o + s.d_v, 0.0f);
      for (int64_t j = 0; j < n; ++j) {
        const float* vh = v + (h * s.n_tokens + keys[j]) * s.d_v;
        for (int64_t d = 0; d < s.d_v; ++d) o[d] += p[static_cast<size_t>(j)] * vh[d];
      }
    }
  }
}

// Every visible key scored into one vector, then a sort by (score descending, position).
void indexer_topk(const IndexerTopk& s, const float* q, const float* weights, const KvRows& keys,
                  const int32_t* kv_slots, int32_t* selected, int32_t* counts) {
  std::vector<float> key(static_cast<size_t>(s.head_dim)), score(static_cast<size_t>(s.n_kv));
  std::vector<int32_t> order;
  const bool round_q = indexer_scores_in_bf16(s, keys);
  std::vector<float> q_rounded(static_cast<size_t>(s.head_dim));
  for (int64_t i = 0; i < s.n_q; ++i) {
    const int64_t visible = s.n_kv - s.n_q + i + 1;
    for (int64_t j = 0; j < visible; ++j) {
      decode_kv_row(keys, kv_slots[j], key.data());
      float total = 0.0f;
      for (int64_t h = 0; h < s.n_heads; ++h) {
        const float* qh = q + (i * s.n_heads + h) * s.head_dim;
        if (round_q) {  // as the fast path's bf16 scores (ops.h)
          for (int64_t d = 0; d < s.head_dim; ++d)
            q_rounded[static_cast<size_t>(d)] = bf16_to_f32(f32_to_bf16(qh[d]));
          qh = q_rounded.data();
        }
        float dot = 0.0f;
        for (int64_t d = 0; d < s.head_dim; ++d) dot += qh[d] * key[static_cast<size_t>(d)];
        total += weights[i * s.n_heads + h] * std::max(dot, 0.0f);
      }
      score[static_cast<size_t>(j)] = total;
    }
    order.resize(static_cast<size_t>(visible));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return score[a] > score[b]; });
    const int64_t n = std::min(visible, s.top_k);
    std::sort(order.begin(), order.begin() + n);
    std::copy_n(order.begin(), n, selected + i * s.top_k);
    counts[i] = static_cast<int32_t>(n);
  }
}

}  // namespace mlaserve::kernels::ref
