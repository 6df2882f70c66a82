// RoPE of DeepSeek-V4: interleaved pairs of the last rd dims of a vector. Compressing layers use
// compress_rope_theta with YaRN, window-only layers rope_theta without; no magnitude scaling.
// Angles are computed per call (V4's 1M positions would make a table of 256 MB per base).
#pragma once

#include <cstdint>
#include <vector>

#include "models/deepseek_v4/config.h"

namespace mlaserve::models::deepseek_v4 {

class Rope {
 public:
  Rope(const V4Config& c, bool compressing);
  // Rotates the last rd dims of v (dim values) to position pos; by -pos when inverse.
  void apply(float* v, int64_t dim, int64_t pos, bool inverse = false) const;

 private:
  std::vector<double> inv_freq_;
};

}  // namespace mlaserve::models::deepseek_v4
