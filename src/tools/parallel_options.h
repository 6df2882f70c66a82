// Parallel-layout flags shared by the commands that run ranks (eval, perplexity, bench-one-batch,
// serve).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "parallel/collective_watchdog.h"
#include "parallel/mpi_step_comm.h"
#include "parallel/topology.h"

namespace mlaserve::tools {

struct ParallelFlags {
  parallel::ParallelOptions layout;
  std::string dp_padding = "auto";
  int64_t dp_linear_min_tokens = 64;
  bool check_collectives = false;
  double collective_timeout_s = parallel::WatchdogOptions{}.floor_seconds;

  void add_to(CLI::App& cmd);
  parallel::StepCommOptions comm_options() const;
  parallel::WatchdogOptions watchdog_options() const;
};

}  // namespace mlaserve::tools
