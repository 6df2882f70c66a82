#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace mlaserve::model {

std::vector<double> RopeTable::inv_freq(const ModelConfig& cfg) {
  return inv_freq(cfg.qk_rope_head_dim, cfg.rope_theta, cfg.yarn);
}

std::vector<double> RopeTable::inv_freq(int64_t dim, double base,
                                        const std::optional<YarnScaling>& yarn) {
  const int64_t half = dim / 2;
  std::vector<double> freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    freq[static_cast<size_t>(i)] = 1.0 / std::pow(base, 2.0 * i / dim);
  if (!yarn) return freq;

  // YaRN: pair indices below `low` keep their frequency (extrapolate), above `high` are divided
  // by `factor` (interpolate), linear ramp in between. dim is the rope head dim, not hidden/heads.
  const YarnScaling& y = *yarn;
  const double orig = static_cast<double>(y.original_max_position_embeddings);
  auto correction_dim = [&](double rotations) {
    return dim * std::log(orig / (rotations * 2 * std::numbers::pi)) / (2 * std::log(base));
  };
  double low = std::max(std::floor(correction_dim(y.beta_fast)), 0.0);
  double high = std::min(std::ceil(correction_dim(y.beta_slow)), static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // avoid a zero-width ramp
  for (int64_t i = 0; i < half; ++i) {
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double extrapolated = freq[static_cast<size_t>(i)];
    freq[static_cast<size_t>(i)] = extrapolated / y.factor * ramp + extrapolated * (1.0 - ramp);
  }
  return freq;
}

RopeTable::RopeTable(const ModelConfig& cfg)
    : half_(cfg.qk_rope_head_dim / 2), max_positions_(cfg.max_position_embeddings) {
  const std::vector<double> freq = inv_freq(cfg);
  const double mscale = cfg.yarn ? yarn_mscale(cfg.yarn->factor, cfg.yarn->mscale) /
                                       yarn_mscale(cfg.yarn->factor, cfg.yarn->mscale_all_dim)
                                 : 1.0;
  cos_.resize(static_cast<size_t>(max_positions_ * half_));
  sin_.resize(cos_.size());
  for (int64_t pos = 0; pos < max_positions_; ++pos) {
    for (int64_t i = 0; i < half_; ++i) {
      const double theta = static_cast<double>(pos) * freq[static_cast<size_t>(i)];
      cos_[static_cast<size_t>(pos * half_ + i)] = static_cast<float>(std::cos(theta) * mscale);
      sin_[static_cast<size_t>(pos * half_ + i)] = static_cast<float>(std::sin(theta) * mscale);
    }
  }
}

}  // namespace mlaserve::model
