// Flags shared by every subcommand that loads a model.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "kernels/ops.h"

namespace mlaserve::tools {

struct ModelOptions {
  std::string model_dir;
  std::string dtype = "bfloat16";
  std::string kernels = "fast";

  void add_to(CLI::App& cmd, bool model_required = true);
  // The weight type for --dtype. (--kernels takes effect while the flags are parsed.)
  kernels::WeightType weight_type() const;
};

}  // namespace mlaserve::tools
