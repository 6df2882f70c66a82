#include "tools/rank_loop.h"

namespace mlaserve::tools {

void follow_rank0(engine::Worker& worker) {
  engine::StepPlan plan;
  do worker.step(nullptr, &plan);
  while (!plan.shutdown);
}

void run_until_done(engine::Worker& worker, engine::StaticPlanner& planner) {
  while (!planner.done()) {
    const engine::StepPlan plan = planner.next_plan();
    planner.apply(worker.step(&plan));
  }
}

void shut_down_followers(engine::Worker& worker) {
  engine::StepPlan shutdown;
  shutdown.shutdown = true;
  worker.step(&shutdown);
}

}  // namespace mlaserve::tools
