// Which requests stream, disconnect and are aborted: exact counts, the rules of who may be
// chosen, and the same plans for the same seed.
#include "bench_serving/request_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "core/error.h"

namespace mlaserve::bench_serving {
namespace {

// 200 requests of 1 to 20 output tokens.
std::vector<BenchRequest> requests() {
  std::vector<BenchRequest> all(200);
  for (size_t i = 0; i < all.size(); ++i) all[i].output_len = 1 + static_cast<int64_t>(i % 20);
  return all;
}

template <typename Predicate>
size_t count(const std::vector<RequestPlan>& plans, Predicate predicate) {
  return static_cast<size_t>(std::count_if(plans.begin(), plans.end(), predicate));
}

TEST(RequestPlan, EachKindGetsItsFractionOfTheEligibleRequests) {
  const std::vector<BenchRequest> all = requests();
  Rng rng(7);
  const std::vector<RequestPlan> plans = plan_requests(
      {.stream_fraction = 0.5, .disconnect_fraction = 0.1, .abort_fraction = 0.05}, all, rng);
  ASSERT_EQ(plans.size(), all.size());
  EXPECT_EQ(count(plans, [](const RequestPlan& p) { return p.stream; }), 100u);
  size_t eligible = 0;  // streaming, 2 tokens or more
  for (size_t i = 0; i < all.size(); ++i) eligible += plans[i].stream && all[i].output_len >= 2;
  const size_t disconnects = count(plans, [](const RequestPlan& p) { return p.disconnect_after; });
  EXPECT_EQ(disconnects, static_cast<size_t>(std::llround(0.1 * static_cast<double>(eligible))));
  EXPECT_EQ(count(plans, [](const RequestPlan& p) { return p.abort_delay_s.has_value(); }),
            static_cast<size_t>(std::llround(0.05 * static_cast<double>(200 - disconnects))));
  for (size_t i = 0; i < all.size(); ++i) {
    const RequestPlan& p = plans[i];
    if (p.disconnect_after > 0) {
      EXPECT_TRUE(p.stream) << i;
      EXPECT_GE(p.disconnect_after, 1) << i;
      EXPECT_LT(p.disconnect_after, all[i].output_len) << i;  // always before the end
      EXPECT_FALSE(p.abort_delay_s) << i;                     // one fault per request
    }
    if (p.abort_delay_s) {
      EXPECT_GE(*p.abort_delay_s, 0.0);
      EXPECT_LT(*p.abort_delay_s, kMaxAbortDelayS);
    }
    EXPECT_TRUE(p.rid.empty());  // the runner names the aborted requests
  }
}

TEST(RequestPlan, TheSameSeedGivesTheSamePlans) {
  const std::vector<BenchRequest> all = requests();
  const MixOptions mix{.stream_fraction = 0.7, .disconnect_fraction = 0.2, .abort_fraction = 0.2};
  const auto plan = [&](uint64_t seed) {
    Rng rng(seed);
    return plan_requests(mix, all, rng);
  };
  const auto key = [](const std::vector<RequestPlan>& plans) {
    std::vector<std::tuple<bool, int64_t, double>> keys;
    for (const RequestPlan& p : plans)
      keys.emplace_back(p.stream, p.disconnect_after, p.abort_delay_s.value_or(-1.0));
    return keys;
  };
  EXPECT_EQ(key(plan(3)), key(plan(3)));
  EXPECT_NE(key(plan(3)), key(plan(4)));
}

TEST(RequestPlan, DefaultsStreamEverythingWithoutFaults) {
  const std::vector<BenchRequest> all = requests();
  Rng rng(1);
  for (const RequestPlan& p : plan_requests({}, all, rng)) {
    EXPECT_TRUE(p.stream);
    EXPECT_EQ(p.disconnect_after, 0);
    EXPECT_FALSE(p.abort_delay_s);
  }
}

TEST(RequestPlan, WithoutStreamingNothingDisconnects) {
  const std::vector<BenchRequest> all = requests();
  Rng rng(1);
  const std::vector<RequestPlan> plans = plan_requests(
      {.stream_fraction = 0.0, .disconnect_fraction = 1.0, .abort_fraction = 1.0}, all, rng);
  EXPECT_EQ(count(plans, [](const RequestPlan& p) { return p.stream || p.disconnect_after; }), 0u);
  EXPECT_EQ(count(plans, [](const RequestPlan& p) { return p.abort_delay_s.has_value(); }), 200u);
}

TEST(RequestPlan, AFractionOutsideZeroToOneIsAnError) {
  const std::vector<BenchRequest> all = requests();
  Rng rng(1);
  EXPECT_THROW(plan_requests({.disconnect_fraction = 1.5}, all, rng), Error);
  EXPECT_THROW(plan_requests({.abort_fraction = -0.1}, all, rng), Error);
  EXPECT_THROW(plan_requests({.stream_fraction = std::nan("")}, all, rng), Error);
}

}  // namespace
}  // namespace mlaserve::bench_serving
