#include "parallel/layout_planner.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace mlaserve::parallel {

namespace {

std::vector<ParallelOptions> candidate_layouts(int ranks, bool has_experts) {
  std::vector<ParallelOptions> layouts;
  for (int tp = 1; tp <= ranks; ++tp) {
    if (ranks % tp != 0) continue;
    layouts.push_back({.tp = tp, .dp = ranks / tp});  // dp > 1: replicas of a tp-rank model
  }
  for (int dp = 2; dp <= ranks; ++dp) {
    if (ranks % dp == 0) layouts.push_back({.tp = ranks, .dp = dp, .dp_attention = true});
  }
  if (!has_experts) return layouts;
  const size_t without_ep = layouts.size();
  for (size_t i = 0; i < without_ep; ++i) {
    if (layouts[i].tp == 1) continue;
    ParallelOptions ep = layouts[i];
    ep.ep_moe = true;
    layouts.push_back(ep);
  }
  return layouts;
}

// Bytes one rank streams in a decode step of `tokens` tokens through its instance's MLP: what
// every step reads once, and of the routed experts those that at least one token picks: with
// top_k of E picked per token, independently and uniformly, 1 - (1 - top_k / E)^tokens of them.
double decode_step_bytes(const model::ModelSizing& m, const model::RankSizing& w, int64_t tokens) {
  double experts = 0;
  if (m.routed_experts > 0) {
    const double not_picked =
        1.0 - static_cast<double>(m.experts_per_token) / static_cast<double>(m.routed_experts);
    const double touched = 1.0 - std::pow(not_picked, static_cast<double>(tokens));
    experts = static_cast<double>(w.routed_expert_bytes) * touched;
  }
  return static_cast<double>(w.step_bytes) + experts;
}

// Bytes a rank sends per token, ring algorithms (an all-reduce over P ranks sends 2 (P-1)/P of
// its buffer, an all-gather or reduce-scatter (P-1)/P of the whole result). Per layer: pure TP
// all-reduces the attention output and the MLP output ([H] float32 per token); DP attention
// all-reduces attention inside a group of a = tp/dp ranks, all-gathers every group's tokens
// for the MLP, reduce-scatters the MLP output over tp and all-gathers it inside the group. Once
// per step, the vocabulary blocks of the logits are all-gathered inside the group.
double comm_bytes_per_token(const model::ModelSizing& m, const ParallelOptions& o) {
  const auto share = [](double p) { return (p - 1) / p; };
  const double row = 4.0 * static_cast<double>(m.hidden_size);
  const double logits = 4.0 * static_cast<double>(m.vocab_size);
  const double layers = static_cast<double>(m.layers);
  if (!o.dp_attention) {
    const double tp = o.tp;
    return layers * 2 * 2 * share(tp) * row + share(tp) * logits;
  }
  const double tp = o.tp, dp = o.dp, a = tp / dp;
  const double per_layer = row * (3 * share(a) / dp + share(dp) + share(tp));
  return layers * per_layer + share(a) / dp * logits;
}

// Ranks are numbered host-major (sockets_per_host consecutive ranks per host); a group of
// `size` consecutive ranks starting at multiples of size stays on one host when it fits in one
// and the hosts' rank count is a multiple of it.
bool spans_hosts(int size, int sockets_per_host) {
  return size > sockets_per_host || sockets_per_host % size != 0;
}

LayoutPlan plan_layout(const model::ModelSizing& m, const Machines& machines,
                       const Workload& workload, const ParallelOptions& options) {
  LayoutPlan p;
  p.options = options;
  p.attention_spans_hosts = spans_hosts(options.dp_attention ? options.tp / options.dp : options.tp,
                                        machines.sockets_per_host);
  const int world = options.world_size();
  Topology t0;
  try {
    t0 = compute_topology(options, 0, world);
    m.check_layout(t0.layout);  // the same sizes on every rank
  } catch (const Error& e) {
    p.why_not = e.what();
    return p;
  }
  // Every model instance holds the same shards: the first instance's tp ranks are all of them.
  const int64_t instance_tokens =
      (workload.concurrency + t0.instances - 1) / t0.instances;  // per replica
  for (int r = 0; r < options.tp; ++r) {
    const model::RankSizing w = m.rank(compute_topology(options, r, world).layout);
    p.weight_value_bytes = std::max(p.weight_value_bytes, w.value_bytes);
    p.resident_weight_bytes = std::max(p.resident_weight_bytes, w.resident_bytes);
    p.decode_bytes_per_token =
        std::max(p.decode_bytes_per_token, decode_step_bytes(m, w, instance_tokens));
  }
  p.decode_bytes_per_token /= static_cast<double>(instance_tokens);
  p.comm_bytes_per_token = comm_bytes_per_token(m, options);
  const bool crosses_network = spans_hosts(options.tp, machines.sockets_per_host);
  p.seconds_per_token = p.decode_bytes_per_token / machines.mem_bandwidth +
                        p.comm_bytes_per_token /
                            (crosses_network ? machines.network_bandwidth : machines.mem_bandwidth);

  // A group's ranks each hold its KV whole: the running requests' fixed parts, then tokens.
  const int64_t groups = int64_t{t0.groups_per_instance} * t0.instances;
  const int64_t group_requests = (workload.concurrency + groups - 1) / groups;
  p.kv_bytes_per_rank = std::max<int64_t>(
      0, static_cast<int64_t>(machines.usable_bytes_per_rank()) - p.resident_weight_bytes);
  p.kv_tokens_per_group =
      std::max<int64_t>(0, p.kv_bytes_per_rank - group_requests * m.kv_bytes_per_request) /
      m.kv_bytes_per_token;
  p.kv_tokens = p.kv_tokens_per_group * groups;
  const int64_t needed = workload.context * workload.concurrency;
  if (p.kv_bytes_per_rank == 0) {
    p.why_not = "the weights do not fit in a rank's memory";
  } else if (p.kv_tokens_per_group < workload.context) {
    p.why_not = "a DP group's KV cache is shorter than one context";
  } else if (p.kv_tokens < needed) {
    p.why_not = "the KV cache holds fewer tokens than concurrency x context";
  } else {
    p.fits = true;
  }
  return p;
}

bool better(const LayoutPlan& a, const LayoutPlan& b) {
  if (a.fits != b.fits) return a.fits;
  // Within 2 %, estimates are a tie that the other criteria break.
  if (std::abs(a.seconds_per_token - b.seconds_per_token) >
      0.02 * std::max(a.seconds_per_token, b.seconds_per_token)) {
    return a.seconds_per_token < b.seconds_per_token;
  }
  if (a.attention_spans_hosts != b.attention_spans_hosts) return !a.attention_spans_hosts;
  return a.kv_tokens > b.kv_tokens;
}

}  // namespace

