#include "parallel/padding.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "model/sharding.h"

namespace mlaserve::parallel {

PaddingPolicy parse_padding_policy(const std::string& name) {
  if (name == "auto") return PaddingPolicy::Auto;
  if (name == "sum_len") return PaddingPolicy::SumLen;
  if (name == "max_len") return PaddingPolicy::MaxLen;
  if (name == "exact") return PaddingPolicy::Exact;
  if (name == "legacy") return PaddingPolicy::Legacy;
  fail("--dp-padding '{}' is not one of auto, sum_len, max_len, exact, legacy", name);
}

GatherLayout plan_gather(const std::vector<int64_t>& group_rows, bool any_extend,
                         PaddingPolicy policy) {
  GatherLayout g;
  g.rows = group_rows;
  const auto groups = static_cast<int64_t>(group_rows.size());
  g.real_rows = std::accumulate(group_rows.begin(), group_rows.end(), int64_t{0});
  g.max_rows = group_rows.empty() ? 0 : *std::max_element(group_rows.begin(), group_rows.end());
  switch (policy) {
    case PaddingPolicy::SumLen:
      g.mode = PaddingMode::SumLen;
      break;
    case PaddingPolicy::MaxLen:
      g.mode = PaddingMode::MaxLen;
      break;
    case PaddingPolicy::Exact:
      g.mode = PaddingMode::Exact;
      break;
    case PaddingPolicy::Legacy:
      g.mode = PaddingMode::Legacy;
      break;
    case PaddingPolicy::Auto:
      g.mode = !any_extend && 2 * g.real_rows >= g.max_rows * groups ? PaddingMode::MaxLen
                                                                     : PaddingMode::SumLen;
      break;
  }
  g.offsets.resize(group_rows.size());
  for (int64_t d = 0, offset = 0; d < groups; ++d) {
    g.offsets[static_cast<size_t>(d)] = g.mode == PaddingMode::Legacy ? d * g.max_rows : offset;
    offset += group_rows[static_cast<size_t>(d)];
  }
  g.mlp_rows = g.mode == PaddingMode::Legacy ? g.max_rows * groups : g.real_rows;
  return g;
}

ScatterLayout plan_scatter(const GatherLayout& gather, int attn_tp_size) {
  ScatterLayout s;
  const auto groups = static_cast<int64_t>(gather.rows.size());
  const bool scatters =
      groups > 1 && (gather.mode == PaddingMode::MaxLen || gather.mode == PaddingMode::Exact);
  if (!scatters) {
    s.buffer_rows = gather.mlp_rows;
    s.group_start = gather.offsets;
    return s;
  }
  if (gather.mode == PaddingMode::Exact) {
    s.mode = ScatterMode::ReduceScatterExact;
    s.buffer_rows = gather.mlp_rows;
    s.group_start = gather.offsets;
    for (int64_t rows : gather.rows) {
      for (int a = 0; a < attn_tp_size; ++a)
        s.rank_rows.push_back(model::shard_range(rows, a, attn_tp_size).size());
    }
    return s;
  }
  s.mode = ScatterMode::ReduceScatterBlock;
  const int64_t block = (gather.max_rows + attn_tp_size - 1) / attn_tp_size;
  s.buffer_rows = block * attn_tp_size * groups;
  for (int64_t d = 0; d < groups; ++d) s.group_start.push_back(d * block * attn_tp_size);
  s.rank_rows.assign(static_cast<size_t>(groups * attn_tp_size), block);
  return s;
}

}  // namespace mlaserve::parallel
