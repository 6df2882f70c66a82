// Summary statistics against values computed by hand with numpy's rules (and checked against
// np.percentile / np.median / np.std on the same arrays).
#include "bench_serving/stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace mlaserve::bench_serving {
namespace {

TEST(Stats, PercentileInterpolatesLinearlyBetweenNeighbours) {
  const std::vector<double> v = {4.0, 1.0, 3.0, 2.0};  // sorted: 1 2 3 4, n-1 = 3
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);   // rank 1.5
  EXPECT_DOUBLE_EQ(percentile(v, 95), 3.85);  // rank 2.85
  EXPECT_DOUBLE_EQ(percentile(v, 99), 3.97);  // rank 2.97
  EXPECT_DOUBLE_EQ(percentile(v, 100), 4.0);
}

TEST(Stats, PercentileOfOddAndTwoElementLists) {
  EXPECT_DOUBLE_EQ(percentile(std::vector<double>{1, 2, 3, 4, 5}, 99), 4.96);  // rank 3.96
  EXPECT_DOUBLE_EQ(percentile(std::vector<double>{10, 20}, 99), 19.9);
  EXPECT_DOUBLE_EQ(percentile(std::vector<double>{10, 20}, 25), 12.5);
}

TEST(Stats, OneValueIsEveryStatistic) {
  const std::vector<double> v = {7.5};
  EXPECT_DOUBLE_EQ(mean(v), 7.5);
  EXPECT_DOUBLE_EQ(median(v), 7.5);
  EXPECT_DOUBLE_EQ(percentile(v, 99), 7.5);
  EXPECT_DOUBLE_EQ(maximum(v), 7.5);
  EXPECT_DOUBLE_EQ(standard_deviation(v), 0.0);
}

TEST(Stats, MedianOfEvenCountIsTheMiddlePairsMean) {
  EXPECT_DOUBLE_EQ(median(std::vector<double>{5, 1, 9, 3}), 4.0);
  EXPECT_DOUBLE_EQ(median(std::vector<double>{3, 1, 2}), 2.0);
}

TEST(Stats, StandardDeviationIsThePopulationOne) {
  // np.std([1, 2, 3, 4]) = sqrt(1.25); the sample (ddof=1) one would be sqrt(5/3).
  EXPECT_DOUBLE_EQ(standard_deviation(std::vector<double>{1, 2, 3, 4}), std::sqrt(1.25));
  EXPECT_DOUBLE_EQ(mean(std::vector<double>{1, 2, 3, 4}), 2.5);
}

TEST(Stats, EmptyListsGiveZeroLikeSglangsOrZero) {
  const std::vector<double> none;
  EXPECT_EQ(mean(none), 0.0);
  EXPECT_EQ(median(none), 0.0);
  EXPECT_EQ(standard_deviation(none), 0.0);
  EXPECT_EQ(percentile(none, 99), 0.0);
  EXPECT_EQ(maximum(none), 0.0);
}

}  // namespace
}  // namespace mlaserve::bench_serving
