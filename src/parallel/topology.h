// Who is who among the ranks. All group arithmetic lives here.
//
// Three layouts, one code path:
//  * pure TP (dp = 1): world = tp ranks, one group.
//  * DP attention (--enable-dp-attention): world = tp ranks; attention runs in dp groups of
//    attn_tp = tp / dp ranks (DP-major: group = rank / attn_tp), the MLP over all tp ranks.
//  * plain replicas (dp > 1 without DP attention): world = tp * dp ranks; replica r holds
//    ranks [r*tp, (r+1)*tp) and is a pure-TP instance of its own.
#pragma once

#include <string>

#include "model/config.h"
#include "model/sharding.h"

namespace mlaserve::parallel {

struct ParallelOptions {
  int tp = 1;
  int dp = 1;
  bool dp_attention = false;
  bool dp_linear = false;
  bool ep_moe = false;

  int world_size() const { return dp_attention ? tp : tp * dp; }
  std::string describe() const;
};

struct Topology {
  ParallelOptions options;
  int world_rank = 0, world_size = 1;
  int instance = 0;             // which model instance (replica) this rank belongs to
  int instances = 1;            // dp for plain replicas, else 1
  int groups_per_instance = 1;  // dp under DP attention, else 1
  model::RankLayout layout;     // tp/attn_tp/dp positions inside the instance
  bool group_leader() const { return layout.attn_tp_rank == 0; }
  int group() const { return layout.dp_rank; }  // global DP group id (= replica id for replicas)
  int group_in_instance() const { return groups_per_instance > 1 ? layout.dp_rank : 0; }
};

// Checks the options alone (tp, dp >= 1; DP attention's dp >= 2 and tp divisible by dp; the job's
// world size) and places world_rank; check_model_fits does the checks that need the model. Throws
// mlaserve::Error with a precise message on any violation.
Topology compute_topology(const ParallelOptions& options, int world_rank, int world_size);

// Model-dependent checks: heads divisible by attn_tp, at least one intermediate column per tp
// rank (dense and, under TP-MoE, expert), and tp <= experts under EP-MoE.
void check_model_fits(const Topology& topology, const model::ModelConfig& config);

}  // namespace mlaserve::parallel
