// mlaserve: one binary, one subcommand per job. Errors reach the user as one line on stderr.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <exception>

#include "core/error.h"
#include "runtime/launch.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  mlaserve::runtime::set_command_line(argc, argv);
  CLI::App app{"mlaserve: serve DeepSeek-style (MLA + MoE) models on CPUs over MPI ranks"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  mlaserve::tools::add_make_model(app);
  mlaserve::tools::add_eval(app);
  mlaserve::tools::add_perplexity(app);
  mlaserve::tools::add_serve(app);
  mlaserve::tools::add_bench_one_batch(app);
  mlaserve::tools::add_tokenizer_commands(app);
  mlaserve::tools::add_bench_serving(app);
  mlaserve::tools::add_plan(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const mlaserve::Error& e) {
    std::fprintf(stderr, "mlaserve: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mlaserve: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
