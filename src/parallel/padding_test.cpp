#include "parallel/padding.h"

#include <gtest/gtest.h>

namespace mlaserve::parallel {
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
  for (auto policy :
       {PaddingPolicy::Auto, PaddingPolicy::SumLen, PaddingPolicy::MaxLen, PaddingPolicy::Exact}) {
    EXPECT_EQ(plan_gather({1, 0, 7, 2}, false, policy).padded_rows(), 0);
  }
  const auto legacy = plan_gather({1, 0, 7, 2}, false, PaddingPolicy::Legacy);
  EXPECT_EQ(legacy.mlp_rows, 28);  // max 7 * 4 groups
  EXPECT_EQ(legacy.padded_rows(), 18);
  EXPECT_EQ(legacy.offsets, (std::vector<int64_t>{0, 7, 14, 21}));
}

TEST(Scatter, SumLenAndLegacyAllReduceTheGatheredBuffer) {
  const auto sum_len = plan_scatter(plan_gather({1, 0, 7, 2}, true, PaddingPolicy::Auto), 2);
  EXPECT_EQ(sum_len.mode, ScatterMode::AllReduce);
  EXPECT_EQ(sum_len.buffer_rows, 10);
  EXPECT_EQ(sum_len.group_start, (std::vector<int64_t>{0, 1, 1, 8}));
  const auto legacy = plan_scatter(plan_gather({1, 0, 7, 2}, false, PaddingPolicy::Legacy), 2);
  EXPECT_EQ(legacy.mode, ScatterMode::AllReduce);
  EXPECT_EQ(legacy.buffer_rows, 28);
  EXPECT_EQ(legacy.group_start, (std::vector<int64_t>{0, 7, 14, 21}));
}

TEST(Scatter, MaxLenReduceScattersEqualPaddedBlocks) {
  // dp 2, attn_tp 2: max 5 rows -> blocks of 3 rows, groups at rows 0 and 6 of a 12-row buffer.
  const auto s = plan_scatter(plan_gather({5, 2}, false, PaddingPolicy::MaxLen), 2);
  EXPECT_EQ(s.mode, ScatterMode::ReduceScatterBlock);
  EXPECT_EQ(s.buffer_rows, 12);
  EXPECT_EQ(s.group_start, (std::vector<int64_t>{0, 6}));
  EXPECT_EQ(s.rank_rows, (std::vector<int64_t>{3, 3, 3, 3}));
  // Auto's balanced decode is MaxLen too; attn_tp 1 needs no block rounding.
  const auto auto_decode = plan_scatter(plan_gather({4, 3, 4, 3}, false, PaddingPolicy::Auto), 1);
  EXPECT_EQ(auto_decode.mode, ScatterMode::ReduceScatterBlock);
  EXPECT_EQ(auto_decode.rank_rows, (std::vector<int64_t>{4, 4, 4, 4}));
  EXPECT_EQ(auto_decode.group_start, (std::vector<int64_t>{0, 4, 8, 12}));
}

TEST(Scatter, ExactSplitsEachGroupsRowsOverItsRanks) {
  // dp 2, attn_tp 4: 7 rows -> 2 2 2 1, an idle group -> 0 0 0 0; no padding anywhere.
  const auto s = plan_scatter(plan_gather({7, 0}, true, PaddingPolicy::Exact), 4);
  EXPECT_EQ(s.mode, ScatterMode::ReduceScatterExact);
  EXPECT_EQ(s.buffer_rows, 7);
  EXPECT_EQ(s.group_start, (std::vector<int64_t>{0, 7}));
  EXPECT_EQ(s.rank_rows, (std::vector<int64_t>{2, 2, 2, 1, 0, 0, 0, 0}));
}

TEST(Scatter, OneGroupAlwaysAllReduces) {
  for (auto policy : {PaddingPolicy::Auto, PaddingPolicy::MaxLen, PaddingPolicy::Exact}) {
    EXPECT_EQ(plan_scatter(plan_gather({3}, false, policy), 4).mode, ScatterMode::AllReduce);
  }
}

TEST(Padding, ParsesPolicyNamesAndRejectsOthers) {
  EXPECT_EQ(parse_padding_policy("legacy"), PaddingPolicy::Legacy);
  EXPECT_THROW(parse_padding_policy("padded"), std::exception);
}

}  // namespace
}  // namespace mlaserve::parallel
