// Rank 0's planner for a fixed set of prompts (eval, bench-one-batch): prompts are dealt to the
// DP groups round robin; each step a group prefills up to `prefill_per_step` waiting prompts
// (prefill first, as SGLang) or else decodes its running sequences by one greedy token.
#pragma once

#include <cstdint>
#include <vector>

#include "cache/latent_kv_pool.h"
#include "runtime/plan.h"

namespace mlaserve::runtime {

struct StaticRequest {
  std::vector<int32_t> prompt;
  int64_t max_new_tokens = 0;
  bool all_logits = false;     // keep the logits of every prompt position
  bool return_logits = false;  // keep prompt and step logits at all
  bool mtp = false;            // also run the MTP module over the prompt (teacher-forced)
};

struct StaticOutput {
  std::vector<float> prompt_logits;  // [rows, vocab]: last position, or all with all_logits
  std::vector<int32_t> generated;    // greedy tokens
  std::vector<std::vector<float>> step_logits;  // logits each generated token was chosen from
  std::vector<float> mtp_logits;  // [prompt - 1, vocab]: the MTP module's, for t_{i+2} at i
};

class StaticPlanner {
 public:
  StaticPlanner(int groups, int64_t kv_tokens_per_group, std::vector<StaticRequest> requests,
                int64_t prefill_per_step);

  // KV slots one group needs to hold all its prompts at once (round-robin dealing).
  static int64_t kv_tokens_needed(const std::vector<StaticRequest>& requests, int groups);

  bool done() const;
  StepPlan next_plan();
  void apply(const std::vector<SequenceResult>& results);
  const std::vector<StaticOutput>& outputs() const { return outputs_; }

 private:
  struct Sequence {
    int group = 0;
    bool admitted = false;
    int64_t n_cached = 0;
    std::vector<int32_t> slots;
  };
  bool finished(size_t i) const;

  std::vector<StaticRequest> requests_;
  std::vector<StaticOutput> outputs_;
  std::vector<Sequence> seqs_;
  std::vector<cache::SlotAllocator> allocators_;  // one per group (metadata only)
  int64_t prefill_per_step_;
};

}  // namespace mlaserve::runtime
