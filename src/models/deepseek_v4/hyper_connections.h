// Manifold-constrained hyper-connections: the residual is hc streams per token ([T, hc, H]).
// Before a sublayer, hc_pre mixes them into its input with weights `pre` and computes how its
// output goes back (`post`) and how the streams remix (`comb`, made doubly stochastic by
// Sinkhorn iterations); hc_post applies both. hc_head mixes them once more for the logits.
#pragma once

#include <cstdint>
#include <vector>

#include "models/deepseek_v4/config.h"
#include "models/deepseek_v4/weights.h"

namespace mlaserve::models::deepseek_v4 {

// What hc_pre leaves for hc_post, per token: post [T, hc], comb [T, hc, hc] (comb[i][j]: how
// much of stream i goes to stream j).
struct HcMix {
  std::vector<float> post, comb;
};

// y [T, H] = Σ_i pre[i] · x[:, i]; fills mix. x: [T, hc, H].
void hc_pre(const V4Config& c, const HcWeights& w, const float* x, int64_t T, float* y, HcMix& mix);
// x[:, j] = post[j] · y + Σ_i comb[i][j] · x[:, i], in place. y: [T, H].
void hc_post(const V4Config& c, const HcMix& mix, const float* y, int64_t T, float* x);
// The final mix of the streams into one [T, H] row each (sigmoid weights, no Sinkhorn).
void hc_head(const V4Config& c, const HcWeights& w, const float* x, int64_t T, float* y);

// DeepSeek's Sinkhorn normalisation of one hc × hc matrix of logits, in place: a softmax per
// row plus eps, columns normalised, then (iters - 1) rounds of rows then columns, each divided
// by its sum plus eps.
void sinkhorn(float* m, int64_t hc, int64_t iters, float eps);

}  // namespace mlaserve::models::deepseek_v4
