// What every rank runs each step: receive the plan from rank 0, run this rank's share of the
// forward (its group's tokens, its shards, every collective), and let the group leaders send
// their sequences' results back to rank 0.
#pragma once

#include <memory>
#include <span>
#include <unordered_map>

#include "model/model.h"
#include "parallel/mpi_step_comm.h"
#include "runtime/plan.h"

namespace mlaserve::runtime {

struct WorkerOptions {
  int64_t kv_capacity_tokens = 0;       // latent KV slots per rank
  KvDtype kv_dtype = KvDtype::Float32;  // how the pool stores them (--kv-cache-dtype)
  parallel::StepCommOptions comm;
};

struct StepStats {
  int64_t steps = 0;
  int64_t padded_rows = 0;  // MLP rows beyond the real tokens (non-zero only in legacy padding)
};

class Worker {
 public:
  Worker(const parallel::Topology& topology, model::Model& model, const WorkerOptions& options);
  ~Worker();

  // Collective over the world: rank 0 passes the plan, the other ranks nullptr. Returns, on
  // rank 0, every group's results; an empty vector elsewhere. A shutdown plan returns at once.
  std::vector<SequenceResult> step(const StepPlan* plan_on_rank0, StepPlan* received = nullptr);

  // Claims the memory of steps of up to group_tokens new tokens per group and logit_rows rows
  // of logits: the model's step buffers and matmul scratch (Model::reserve_step_buffers),
  // the collectives' scratch and this worker's own. Returns the bytes they hold.
  size_t reserve_step_buffers(int64_t group_tokens, int64_t logit_rows);

  const parallel::Topology& topology() const { return topology_; }
  model::Model& model() { return model_; }
  const StepStats& stats() const { return stats_; }
  const parallel::CommStats& comm_stats() const { return step_comm_.stats(); }
  int64_t kv_capacity_tokens() const { return kv_->capacity_tokens(); }
  KvDtype kv_dtype() const { return kv_->dtype(); }

 private:
  StepPlan broadcast_plan(const StepPlan* plan);
  void apply_snapshot_ops(const StepPlan& plan);
  std::vector<SequenceResult> run(const StepPlan& plan);
  // The plans of this rank's model instance's DP groups (every group runs every collective).
  std::span<const GroupPlan> instance_groups(const StepPlan& plan) const;
  std::vector<SequenceResult> gather_results(const std::vector<SequenceResult>& mine);
  // A drafting sequence's outcome this step: the tokens it keeps, the last new row the main
  // model agreed with (its MTP row gives the first draft), and the next step's drafts.
  struct Speculation {
    std::vector<int32_t> tokens;
    int64_t accepted_row = 0;
    std::vector<int32_t> drafts;
  };
  Speculation accept_drafts(const PlannedSequence& s, const float* rows);
  std::vector<float> run_mtp(const StepPlan& plan, std::vector<Speculation>& spec);
  int32_t draft_token(const PlannedSequence& s, const float* row,
                      const std::vector<int32_t>& earlier_drafts);
  std::span<const float> penalised(std::span<const float> row, const sampling::TokenCounts& counts,
                                   const sampling::SamplingParams& params);
  SequenceResult sequence_result(const PlannedSequence& s, const float* rows, Speculation& spec,
                                 const float* mtp_rows);
  static bool uses_sampler(const PlannedSequence& s);
  SequenceResult pick_token(const PlannedSequence& s, const float* last_row);
  void add_logprobs(const PlannedSequence& s, const float* row, int32_t token,
                    SequenceResult& r) const;

  const parallel::Topology& topology_;
  model::Model& model_;
  parallel::Communicators communicators_;
  parallel::MpiStepComm step_comm_;
  std::unique_ptr<model::KvStore> kv_;
  StepStats stats_;
  std::vector<float> final_hidden_, mtp_hidden_;  // the MTP pass's inputs, kept between steps
  std::vector<sampling::Candidate> candidates_;   // accept_drafts' scratch
  std::unordered_map<uint64_t, sampling::Sampler>
      samplers_;  // group leaders: one per sampled request
  // Speculating requests with penalties, on every rank of their group: the counts of the
  // tokens generated so far, which each rank updates alike from its own verification.
  std::unordered_map<uint64_t, sampling::TokenCounts> spec_counts_;
  std::vector<float> penalised_row_;  // penalised()'s scratch
};

}  // namespace mlaserve::runtime
