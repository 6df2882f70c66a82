// The step loop shared by the commands: rank 0 plans every step and the other ranks follow its
// plans until it sends the shutdown plan (serve's rank 0 loop is ServingEngine::run).
#pragma once

#include "runtime/static_planner.h"
#include "runtime/worker.h"

namespace mlaserve::tools {

// Ranks other than 0: run the steps rank 0 broadcasts, until its shutdown plan.
void follow_rank0(runtime::Worker& worker);

// Rank 0: runs steps until every request of `planner` is done.
void run_until_done(runtime::Worker& worker, runtime::StaticPlanner& planner);

// Rank 0: sends the shutdown plan that ends follow_rank0 on the other ranks.
void shut_down_followers(runtime::Worker& worker);

}  // namespace mlaserve::tools
