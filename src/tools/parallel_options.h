// Parallel-layout flags shared by eval, bench-one-batch and serve.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "dist/mpi_step_comm.h"
#include "dist/topology.h"

namespace mlaserve::tools {

struct ParallelFlags {
  dist::ParallelOptions layout;
  std::string dp_padding = "auto";
  int64_t dp_linear_min_tokens = 64;
  bool check_collectives = false;

  void add_to(CLI::App& cmd);
  dist::StepCommOptions comm_options() const;
};

}  // namespace mlaserve::tools
