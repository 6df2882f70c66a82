#include "tools/rank_loop.h"

namespace mlaserve::tools {

void follow_rank0(runtime::Worker& worker) {
  runtime::StepPlan plan;
  do worker.step(nullptr, &plan);
  while (!plan.shutdown);
}

void run_until_done(runtime::Worker& worker, runtime::StaticPlanner& planner) {
  while (!planner.done()) {
    const runtime::StepPlan plan = planner.next_plan();
    planner.apply(worker.step(&plan));
  }
}

void shut_down_followers(runtime::Worker& worker) {
  runtime::StepPlan shutdown;
  shutdown.shutdown = true;
  worker.step(&shutdown);
}

}  // namespace mlaserve::tools
