#include "models/deepseek_v4/rope.h"

#include <cmath>

#include "model/rope.h"

namespace mlaserve::models::deepseek_v4 {

Rope::Rope(const V4Config& c, bool compressing)
    : inv_freq_(model::RopeTable::inv_freq(c.qk_rope_head_dim,
                                           compressing ? c.compress_rope_theta : c.rope_theta,
                                           compressing ? c.yarn : std::nullopt)) {}

void Rope::angles(int64_t pos, float* angles) const {
  const auto half = static_cast<int64_t>(inv_freq_.size());
  for (int64_t i = 0; i < half; ++i) {
    const double theta = static_cast<double>(pos) * inv_freq_[static_cast<size_t>(i)];
    angles[i] = static_cast<float>(std::cos(theta));
    angles[half + i] = static_cast<float>(std::sin(theta));
    angles[2 * half + i] = -angles[half + i];
  }
}

void Rope::rotate(float* v, int64_t n, int64_t stride, int64_t dim, const float* angles,
                  bool inverse) const {
  const auto half = static_cast<int64_t>(inv_freq_.size());
  const float* cos = angles;
  const float* sin = angles + (inverse ? 2 : 1) * half;
  for (int64_t k = 0; k < n; ++k) {
    float* x = v + k * stride + dim - 2 * half;
    for (int64_t i = 0; i < half; ++i) {
      const float a = x[2 * i], b = x[2 * i + 1];
      x[2 * i] = a * cos[i] - b * sin[i];
      x[2 * i + 1] = a * sin[i] + b * cos[i];
    }
  }
}

void Rope::rotate(float* v, int64_t dim, int64_t pos) const {
  thread_local std::vector<float> at;
  at.resize(static_cast<size_t>(angle_floats()));
  angles(pos, at.data());
  rotate(v, 1, dim, dim, at.data());
}

}  // namespace mlaserve::models::deepseek_v4
