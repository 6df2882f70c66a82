// mlaserve eval: prompt logits and greedy continuations for token-id prompts (golden tests),
// on any parallel layout.
#include <mpi.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "core/error.h"
#include "runtime/launch.h"
#include "runtime/rank_report.h"
#include "runtime/static_planner.h"
#include "runtime/worker.h"
#include "tools/commands.h"
#include "tools/json_input.h"
#include "tools/model_options.h"
#include "tools/parallel_options.h"
#include "tools/rank_loop.h"

namespace mlaserve::tools {

namespace {

using nlohmann::json;

struct EvalOptions {
  ModelOptions model;
  ParallelFlags parallel;
  std::string input, output;
  int64_t max_new_tokens = 16;
  int64_t prefill_per_step = 0;
  bool all_logits = false, step_logits = false, mtp = false;
};

std::vector<runtime::StaticRequest> read_requests(const EvalOptions& o) {
  const json j = read_json_file(o.input);
  if (!j.is_object() || !j.contains("prompts") || !j["prompts"].is_array()) {
    fail("{}: expected {{\"prompts\": [{{\"ids\": [...]}}, ...]}}", o.input);
  }
  std::vector<runtime::StaticRequest> requests;
  for (const auto& p : j["prompts"]) {
    if (!p.is_object() || !p.contains("ids"))
      fail("{}: each prompt needs an \"ids\" array", o.input);
    runtime::StaticRequest r;
    r.prompt = read_token_ids(p["ids"], fmt::format("{}: prompt {}", o.input, requests.size()));
    r.max_new_tokens = o.max_new_tokens;
    r.all_logits = o.all_logits;
    r.return_logits = true;
    r.mtp = o.mtp;
    requests.push_back(std::move(r));
  }
  return requests;
}

json rows_json(const std::vector<float>& data, int64_t width) {
  json out = json::array();
  for (size_t at = 0; at < data.size(); at += static_cast<size_t>(width)) {
    out.push_back(std::vector<float>(data.begin() + static_cast<long>(at),
                                     data.begin() + static_cast<long>(at) + width));
  }
  return out;
}

// The MTP module's top-10 logits of each row: ids and values, best first.
json mtp_json(const std::vector<float>& logits, int64_t V) {
  constexpr size_t kTop = 10;
  json rows = json::array();
  for (size_t at = 0; at + static_cast<size_t>(V) <= logits.size(); at += static_cast<size_t>(V)) {
    std::vector<int32_t> ids(static_cast<size_t>(V));
    std::iota(ids.begin(), ids.end(), 0);
    const float* row = logits.data() + at;
    const size_t k = std::min(kTop, ids.size());
    std::partial_sort(ids.begin(), ids.begin() + static_cast<long>(k), ids.end(),
                      [row](int32_t a, int32_t b) { return row[a] > row[b]; });
    ids.resize(k);
    std::vector<float> values;
    for (int32_t id : ids) values.push_back(row[id]);
    rows.push_back({{"top_ids", ids}, {"top_logits", values}});
  }
  return rows;
}

json output_json(const std::vector<runtime::StaticRequest>& requests,
                 const std::vector<runtime::StaticOutput>& outputs, const EvalOptions& o,
                 int64_t V) {
  json prompts = json::array();
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto& out = outputs[i];
    const std::vector<float> last(out.prompt_logits.end() - V, out.prompt_logits.end());
    json p = {{"ids", requests[i].prompt}, {"last_logits", last}, {"greedy", out.generated}};
    if (o.all_logits) p["all_logits"] = rows_json(out.prompt_logits, V);
    if (o.mtp) p["mtp"] = mtp_json(out.mtp_logits, V);
    if (o.step_logits) {
      json steps = json::array({last});
      for (const auto& s : out.step_logits) steps.push_back(s);
      p["greedy_logits"] = steps;
    }
    prompts.push_back(std::move(p));
  }
  return {{"prompts", prompts}};
}

void run_rank(const EvalOptions& o, const runtime::MpiSession& mpi) {
  const parallel::Topology topo =
      parallel::compute_topology(o.parallel.layout, mpi.rank(), mpi.size());
  const models::ModelCard card = o.model.read_card(topo, o.mtp, 0);
  std::vector<runtime::StaticRequest> requests;
  const int groups = topo.instances * topo.groups_per_instance;
  int64_t kv_tokens = 0;
  if (mpi.rank() == 0) {
    requests = read_requests(o);
    kv_tokens = runtime::StaticPlanner::kv_tokens_needed(requests, groups);
  }
  MPI_Bcast(&kv_tokens, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);

  const std::unique_ptr<model::Model> model = o.model.load(card, topo, o.mtp);
  runtime::Worker worker(topo, *model, {kv_tokens, o.model.kv_dtype(), o.parallel.comm_options()});
  if (mpi.rank() != 0) {
    follow_rank0(worker);
    runtime::gather_rank_reports(worker);
    return;
  }
  const auto n = static_cast<int64_t>(requests.size());
  runtime::StaticPlanner planner(groups, kv_tokens, requests,
                                 o.prefill_per_step > 0 ? o.prefill_per_step : n);
  // Past the Worker's communicator setup, a collective: every rank has its model loaded.
  spdlog::info("eval: all ranks loaded; generating for {} prompts", n);
  run_until_done(worker, planner);
  shut_down_followers(worker);

  json result = output_json(requests, planner.outputs(), o, model->info().vocab_size);
  result["ranks"] = runtime::gather_rank_reports(worker);
  std::ofstream out(o.output);
  if (!out) fail("cannot write --output {}", o.output);
  out << result.dump() << "\n";
  spdlog::info(
      "eval: {} prompts, {} new tokens each, {} steps, {} padded MLP rows, layout {}, wrote {}", n,
      o.max_new_tokens, worker.stats().steps, worker.stats().padded_rows,
      o.parallel.layout.describe(), o.output);
}

}  // namespace

void add_eval(CLI::App& app) {
  auto opts = std::make_shared<EvalOptions>();
  CLI::App* cmd =
      app.add_subcommand("eval", "Prompt logits and greedy continuations for token-id prompts");
  opts->model.add_to(*cmd);
  opts->parallel.add_to(*cmd);
  cmd->add_option("--input", opts->input, "JSON {\"prompts\":[{\"ids\":[...]}, ...]}")->required();
  cmd->add_option("--output", opts->output,
                  "JSON {\"prompts\":[{\"ids\", \"last_logits\", \"greedy\"}, ...]} to write")
      ->required();
  cmd->add_option("--max-new-tokens", opts->max_new_tokens, "Greedy tokens to generate per prompt")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option(
         "--prefill-per-step", opts->prefill_per_step,
         "Prompts a DP group prefills per step (0: all at once); 1 makes groups interleave prefill "
         "and decode")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_flag("--all-logits", opts->all_logits,
                "Also write \"all_logits\": the logits at every prompt position");
  cmd->add_flag("--step-logits", opts->step_logits,
                "Also write \"greedy_logits\": the logits each greedy token was chosen from");
  cmd->add_flag("--mtp", opts->mtp,
                "Load the checkpoint's multi-token-prediction layer and write \"mtp\": its top-10 "
                "logits (ids and values) for t(i+2) at every prompt position i but the last, "
                "teacher-forced with the prompt's own next tokens");
  cmd->callback([opts] {
    runtime::run_ranks(opts->parallel.layout.world_size(), opts->parallel.watchdog_options(),
                       [&](const runtime::MpiSession& mpi) { run_rank(*opts, mpi); });
  });
}

}  // namespace mlaserve::tools
