#include "dist/padding.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace mlaserve::dist {

PaddingPolicy parse_padding_policy(const std::string& name) {
  if (name == "auto") return PaddingPolicy::Auto;
  if (name == "sum_len") return PaddingPolicy::SumLen;
  if (name == "max_len") return PaddingPolicy::MaxLen;
  if (name == "exact") return PaddingPolicy::Exact;
  if (name == "legacy") return PaddingPolicy::Legacy;
  fail("--dp-padding '{}' is not one of auto, sum_len, max_len, exact, legacy", name);
}

const char* padding_mode_name(PaddingMode mode) {
  switch (mode) {
    case PaddingMode::SumLen: return "sum_len";
    case PaddingMode::MaxLen: return "max_len";
    case PaddingMode::Exact: return "exact";
    case PaddingMode::Legacy: return "legacy";
  }
  return "?";
}

GatherLayout plan_gather(const std::vector<int64_t>& group_rows, bool any_extend, PaddingPolicy policy) {
  GatherLayout g;
  g.rows = group_rows;
  const auto groups = static_cast<int64_t>(group_rows.size());
  g.real_rows = std::accumulate(group_rows.begin(), group_rows.end(), int64_t{0});
  g.max_rows = group_rows.empty() ? 0 : *std::max_element(group_rows.begin(), group_rows.end());
  switch (policy) {
    case PaddingPolicy::SumLen: g.mode = PaddingMode::SumLen; break;
    case PaddingPolicy::MaxLen: g.mode = PaddingMode::MaxLen; break;
    case PaddingPolicy::Exact: g.mode = PaddingMode::Exact; break;
    case PaddingPolicy::Legacy: g.mode = PaddingMode::Legacy; break;
    case PaddingPolicy::Auto:
      g.mode = !any_extend && 2 * g.real_rows >= g.max_rows * groups ? PaddingMode::MaxLen : PaddingMode::SumLen;
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

}  // namespace mlaserve::dist
