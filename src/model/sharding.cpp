#include "model/sharding.h"

#include <algorithm>

namespace mlaserve::model {

namespace {

// This rank's index and count in the group a rule splits over.
struct GroupPosition {
  int rank = 0, size = 1;
};

GroupPosition group_position(const RankLayout& layout, SplitGroup group) {
  switch (group) {
    case SplitGroup::None:
      return {0, 1};
    case SplitGroup::AttnTp:
      return {layout.attn_tp_rank, layout.attn_tp_size};
    case SplitGroup::Tp:
      return {layout.tp_rank, layout.tp_size};
  }
  return {};
}

}  // namespace

ShardRule shard_rule(WeightKind kind, const RankLayout& layout) {
  switch (kind) {
    // Vocabulary-parallel inside the DP group: each group embeds and scores its own tokens.
    case WeightKind::Embedding:
    case WeightKind::LmHead:
      return {SplitDim::Rows, SplitGroup::AttnTp};
    // Every rank needs the latent of all its group's tokens; dp_linear shards tokens instead.
    case WeightKind::QkvA:
      return {SplitDim::None, SplitGroup::None};
    // The MTP module's input projection runs on its group's tokens before its attention, as
    // q_a/kv_a does: every rank of the group needs all of them.
    case WeightKind::MtpProjection:
      return {SplitDim::None, SplitGroup::None};
    // Attention heads over the group's ranks: q and the decompression by head, o_proj by the
    // heads' value columns (partial sums, completed by the attention -> MLP exchange).
    case WeightKind::QB:
    case WeightKind::KvB:
      return {SplitDim::Rows, SplitGroup::AttnTp};
    case WeightKind::O:
      return {SplitDim::Cols, SplitGroup::AttnTp};
    // The MLP over every tp rank (its batch is every group's tokens): intermediate columns, the
    // down projection's partial sums completed by the MLP -> attention exchange.
    case WeightKind::MlpGateUp:
      return {SplitDim::Rows, SplitGroup::Tp};
    case WeightKind::MlpDown:
      return {SplitDim::Cols, SplitGroup::Tp};
    // TP-MoE: every rank holds every expert's slice. EP-MoE: whole experts, dealt out over tp.
    case WeightKind::RoutedExperts:
      return layout.ep_moe ? ShardRule{SplitDim::Experts, SplitGroup::Tp} : ShardRule{};
    case WeightKind::ExpertGateUp:
      return layout.ep_moe ? ShardRule{} : ShardRule{SplitDim::Rows, SplitGroup::Tp};
    case WeightKind::ExpertDown:
      return layout.ep_moe ? ShardRule{} : ShardRule{SplitDim::Cols, SplitGroup::Tp};
    // Routing decisions must be identical on every rank.
    case WeightKind::Router:
      return {SplitDim::None, SplitGroup::None};
    // The indexer whole on every rank of the group: each computes the same selection from the
    // same rows, so no exchange is needed. Splitting its heads would save 1/attn_tp of its
    // weights and FLOPs at the cost of an all-reduce of every query's scores over the whole
    // context before the top-k, per layer: [T, n_kv] floats where the selection it feeds is only
    // [T, index_topk]. (V3.2 at attn_tp 4: wq_b is 12.6M of the layer's ~200M parameters.)
    case WeightKind::Indexer:
      return {SplitDim::None, SplitGroup::None};
  }
  return {};
}

Range shard_range(int64_t units, int rank, int size) {
  const int64_t base = units / size, extra = units % size;
  const int64_t begin = rank * base + std::min<int64_t>(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

Range owned_range(const RankLayout& layout, WeightKind kind, int64_t units) {
  const ShardRule rule = shard_rule(kind, layout);
  if (rule.dim == SplitDim::None) return {0, units};
  const GroupPosition pos = group_position(layout, rule.group);
  return shard_range(units, pos.rank, pos.size);
}

Block owned_block(const RankLayout& layout, const SplitTensor& t) {
  switch (shard_rule(t.kind, layout).dim) {
    case SplitDim::Rows: {
      const Range u = owned_range(layout, t.kind, t.rows / t.unit_size);
      return {u.begin * t.unit_size, u.size() * t.unit_size, 0, t.cols};
    }
    case SplitDim::Cols: {
      const Range u = owned_range(layout, t.kind, t.cols / t.unit_size);
      return {0, t.rows, u.begin * t.unit_size, u.size() * t.unit_size};
    }
    case SplitDim::None:
    case SplitDim::Experts:
      break;
  }
  return {0, t.rows, 0, t.cols};
}

}  // namespace mlaserve::model
