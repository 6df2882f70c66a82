// Rotary position tables for DeepSeek's decoupled RoPE, with DeepSeek YaRN scaling.
#pragma once

#include <optional>
#include <vector>

#include "model/config.h"

namespace mlaserve::model {

class RopeTable {
 public:
  explicit RopeTable(const ModelConfig& cfg);

  // cos/sin of theta_i = pos * inv_freq[i] (times the YaRN cos/sin mscale), i < rope_dim / 2.
  const float* cos(int64_t pos) const { return cos_.data() + pos * half_; }
  const float* sin(int64_t pos) const { return sin_.data() + pos * half_; }
  int64_t max_positions() const { return max_positions_; }

  // The YaRN-blended inverse frequencies (exposed for tests).
  static std::vector<double> inv_freq(const ModelConfig& cfg);
  // The same for `dim` rotated dims (dim / 2 pairs) of base `base`, YaRN-blended when given.
  static std::vector<double> inv_freq(int64_t dim, double base,
                                      const std::optional<YarnScaling>& yarn);

 private:
  int64_t half_, max_positions_;
  std::vector<float> cos_, sin_;  // [max_positions, rope_dim / 2]
};

}  // namespace mlaserve::model
