// Each subcommand lives in its own file and registers itself on the CLI here.
#pragma once

#include <CLI/CLI.hpp>

namespace mlaserve::tools {


}  // namespace mlaserve::tools
