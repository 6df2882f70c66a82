// Each subcommand lives in its own file and registers itself on the CLI here.
#pragma once

#include <CLI/CLI.hpp>

namespace mlaserve::tools {

void add_make_model(CLI::App& app);
void add_eval(CLI::App& app);
void add_perplexity(CLI::App& app);
void add_bench_one_batch(CLI::App& app);
void add_serve(CLI::App& app);
void add_tokenizer_commands(CLI::App& app);
void add_bench_serving(CLI::App& app);
void add_plan(CLI::App& app);

}  // namespace mlaserve::tools
