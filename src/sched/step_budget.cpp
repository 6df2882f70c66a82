#include "sched/step_budget.h"

#include <algorithm>
#include <cmath>

namespace mlaserve::sched {

namespace {

// Weight of the newest step in the running averages: about the last 4 steps count.
constexpr double kNewest = 0.25;

void update(double& average, bool& known, double sample) {
  average = known ? average + kNewest * (sample - average) : sample;
  known = true;
}

}  // namespace

StepTimeBudget::StepTimeBudget(double target_ms, int64_t cap, int64_t floor)
    : target_ms_(target_ms), cap_(std::max<int64_t>(1, cap)), floor_(std::max<int64_t>(1, floor)) {}

void StepTimeBudget::record(int64_t prefill_tokens, double step_ms) {
  if (prefill_tokens <= 0) {
    update(base_ms_, base_known_, step_ms);
    return;
  }
  // The prompt tokens' share of the step: what the fixed part does not explain. Before any
  // step without prompt tokens was seen, the whole step is charged to its tokens (pessimistic),
  // and the first share measured against a known fixed part replaces that guess.
  const double share = std::max(step_ms - (base_known_ ? base_ms_ : 0.0), 0.0);
  if (base_known_ && !token_measured_on_base_) token_known_ = false;
  token_measured_on_base_ = base_known_;
  update(token_ms_, token_known_, share / static_cast<double>(prefill_tokens));
}

int64_t StepTimeBudget::prefill_tokens() const {
  if (target_ms_ <= 0 || !token_known_ || token_ms_ <= 0) return cap_;
  const double room = target_ms_ - (base_known_ ? base_ms_ : 0.0);
  const double tokens = std::floor(room / token_ms_);
  const int64_t floor = std::min(floor_, cap_);
  if (tokens <= static_cast<double>(floor)) return floor;
  return std::min(cap_, static_cast<int64_t>(std::min(tokens, 1e15)));
}

}  // namespace mlaserve::sched
