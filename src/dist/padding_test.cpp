#include "dist/padding.h"

#include <gtest/gtest.h>

namespace mlaserve::dist {
namespace {

TEST(Padding, AutoPicksSumLenWhenAnyGroupExtends) {
  const auto g = plan_gather({5, 5, 5, 5}, /*any_extend=*/true, PaddingPolicy::Auto);
  EXPECT_EQ(g.mode, PaddingMode::SumLen);
  EXPECT_EQ(g.padded_rows(), 0);
  EXPECT_EQ(g.offsets, (std::vector<int64_t>{0, 5, 10, 15}));
}

TEST(Padding, AutoPicksMaxLenForBalancedDecode) {
  // 2 * 14 >= 4 * 4: the padded all-gather moves 16 rows, an all-reduce about 2 * 14.
  EXPECT_EQ(plan_gather({4, 3, 4, 3}, false, PaddingPolicy::Auto).mode, PaddingMode::MaxLen);
  // Balanced exactly at the threshold: ties prefer MaxLen.
  EXPECT_EQ(plan_gather({4, 0, 4, 0}, false, PaddingPolicy::Auto).mode, PaddingMode::MaxLen);
}

TEST(Padding, AutoPicksSumLenForSkewedDecode) {
  // One request across dp 4 (three idle groups): 2 * 1 < 1 * 4.
  const auto g = plan_gather({0, 1, 0, 0}, false, PaddingPolicy::Auto);
  EXPECT_EQ(g.mode, PaddingMode::SumLen);
  EXPECT_EQ(g.mlp_rows, 1);
  EXPECT_EQ(g.offsets, (std::vector<int64_t>{0, 0, 1, 1}));
}

TEST(Padding, OnlyLegacyPadsTheMlpBatch) {
  for (auto policy : {PaddingPolicy::Auto, PaddingPolicy::SumLen, PaddingPolicy::MaxLen, PaddingPolicy::Exact}) {
    EXPECT_EQ(plan_gather({1, 0, 7, 2}, false, policy).padded_rows(), 0);
  }
  const auto legacy = plan_gather({1, 0, 7, 2}, false, PaddingPolicy::Legacy);
  EXPECT_EQ(legacy.mlp_rows, 28);  // max 7 * 4 groups
  EXPECT_EQ(legacy.padded_rows(), 18);
  EXPECT_EQ(legacy.offsets, (std::vector<int64_t>{0, 7, 14, 21}));
}

TEST(Padding, ParsesPolicyNamesAndRejectsOthers) {
  EXPECT_EQ(parse_padding_policy("legacy"), PaddingPolicy::Legacy);
  EXPECT_THROW(parse_padding_policy("padded"), std::exception);
}

}  // namespace
}  // namespace mlaserve::dist
