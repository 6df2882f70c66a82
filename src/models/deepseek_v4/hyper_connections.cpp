#include "models/deepseek_v4/hyper_connections.h"

#include <cmath>

namespace mlaserve::models::deepseek_v4 {

namespace {

float sigmoid(float v) {
  return 1.0f / (1.0f + std::exp(-v));
}

// mixes [T, w.fn.rows()] = (fn · x_t) / rms(x_t), x_t the token's hc · H values flattened.
std::vector<float> mixes(const V4Config& c, const HcWeights& w, const float* x, int64_t T) {
  const int64_t n = c.hc_mult * c.hidden_size, m = w.fn.rows();
  std::vector<float> out(static_cast<size_t>(T * m));
  kernels::matmul(x, T, w.fn, out.data());
  for (int64_t t = 0; t < T; ++t) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[t * n + i]) * x[t * n + i];
    const auto rs =
        static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(n) + c.rms_norm_eps));
    for (int64_t i = 0; i < m; ++i) out[static_cast<size_t>(t * m + i)] *= rs;
  }
  return out;
}

// y_t = Σ_i pre[i] x_t[i].
void weighted_sum(const float* pre, const float* x_t, int64_t hc, int64_t H, float* y_t) {
  for (int64_t k = 0; k < H; ++k) y_t[k] = 0.0f;
  for (int64_t i = 0; i < hc; ++i)
    for (int64_t k = 0; k < H; ++k) y_t[k] += pre[i] * x_t[i * H + k];
}

}  // namespace

void sinkhorn(float* m, int64_t hc, int64_t iters, float eps) {
  auto normalise_rows = [&] {
    for (int64_t i = 0; i < hc; ++i) {
      float sum = 0;
      for (int64_t j = 0; j < hc; ++j) sum += m[i * hc + j];
      for (int64_t j = 0; j < hc; ++j) m[i * hc + j] /= sum + eps;
    }
  };
  auto normalise_columns = [&] {
    for (int64_t j = 0; j < hc; ++j) {
      float sum = 0;
      for (int64_t i = 0; i < hc; ++i) sum += m[i * hc + j];
      for (int64_t i = 0; i < hc; ++i) m[i * hc + j] /= sum + eps;
    }
  };
  for (int64_t i = 0; i < hc; ++i) {
    float* row = m + i * hc;
    kernels::softmax(row, hc);
    for (int64_t j = 0; j < hc; ++j) row[j] += eps;
  }
  normalise_columns();
  for (int64_t k = 1; k < iters; ++k) {
    normalise_rows();
    normalise_columns();
  }
}

void hc_pre(const V4Config& c, const HcWeights& w, const float* x, int64_t T, float* y,
            HcMix& mix) {
  const int64_t hc = c.hc_mult, H = c.hidden_size, m = c.hc_mix_size();
  const auto eps = static_cast<float>(c.hc_eps);
  const std::vector<float> mx = mixes(c, w, x, T);
  mix.post.resize(static_cast<size_t>(T * hc));
  mix.comb.resize(static_cast<size_t>(T * hc * hc));
  std::vector<float> pre(static_cast<size_t>(hc));
  for (int64_t t = 0; t < T; ++t) {
    const float* v = mx.data() + t * m;
    for (int64_t i = 0; i < hc; ++i) {
      pre[static_cast<size_t>(i)] =
          sigmoid(v[i] * w.scale[0] + w.base[static_cast<size_t>(i)]) + eps;
      mix.post[static_cast<size_t>(t * hc + i)] =
          2.0f * sigmoid(v[hc + i] * w.scale[1] + w.base[static_cast<size_t>(hc + i)]);
    }
    float* comb = mix.comb.data() + t * hc * hc;
    for (int64_t k = 0; k < hc * hc; ++k)
      comb[k] = v[2 * hc + k] * w.scale[2] + w.base[static_cast<size_t>(2 * hc + k)];
    sinkhorn(comb, hc, c.hc_sinkhorn_iters, eps);
    weighted_sum(pre.data(), x + t * hc * H, hc, H, y + t * H);
  }
}

void hc_post(const V4Config& c, const HcMix& mix, const float* y, int64_t T, float* x) {
  const int64_t hc = c.hc_mult, H = c.hidden_size;
  std::vector<float> streams(static_cast<size_t>(hc * H));
  for (int64_t t = 0; t < T; ++t) {
    float* x_t = x + t * hc * H;
    const float* comb = mix.comb.data() + t * hc * hc;
    for (int64_t j = 0; j < hc; ++j) {
      float* out = streams.data() + j * H;
      const float post = mix.post[static_cast<size_t>(t * hc + j)];
      for (int64_t k = 0; k < H; ++k) out[k] = post * y[t * H + k];
      for (int64_t i = 0; i < hc; ++i)
        for (int64_t k = 0; k < H; ++k) out[k] += comb[i * hc + j] * x_t[i * H + k];
    }
    std::copy(streams.begin(), streams.end(), x_t);
  }
}

void hc_head(const V4Config& c, const HcWeights& w, const float* x, int64_t T, float* y) {
  const int64_t hc = c.hc_mult, H = c.hidden_size;
  const std::vector<float> mx = mixes(c, w, x, T);
  std::vector<float> pre(static_cast<size_t>(hc));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < hc; ++i) {
      pre[static_cast<size_t>(i)] = sigmoid(mx[static_cast<size_t>(t * hc + i)] * w.scale[0] +
                                            w.base[static_cast<size_t>(i)]) +
                                    static_cast<float>(c.hc_eps);
    }
    weighted_sum(pre.data(), x + t * hc * H, hc, H, y + t * H);
  }
}

}  // namespace mlaserve::models::deepseek_v4
