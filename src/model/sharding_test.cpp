// The sharding table against what the rest of the code assumes of it: the exchanges in
// parallel/ complete attention partial sums over attn_tp and MLP partial sums over tp, gather
// vocabulary blocks over attn_tp, and the forward pass gives q_b, kv_b and o_proj one head range.
#include "model/sharding.h"

#include <gtest/gtest.h>

namespace mlaserve::model {
namespace {

// tp 4, dp 2 DP attention: rank 3 is the second rank of the second group.
RankLayout tp4_dp2_rank3(bool ep_moe) {
  RankLayout l;
  l.tp_size = 4, l.tp_rank = 3, l.dp_size = 2, l.dp_rank = 1;
  l.attn_tp_size = 2, l.attn_tp_rank = 1, l.ep_moe = ep_moe;
  return l;
}

void expect_rule(WeightKind kind, SplitDim dim, SplitGroup group, bool ep_moe = false) {
  const ShardRule rule = shard_rule(kind, tp4_dp2_rank3(ep_moe));
  EXPECT_EQ(rule.dim, dim) << static_cast<int>(kind);
  EXPECT_EQ(rule.group, group) << static_cast<int>(kind);
}

TEST(ShardRange, PartitionsUnitsIntoContiguousNearlyEqualBlocks) {
  for (int64_t units = 0; units <= 20; ++units) {
    for (int size = 1; size <= 6; ++size) {
      int64_t next = 0;
      for (int rank = 0; rank < size; ++rank) {
        const Range r = shard_range(units, rank, size);
        EXPECT_EQ(r.begin, next) << units << " over " << size;
        EXPECT_GE(r.size(), units / size);
        EXPECT_LE(r.size(), units / size + 1);
        next = r.end;
      }
      EXPECT_EQ(next, units);
    }
  }
}

TEST(ShardRule, AttentionSplitsHeadsOverTheGroupAndLeavesQkvAWhole) {
  expect_rule(WeightKind::QB, SplitDim::Rows, SplitGroup::AttnTp);
  expect_rule(WeightKind::KvB, SplitDim::Rows, SplitGroup::AttnTp);
  expect_rule(WeightKind::O, SplitDim::Cols, SplitGroup::AttnTp);
  expect_rule(WeightKind::QkvA, SplitDim::None, SplitGroup::None);
}

TEST(ShardRule, VocabularyIsSplitOverTheGroup) {
  expect_rule(WeightKind::Embedding, SplitDim::Rows, SplitGroup::AttnTp);
  expect_rule(WeightKind::LmHead, SplitDim::Rows, SplitGroup::AttnTp);
}

TEST(ShardRule, MlpAndRouterFollowTheMoeMode) {
  for (bool ep : {false, true}) {
    expect_rule(WeightKind::MlpGateUp, SplitDim::Rows, SplitGroup::Tp, ep);
    expect_rule(WeightKind::MlpDown, SplitDim::Cols, SplitGroup::Tp, ep);
    expect_rule(WeightKind::Router, SplitDim::None, SplitGroup::None, ep);
  }
  expect_rule(WeightKind::RoutedExperts, SplitDim::None, SplitGroup::None, false);
  expect_rule(WeightKind::ExpertGateUp, SplitDim::Rows, SplitGroup::Tp, false);
  expect_rule(WeightKind::ExpertDown, SplitDim::Cols, SplitGroup::Tp, false);
  expect_rule(WeightKind::RoutedExperts, SplitDim::Experts, SplitGroup::Tp, true);
  expect_rule(WeightKind::ExpertGateUp, SplitDim::None, SplitGroup::None, true);
  expect_rule(WeightKind::ExpertDown, SplitDim::None, SplitGroup::None, true);
}

TEST(OwnedRange, UsesThePositionInTheRulesGroup) {
  const RankLayout tp_moe = tp4_dp2_rank3(false), ep_moe = tp4_dp2_rank3(true);
  // 5 heads over attn_tp 2: rank 1 of its group holds heads [3, 5).
  EXPECT_EQ(owned_range(tp_moe, WeightKind::QB, 5).begin, 3);
  EXPECT_EQ(owned_range(tp_moe, WeightKind::QB, 5).end, 5);
  // 10 intermediate columns over tp 4: rank 3 holds [8, 10).
  EXPECT_EQ(owned_range(tp_moe, WeightKind::MlpGateUp, 10).begin, 8);
  EXPECT_EQ(owned_range(tp_moe, WeightKind::ExpertDown, 10).size(), 2);
  EXPECT_EQ(owned_range(ep_moe, WeightKind::ExpertDown, 10).size(), 10);
  // 8 experts: all of them under TP-MoE, the last two under EP-MoE.
  EXPECT_EQ(owned_range(tp_moe, WeightKind::RoutedExperts, 8).size(), 8);
  EXPECT_EQ(owned_range(ep_moe, WeightKind::RoutedExperts, 8).begin, 6);
  EXPECT_EQ(owned_range(ep_moe, WeightKind::RoutedExperts, 8).end, 8);
  EXPECT_EQ(owned_range(ep_moe, WeightKind::QkvA, 7).size(), 7);
}

}  // namespace
}  // namespace mlaserve::model
