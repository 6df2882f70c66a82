#include "kernels/gemm_probe.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <vector>

#include <fmt/format.h>

#include "kernels/dnnl_matmul.h"

namespace mlaserve::kernels {
namespace {

constexpr int64_t kProbeN = 1024, kProbeK = 2048;
// Each timed round repeats the product for at least this long. The rounds of the two paths
// alternate and each path's best round counts: on a shared machine another process slows some
// rounds of both alike instead of all of one path's, and no round runs faster than the path.
constexpr std::chrono::milliseconds kRoundTime{15};
constexpr int kRounds = 5;

// Values in [-1, 1) from a fixed sequence: the rate does not depend on them.
std::vector<float> pseudo_random(size_t count, uint32_t seed) {
  std::vector<float> v(count);
  uint32_t state = seed * 2654435761u + 1u;
  for (float& f : v) {
    state = state * 1664525u + 1013904223u;
    f = static_cast<float>(state >> 8) * (2.0f / 16777216.0f) - 1.0f;
  }
  return v;
}

// Revision of what the probe times, part of the cache key: a probe cached by an earlier
// revision is measured again. 2: the mid class times the product serving runs (on a bf16 packed
// copy our own kernel), no longer oneDNN alone.
constexpr int kProbeRevision = 2;

// GFLOP/s of one timed round of matmul on x[m, K] · Wᵀ with `path` for every class: the
// kernel serving would run for that path and m.
double round_rate(GemmPath path, int64_t m, const Weight& w, const float* x, float* y) {
  use_gemm_choice({path, path});
  const auto start = std::chrono::steady_clock::now();
  std::chrono::duration<double> elapsed{};
  int64_t calls = 0;
  do {
    matmul(x, m, w, y);
    ++calls;
    elapsed = std::chrono::steady_clock::now() - start;
  } while (elapsed < kRoundTime);
  const double flops = 2.0 * static_cast<double>(m * w.rows() * w.cols());
  return flops * static_cast<double>(calls) / elapsed.count() * 1e-9;
}

GemmRates measure_both(int64_t m, const Weight& w, const float* x, float* y) {
  for (GemmPath path : {GemmPath::Bf16Dot, GemmPath::F32Widened}) {
    use_gemm_choice({path, path});
    matmul(x, m, w, y);  // creates oneDNN's primitive (JIT) outside the timing
  }
  GemmRates best;
  for (int round = 0; round < kRounds; ++round) {
    best.bf16_gflops = std::max(best.bf16_gflops, round_rate(GemmPath::Bf16Dot, m, w, x, y));
    best.f32_gflops = std::max(best.f32_gflops, round_rate(GemmPath::F32Widened, m, w, x, y));
  }
  return best;
}

}  // namespace

GemmProbe probe_gemm_paths() {
  const GemmChoice found = gemm_choice();
  Weight w(WeightType::BF16, kProbeN, kProbeK);
  const std::vector<float> values = pseudo_random(static_cast<size_t>(kProbeN * kProbeK), 1);
  for (size_t i = 0; i < values.size(); ++i) w.b16()[i] = f32_to_bf16(values[i]);
  // The bf16 path runs on oneDNN's packed copy where serving would have one.
  if (weight_packing()) w.packed = dnnl_pack(w);
  const std::vector<float> x = pseudo_random(static_cast<size_t>(kProbeLargeRows * kProbeK), 2);
  std::vector<float> y(static_cast<size_t>(kProbeLargeRows * kProbeN));
  GemmProbe probe;
  probe.mid = measure_both(kProbeMidRows, w, x.data(), y.data());
  probe.large = measure_both(kProbeLargeRows, w, x.data(), y.data());
  use_gemm_choice(found);
  return probe;
}

std::string gemm_library_version() {
  const dnnl_version_t* v = dnnl::version();
  return fmt::format("oneDNN {}.{}.{}, probe {}", v->major, v->minor, v->patch, kProbeRevision);
}

GemmChoice faster_paths(const GemmProbe& probe) {
  const auto faster = [](const GemmRates& r) {
    return r.f32_gflops > r.bf16_gflops ? GemmPath::F32Widened : GemmPath::Bf16Dot;
  };
  return {faster(probe.mid), faster(probe.large)};
}

}  // namespace mlaserve::kernels
