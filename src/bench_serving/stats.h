// Summary statistics with numpy's conventions, so that figures match SGLang's bench_serving,
// which computes them with np.mean / np.median / np.std / np.percentile / np.max.
#pragma once

#include <span>

namespace mlaserve::bench_serving {

// Like SGLang's `np.mean(values or 0)`: an empty list gives 0 from every function.
double mean(std::span<const double> values);
double median(std::span<const double> values);
// Population standard deviation (numpy's default ddof=0).
double standard_deviation(std::span<const double> values);
// numpy's default "linear" method: the value at rank q/100*(n-1) of the sorted values,
// interpolated between its two neighbours. q is in [0, 100].
double percentile(std::span<const double> values, double q);
double maximum(std::span<const double> values);

}  // namespace mlaserve::bench_serving
