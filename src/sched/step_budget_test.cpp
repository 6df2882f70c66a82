#include "sched/step_budget.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "sched/group_scheduler.h"

namespace mlaserve::sched {
namespace {

TEST(StepTimeBudget, IsTheCapWhenOffOrNotYetMeasured) {
  StepTimeBudget off(0, 8192, 128);
  off.record(1000, 500);
  EXPECT_EQ(off.prefill_tokens(), 8192);
  StepTimeBudget fresh(250, 8192, 128);
  fresh.record(0, 50);  // decode steps alone say nothing about prompt tokens
  EXPECT_EQ(fresh.prefill_tokens(), 8192);
}

TEST(StepTimeBudget, FillsTheTargetLeftByTheDecodesAtTheMeasuredCostPerToken) {
  StepTimeBudget b(250, 8192, 128);
  b.record(0, 50);       // decode step: 50 ms
  b.record(1000, 1050);  // 1000 prompt tokens cost 1000 ms beside it: 1 ms each
  EXPECT_DOUBLE_EQ(b.base_ms(), 50);
  EXPECT_DOUBLE_EQ(b.token_ms(), 1);
  EXPECT_EQ(b.prefill_tokens(), 200);
}

TEST(StepTimeBudget, KeepsTheFloorWhenDecodesAloneExceedTheTargetAndTheCapWhenFast) {
  StepTimeBudget slow(100, 8192, 128);
  slow.record(0, 300);
  slow.record(100, 400);
  EXPECT_EQ(slow.prefill_tokens(), 128);
  StepTimeBudget fast(1000, 500, 128);
  fast.record(0, 10);
  fast.record(1000, 20);
  EXPECT_EQ(fast.prefill_tokens(), 500);
}

// A simulated machine whose step takes 40 ms + 0.5 ms per prompt token + 1 ms per decode row:
// four requests decode while a 4000-token prompt arrives. After the first step with prompt
// tokens (run at the cap, before anything is measured), no step exceeds the 250 ms target by
// more than a 10 % estimation error, the decodes run every step, and the prompt finishes in
// about as many steps as the target allows.
TEST(StepTimeBudget, ALongPromptIsSplitSoStepsStayNearTheTarget) {
  constexpr double kTarget = 250;
  GroupScheduler group(100000, {.chunk_tokens = 2048, .max_running = 16});
  StepTimeBudget budget(kTarget, 2048, 128);
  auto run_step = [&](int64_t* prompt_tokens = nullptr) {
    runtime::GroupPlan plan = group.plan_step(budget.prefill_tokens());
    int64_t prompt = 0, decodes = 0;
    for (const auto& p : plan.seqs) {
      (p.is_decode() ? decodes : prompt) += static_cast<int64_t>(p.new_tokens.size());
      if (!p.sample) continue;
      for (const auto& r : group.running())
        if (r->id == p.id) r->generated.push_back(1);
    }
    const double ms = 40 + 0.5 * static_cast<double>(prompt) + static_cast<double>(decodes);
    budget.record(prompt, ms);
    if (prompt_tokens) *prompt_tokens = prompt;
    return ms;
  };
  for (uint64_t id = 1; id <= 4; ++id) {
    auto r = std::make_shared<ActiveRequest>();
    r->id = id;
    r->request.prompt = {1, 2, 3};
    r->request.max_new_tokens = 1000;
    group.enqueue(r);
  }
  run_step();  // the four short prompts (at the cap: nothing is measured yet)
  run_step();  // a decode step: the fixed part
  auto long_prompt = std::make_shared<ActiveRequest>();
  long_prompt->id = 9;
  long_prompt->request.prompt.assign(4000, 5);
  long_prompt->request.max_new_tokens = 10;
  group.enqueue(long_prompt);
  int steps = 0;
  double worst = 0;
  while (!long_prompt->prefill_done() || long_prompt->generated.empty()) {
    int64_t prompt = 0;
    const double ms = run_step(&prompt);
    ASSERT_GT(prompt, 0);
    worst = std::max(worst, ms);
    ASSERT_LE(++steps, 40);
  }
  EXPECT_LE(worst, kTarget * 1.1);
  // (250 - 44) / 0.5 = 412 tokens a step: 10 steps, and one more while the estimate settles.
  EXPECT_LE(steps, 11);
}

}  // namespace
}  // namespace mlaserve::sched
