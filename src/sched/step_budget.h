// How many prompt tokens the next step may prefill so that the step takes about a target time.
// With mixed steps every running request decodes in each step, so a step's time bounds the
// time between its tokens (TPOT) while waiting prompts are prefilled alongside.
//
// The cost model is a step's fixed part (streaming the weights, the decode rows; measured on
// steps without prompt tokens) plus a cost per prompt token (measured on steps with them):
//   step_ms ~= base_ms + prefill_tokens * token_ms
// Both are running averages, so the budget follows the machine, the model and the batch.
#pragma once

#include <cstdint>

namespace mlaserve::sched {

class StepTimeBudget {
 public:
  // target_ms <= 0 turns the budget off (every step may prefill up to `cap`). `floor` prompt
  // tokens are always allowed, so prefill progresses even when decoding alone exceeds the target.
  StepTimeBudget(double target_ms, int64_t cap, int64_t floor);

  // A finished step: how many prompt (extend) tokens it ran and how long it took.
  void record(int64_t prefill_tokens, double step_ms);

  // Prompt tokens the next step may run, over all DP groups: in [min(floor, cap), cap]; the cap
  // until a step with prompt tokens has been measured.
  int64_t prefill_tokens() const;

  double base_ms() const { return base_ms_; }
  double token_ms() const { return token_ms_; }

 private:
  double target_ms_;
  int64_t cap_, floor_;
  double base_ms_ = 0, token_ms_ = 0;
  bool base_known_ = false, token_known_ = false, token_measured_on_base_ = false;
};

}  // namespace mlaserve::sched
