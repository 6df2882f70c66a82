#include "model/sharding.h"

#include <algorithm>

namespace mlaserve::model {

ShardRule shard_rule(WeightKind kind) {
  switch (kind) {
    case WeightKind::Embedding:
      return {SplitDim::Rows, SplitGroup::AttnTp};
    case WeightKind::LmHead:
      return {SplitDim::Rows, SplitGroup::AttnTp};
    case WeightKind::QkvA:
      return {SplitDim::None, SplitGroup::Replicated};
    case WeightKind::QB:
      return {SplitDim::Rows, SplitGroup::AttnTp};
    case WeightKind::KvB:
      return {SplitDim::Rows, SplitGroup::AttnTp};
    case WeightKind::O:
      return {SplitDim::Cols, SplitGroup::AttnTp};
    case WeightKind::MlpGateUp:
      return {SplitDim::Rows, SplitGroup::Tp};
    case WeightKind::MlpDown:
      return {SplitDim::Cols, SplitGroup::Tp};
    case WeightKind::Router:
      return {SplitDim::None, SplitGroup::Replicated};
  }
  return {};
}

Range shard_range(int64_t units, int rank, int size) {
  const int64_t base = units / size, extra = units % size;
  const int64_t begin = rank * base + std::min<int64_t>(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

GroupPosition group_position(const RankLayout& layout, SplitGroup group) {
  switch (group) {
    case SplitGroup::Replicated:
      return {0, 1};
    case SplitGroup::AttnTp:
      return {layout.attn_tp_rank, layout.attn_tp_size};
    case SplitGroup::Tp:
      return {layout.tp_rank, layout.tp_size};
  }
  return {};
}

}  // namespace mlaserve::model
