// StepComm over MPI: the DP-attention gather/scatter, vocab-parallel reductions and the
// dp_linear all-gather, on the tp / attn_tp / cross_dp communicators below.
#pragma once

#include <mpi.h>

#include "model/step_comm.h"
#include "parallel/collectives.h"
#include "parallel/padding.h"
#include "parallel/topology.h"

namespace mlaserve::parallel {

// MPI communicators of one rank: world; tp (the model instance); attn_tp (the attention group);
// cross_dp (the ranks of the instance with the same attn_tp_rank, one per group).
class Communicators {
 public:
  explicit Communicators(const Topology& t);
  ~Communicators();
  Communicators(const Communicators&) = delete;
  Communicators& operator=(const Communicators&) = delete;
  MPI_Comm world = MPI_COMM_WORLD, tp = MPI_COMM_NULL, attn_tp = MPI_COMM_NULL,
           cross_dp = MPI_COMM_NULL;
};

struct StepCommOptions {
  PaddingPolicy padding = PaddingPolicy::Auto;
  int64_t dp_linear_min_tokens =
      0;  // shard q_a/kv_a when an extend step has at least this many tokens (and >= P)
  bool check_collectives = false;
};

class MpiStepComm final : public model::StepComm {
 public:
  MpiStepComm(const Topology& topology, const Communicators& comms, const StepCommOptions& options);

  // Before each forward: the local token counts of every DP group of this instance, in group
  // order, and whether any of them extends (prefill). Every rank passes the same values.
  void begin_step(const std::vector<int64_t>& group_rows, bool any_extend);
  const GatherLayout& gather_layout() const { return gather_; }

  // Allocates the scratch of steps of up to group_tokens rows per DP group and logit_rows rows
  // of logits, so that no step allocates; returns the bytes held (scratch_bytes()).
  size_t reserve(int64_t group_tokens, int64_t logit_rows, int64_t hidden, int64_t vocab);
  size_t scratch_bytes() const;
  const CommStats& stats() const { return stats_; }

  void begin_layer(int64_t layer) override;
  bool shard_tokens(int64_t n_tokens) const override;
  model::Range token_shard(int64_t n_tokens) const override;
  void gather_token_rows(const float* shard, int64_t n_tokens, int64_t width, float* rows) override;
  void sum_over_attn_tp(float* data, int64_t count) override;
  void attention_to_mlp(const float* attn_partial, float* residual, int64_t n_local, int64_t hidden,
                        std::vector<float>& mlp_input) override;
  void mlp_to_attention(const float* mlp_partial, float* residual, int64_t n_local,
                        int64_t hidden) override;
  void gather_groups(const float* local, int64_t n_local, int64_t width,
                     std::vector<float>& all) override;
  void reduce_to_group(const float* partial, int64_t n_local, int64_t width, float* out) override;
  void gather_vocab(const float* logits_shard, int64_t rows, int64_t vocab, float* logits) override;

 private:
  const float* group_sums(const float* mlp_partial, int64_t hidden);
  void gather_reduced_rows(const float* local, int64_t hidden, std::vector<float>& mlp_input);
  const float* reduce_scatter_group_rows(const float* mlp_partial, int64_t hidden);

  const Topology& topology_;
  StepCommOptions options_;
  CommStats stats_;
  Collectives tp_, attn_tp_, cross_dp_;
  GatherLayout gather_;
  ScatterLayout scatter_;
  bool any_extend_ = false;
  // Scratch kept across steps (core/scratch.h): a group's summed rows, zero-padded blocks,
  // gathered blocks or rows, this rank's reduce-scatter shard, the vocab blocks of the logits.
  std::vector<float> summed_, padded_, gathered_, shard_, vocab_blocks_;
};

}  // namespace mlaserve::parallel
