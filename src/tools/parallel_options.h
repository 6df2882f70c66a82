// Parallel-layout flags shared by eval, bench-one-batch and serve.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "parallel/mpi_step_comm.h"
#include "parallel/topology.h"

namespace mlaserve::tools {

struct ParallelFlags {
  parallel::ParallelOptions layout;
  std::string dp_padding = "auto";
  int64_t dp_linear_min_tokens = 64;
  bool check_collectives = false;

  void add_to(CLI::App& cmd);
  parallel::StepCommOptions comm_options() const;
};

}  // namespace mlaserve::tools
