#include "sampling/reference.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace mlaserve::sampling {

std::vector<float> reference_filtered_probs(std::span<const float> logits,
                                            const SamplingParams& params) {
  const size_t vocab = logits.size();
  std::vector<float> result(vocab, 0.0f);
  if (params.greedy()) {
    result[std::max_element(logits.begin(), logits.end()) - logits.begin()] = 1.0f;
    return result;
  }

  // softmax(logits / T)
  const double max_logit = *std::max_element(logits.begin(), logits.end());
  std::vector<double> probs(vocab);
  double sum = 0.0;
  for (size_t i = 0; i < vocab; ++i) {
    sum += probs[i] = std::exp((logits[i] - max_logit) / params.temperature);
  }
  for (double& p : probs) p /= sum;

  // All tokens, most probable first; the stable sort keeps lower ids first among equals.
  std::vector<size_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return probs[a] > probs[b]; });
  // Each filter keeps a prefix of `order`: the first `kept` tokens.
  size_t kept = vocab;
  const auto kept_mass = [&] {
    double mass = 0.0;
    for (size_t i = 0; i < kept; ++i) mass += probs[order[i]];
    return mass;
  };

  if (params.top_k > 0) kept = std::min(kept, static_cast<size_t>(params.top_k));
  if (params.top_p < 1.0f) {
    // Renormalise what top-k left, then keep tokens until their sum reaches top_p.
    const double top_k_mass = kept_mass();
    double cumulative = 0.0;
    size_t n = 0;
    while (n < kept && cumulative < params.top_p) cumulative += probs[order[n++]] / top_k_mass;
    kept = n;
  }
  const double min_prob = params.min_p * probs[order[0]];
  size_t n = 0;
  while (n < kept && probs[order[n]] >= min_prob) ++n;
  kept = n;

  const double mass = kept_mass();
  for (size_t i = 0; i < kept; ++i) result[order[i]] = static_cast<float>(probs[order[i]] / mass);
  return result;
}

}  // namespace mlaserve::sampling
