#include "parallel/topology.h"

#include <fmt/format.h>

#include "core/error.h"
#include "model/footprint.h"

namespace mlaserve::parallel {

std::string ParallelOptions::describe() const {
  std::string s = fmt::format("tp={} dp={}", tp, dp);
  if (dp_attention) s += " dp-attention";
  if (dp_linear) s += " dp-linear";
  if (ep_moe) s += " ep-moe";
  return s;
}

Topology compute_topology(const ParallelOptions& o, int world_rank, int world_size) {
  if (o.tp < 1 || o.dp < 1) fail("--tp and --dp must be at least 1 (got tp={} dp={})", o.tp, o.dp);
  if (o.dp_attention) {
    if (o.dp < 2) fail("--enable-dp-attention needs --dp 2 or more (got --dp {})", o.dp);
    if (o.tp % o.dp != 0)
      fail("--enable-dp-attention needs --tp divisible by --dp (got tp={} dp={})", o.tp, o.dp);
  }
  if (world_size != o.world_size()) {
    fail("{} needs {} ranks but the job has {}", o.describe(), o.world_size(), world_size);
  }
  Topology t;
  t.options = o;
  t.world_rank = world_rank;
  t.world_size = world_size;
  model::RankLayout& l = t.layout;
  l.ep_moe = o.ep_moe;
  l.tp_size = o.tp;
  if (o.dp_attention) {
    t.groups_per_instance = o.dp;
    l.tp_rank = world_rank;
    l.dp_size = o.dp;
    l.attn_tp_size = o.tp / o.dp;
    l.dp_rank = world_rank / l.attn_tp_size;  // DP-major contiguous blocks
    l.attn_tp_rank = world_rank % l.attn_tp_size;
  } else {
    t.instances = o.dp;
    t.instance = world_rank / o.tp;
    l.tp_rank = world_rank % o.tp;
    l.dp_size = o.dp;
    l.dp_rank = t.instance;
    l.attn_tp_size = o.tp;
    l.attn_tp_rank = l.tp_rank;
  }
  return t;
}

void check_model_fits(const Topology& t, const model::ModelConfig& c) {
  model::check_layout(c, t.layout);
}

}  // namespace mlaserve::parallel
