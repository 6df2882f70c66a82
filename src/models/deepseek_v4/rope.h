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

  // The same from a position's angles, computed once for the many vectors at one position (a
  // token's heads, its row, its output): cos_sin holds rd/2 cosines then rd/2 sines.
  void angles(int64_t pos, float* cos_sin) const;
  int64_t angle_floats() const { return 2 * static_cast<int64_t>(inv_freq_.size()); }
  void apply(float* v, int64_t dim, const float* cos_sin, bool inverse = false) const;

 private:
  std::vector<double> inv_freq_;
};

}  // namespace mlaserve::models::deepseek_v4