std::vector<LayoutPlan> plan_layouts(const model::ModelSizing& model, const Machines& machines,
                                     const Workload& workload) {
  if (machines.hosts < 1 || machines.sockets_per_host < 1)
    fail("plan: --hosts and --sockets-per-host must be at least 1");
  if (machines.mem_per_host_bytes <= 0 || machines.mem_bandwidth <= 0 ||
      machines.network_bandwidth <= 0) {
    fail("plan: --mem-per-host, --mem-bandwidth and --network-bandwidth must be positive");
  }
  if (workload.context < 1 || workload.concurrency < 1)
    fail("plan: --context and --concurrency must be at least 1");
  std::vector<LayoutPlan> plans;
  for (const ParallelOptions& o : candidate_layouts(machines.ranks(), model.routed_experts > 0))
    plans.push_back(plan_layout(model, machines, workload, o));
  std::stable_sort(plans.begin(), plans.end(), better);
  return plans;
}

std::vector<LayoutPlan> plan_layouts(const model::ModelConfig& cfg,
                                     const model::WeightFormat& format, KvDtype kv_dtype,
                                     const model::StoredFp8& stored_fp8, const Machines& machines,
                                     const Workload& workload) {
  return plan_layouts(
      model::deepseek_sizing(cfg, format, kv_dtype, stored_fp8, workload.speculative), machines,
      workload);
}

}  // namespace mlaserve::parallel
