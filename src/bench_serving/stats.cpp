#include "bench_serving/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace mlaserve::bench_serving {

double mean(std::span<const double> values) {
  if (values.empty()) return 0.0;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double median(std::span<const double> values) {
  return percentile(values, 50.0);
}

double standard_deviation(std::span<const double> values) {
  if (values.empty()) return 0.0;
  const double average = mean(values);
  double sum_of_squares = 0.0;
  for (const double value : values) sum_of_squares += (value - average) * (value - average);
  return std::sqrt(sum_of_squares / static_cast<double>(values.size()));
}

double percentile(std::span<const double> values, double q) {
  if (values.empty()) return 0.0;
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  const double rank = q / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(rank));
  const size_t above = std::min(below + 1, sorted.size() - 1);
  const double fraction = rank - static_cast<double>(below);
  return sorted[below] + (sorted[above] - sorted[below]) * fraction;
}

double maximum(std::span<const double> values) {
  if (values.empty()) return 0.0;
  return *std::max_element(values.begin(), values.end());
}

}  // namespace mlaserve::bench_serving
