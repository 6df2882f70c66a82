#include "bench_serving/request_plan.h"

#include <cmath>

#include "core/error.h"

namespace mlaserve::bench_serving {

namespace {

void check_fraction(double fraction, const char* flag) {
  if (!(fraction >= 0.0 && fraction <= 1.0)) fail("{} must be in [0, 1], got {}", flag, fraction);
}

// round(fraction * candidates.size()) of the candidates, chosen uniformly (a partial
// Fisher-Yates shuffle), in the order drawn.
std::vector<size_t> choose(std::vector<size_t> candidates, double fraction, Rng& rng) {
  const size_t count =
      static_cast<size_t>(std::llround(fraction * static_cast<double>(candidates.size())));
  for (size_t i = 0; i < count; ++i) {
    const int64_t last = static_cast<int64_t>(candidates.size()) - 1;
    std::swap(candidates[i],
              candidates[static_cast<size_t>(rng.uniform_int(static_cast<int64_t>(i), last))]);
  }
  candidates.resize(count);
  return candidates;
}

template <typename Keep>
std::vector<size_t> indices_where(size_t count, Keep keep) {
  std::vector<size_t> indices;
  for (size_t i = 0; i < count; ++i) {
    if (keep(i)) indices.push_back(i);
  }
  return indices;
}

}  // namespace

std::vector<RequestPlan> plan_requests(const MixOptions& options,
                                       std::span<const BenchRequest> requests, Rng& rng) {
  check_fraction(options.stream_fraction, "--stream-fraction");
  check_fraction(options.disconnect_fraction, "--disconnect-fraction");
  check_fraction(options.abort_fraction, "--abort-fraction");
  const size_t n = requests.size();
  std::vector<RequestPlan> plans(n);
  for (RequestPlan& plan : plans) plan.stream = false;
  for (const size_t i :
       choose(indices_where(n, [](size_t) { return true; }), options.stream_fraction, rng)) {
    plans[i].stream = true;
  }
  const auto can_disconnect = [&](size_t i) {
    return plans[i].stream && requests[i].output_len >= 2;
  };
  for (const size_t i :
       choose(indices_where(n, can_disconnect), options.disconnect_fraction, rng)) {
    plans[i].disconnect_after = rng.uniform_int(1, requests[i].output_len - 1);
  }
  const auto can_abort = [&](size_t i) { return plans[i].disconnect_after == 0; };
  for (const size_t i : choose(indices_where(n, can_abort), options.abort_fraction, rng)) {
    plans[i].abort_delay_s = rng.uniform01() * kMaxAbortDelayS;
  }
  return plans;
}

}  // namespace mlaserve::bench_serving
