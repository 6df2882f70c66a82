// The engine behind the HTTP server, on rank 0: requests arrive from handler threads through an
// inbox; the main thread (the only one that calls MPI) runs the step loop: take new requests and
// aborts, let each DP group's scheduler plan its part, run the step on every rank, hand each
// request its token.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "runtime/worker.h"
#include "sched/group_scheduler.h"
#include "sched/load_balancer.h"
#include "sched/step_budget.h"

namespace mlaserve::sched {

struct EngineOptions {
  int64_t kv_tokens_per_group = 0;
  GroupLimits limits;
  // Prompt tokens per step over all groups: at most prefill_tokens_per_step, fewer when the
  // step-time target (max_step_time_ms > 0) says so; see StepTimeBudget.
  int64_t prefill_tokens_per_step = 8192;
  double max_step_time_ms = 0;
  LoadBalanceMethod load_balance = LoadBalanceMethod::CacheAware;
  int64_t context_length = 0;
  std::vector<int64_t> eos_token_ids;
  int64_t vocab_size = 0;  // the model's: the width of a structured-output token mask
  // NEXTN speculative decoding: tokens the MTP module drafts per step (0: off). Requests without
  // penalties or a grammar speculate; the others decode one token per step.
  int spec_steps = 0;
  nlohmann::json layout;  // reported by status()
  // While idle, rank 0 sends an empty step this often (0: never), so that the other ranks'
  // collective watchdog can tell an idle server from a lost rank 0.
  double keepalive_seconds = 0;
};

class ServingEngine final : public EngineHandle {
 public:
  ServingEngine(int groups, const EngineOptions& options);

  uint64_t submit(GenerationRequest request, EventSink sink) override;
  void abort(uint64_t id) override;
  bool flush_cache() override;
  nlohmann::json status() const override;
  int64_t context_length() const override { return options_.context_length; }

  // Rank 0's main thread: steps until stop() (from any thread or a signal handler).
  void run(runtime::Worker& worker);
  void stop();

  // One round of the loop without waiting: for tests and the benchmark. Returns false if idle.
  bool step_once(runtime::Worker& worker);
  // Appends one generated token to r and tells its client; false once r has finished. `token` is
  // the k-th the result gives (its logprobs are the k-th).
  bool emit(ActiveRequest& r, const runtime::SequenceResult& res, int32_t token, size_t k);

  // The job failed (the collective watchdog, on its own thread, while the step loop is stuck in
  // MPI): every queued and running request ends with `error`, and so does every later submit.
  void fail_all(const std::string& error);

 private:
  void take_inbox();
  bool flush_all_groups();
  void finish(ActiveRequest& r, FinishReason reason, const std::string& error = "");
  void apply(const std::vector<runtime::SequenceResult>& results);
  void add_token_masks(runtime::StepPlan& plan);
  void allow_end_tokens(const GenerationRequest& request, std::vector<uint64_t>& allowed) const;
  int64_t running_requests() const;  // in every group
  void publish_status();
  void take_snapshot_ops(runtime::StepPlan& plan);
  void send_keepalive(runtime::Worker& worker);

  EngineOptions options_;
  // The step loop's state below (groups, active requests) is the main thread's, except that
  // fail_all() takes it over; the loop holds this while it plans and applies, not during the
  // step's MPI calls.
  std::mutex loop_mutex_;
  std::vector<GroupScheduler> groups_;
  LoadBalancer balancer_;
  StepTimeBudget step_budget_;
  std::unordered_map<uint64_t, std::shared_ptr<ActiveRequest>> active_;
  std::vector<uint64_t> released_;  // ended since the last plan: leaders drop their samplers

  mutable std::mutex inbox_mutex_;
  std::condition_variable inbox_cv_;
  std::deque<std::shared_ptr<ActiveRequest>> inbox_;
  std::vector<uint64_t> aborts_;
  std::vector<std::promise<bool>> flushes_;  // /flush_cache calls waiting for the step loop
  uint64_t next_id_ = 1;
  std::string failed_;  // fail_all's error, under inbox_mutex_
  std::atomic<bool> stop_{false};
  std::chrono::steady_clock::time_point last_step_ = std::chrono::steady_clock::now();

  mutable std::mutex status_mutex_;
  nlohmann::json status_;
  uint64_t requests_finished_ = 0, tokens_generated_ = 0, prompt_tokens_ = 0, steps_ = 0;
  uint64_t mixed_steps_ = 0;  // steps that decoded and prefilled together
  uint64_t spec_verify_steps_ = 0, spec_accepted_drafts_ = 0;  // over every request
  uint64_t prefill_chunks_ = 0;  // prompt chunks that stopped short of the prompt's end
  int64_t running_peak_ = 0;     // the most requests running at once (all groups)
  double schedule_seconds_ = 0, step_seconds_ = 0;
  double mask_seconds_ = 0;  // computing structured-output token masks (part of scheduling)  //
                             // rank 0's planning, and whole busy steps
};

}  // namespace mlaserve::sched
