// mlaserve bench-one-batch: SGLang's bench_one_batch benchmark. A static batch of synthetic
// prompts: one prefill step, then output_len - 1 decode steps, timed on rank 0 around each step.
#include <spdlog/spdlog.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "runtime/launch.h"
#include "runtime/rank_report.h"
#include "runtime/static_planner.h"
#include "runtime/worker.h"
#include "tools/commands.h"
#include "tools/model_options.h"
#include "tools/parallel_options.h"
#include "tools/rank_loop.h"

namespace mlaserve::tools {

namespace {

struct BenchOptions {
  ModelOptions model;
  ParallelFlags parallel;
  std::vector<int64_t> batch_sizes = {1}, input_lens = {1024}, output_lens = {16};
  std::string result_filename = "result.jsonl";
  std::string run_name = "default";
  uint64_t seed = 1;
};

struct RunTimes {
  double prefill = 0;
  std::vector<double> decode;
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Random token ids (SGLang uses all ones; random ids give the MoE a realistic expert spread).
std::vector<runtime::StaticRequest> synthetic_batch(int64_t batch, int64_t input_len,
                                                    int64_t output_len, int64_t vocab,
                                                    uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab - 1));
  std::vector<runtime::StaticRequest> requests(static_cast<size_t>(batch));
  for (auto& r : requests) {
    r.prompt.resize(static_cast<size_t>(input_len));
    for (auto& t : r.prompt) t = token(rng);
    r.max_new_tokens = output_len;
  }
  return requests;
}

RunTimes run_once(runtime::Worker& worker, int groups,
                  std::vector<runtime::StaticRequest> requests) {
  const auto n = static_cast<int64_t>(requests.size());
  const int64_t kv_tokens = runtime::StaticPlanner::kv_tokens_needed(requests, groups);
  runtime::StaticPlanner planner(groups, kv_tokens, std::move(requests), n);
  RunTimes times;
  bool first = true;
  while (!planner.done()) {
    const runtime::StepPlan plan = planner.next_plan();
    const auto start = std::chrono::steady_clock::now();
    planner.apply(worker.step(&plan));
    const double t = seconds_since(start);
    if (first)
      times.prefill = t;
    else
      times.decode.push_back(t);
    first = false;
  }
  return times;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

nlohmann::json report(const BenchOptions& o, int64_t bs, int64_t in, int64_t out,
                      const RunTimes& t) {
  double total = t.prefill;
  for (double d : t.decode) total += d;
  const double med = median(t.decode);
  std::printf("Prefill. latency: %.5f s, throughput: %9.2f token/s\n", t.prefill,
              static_cast<double>(in * bs) / t.prefill);
  for (size_t i = 0; i < t.decode.size() && i < 5; ++i) {
    std::printf("Decode.  latency: %.5f s, throughput: %9.2f token/s\n", t.decode[i],
                static_cast<double>(bs) / t.decode[i]);
  }
  if (!t.decode.empty()) {
    std::printf("Decode.  median latency: %.5f s, median throughput: %9.2f token/s\n", med,
                static_cast<double>(bs) / med);
  }
  std::printf("Total. latency: %.3f s, throughput: %9.2f token/s\n", total,
              static_cast<double>((in + out) * bs) / total);
  std::fflush(stdout);
  nlohmann::json r = {{"run_name", o.run_name},
                      {"batch_size", bs},
                      {"input_len", in},
                      {"output_len", out},
                      {"dtype", o.model.dtype},
                      {"kv_cache_dtype", std::string(kv_dtype_name(o.model.kv_dtype()))},
                      {"layout", o.parallel.layout.describe()},
                      {"dp_padding", o.parallel.dp_padding},
                      {"prefill_latency", t.prefill},
                      {"prefill_throughput", static_cast<double>(in * bs) / t.prefill},
                      {"total_latency", total},
                      {"overall_throughput", static_cast<double>((in + out) * bs) / total}};
  if (!t.decode.empty()) {
    r["median_decode_latency"] = med;
    r["median_decode_throughput"] = static_cast<double>(bs) / med;
  }
  return r;
}

void run_rank(const BenchOptions& o, const runtime::MpiSession& mpi) {
  const parallel::Topology topo =
      parallel::compute_topology(o.parallel.layout, mpi.rank(), mpi.size());
  const models::ModelCard card = models::read_model_card(o.model.model_dir);
  const int groups = topo.instances * topo.groups_per_instance;
  int64_t kv_tokens = 0;  // enough for the largest combination, per group
  for (int64_t bs : o.batch_sizes)
    for (int64_t in : o.input_lens)
      for (int64_t out : o.output_lens)
        kv_tokens =
            std::max(kv_tokens, (bs + groups - 1) / groups * (in + std::max<int64_t>(out, 8)));

  o.model.check_card(card, topo, false, 0);
  const std::unique_ptr<model::Model> model = o.model.load(card, topo, false);
  runtime::Worker worker(topo, *model, {kv_tokens, o.model.kv_dtype(), o.parallel.comm_options()});
  if (mpi.rank() != 0) {
    follow_rank0(worker);
    return;
  }
  spdlog::info(
      "bench-one-batch: {} ({}, KV cache {}), layout {}, resident weights on rank 0: {:.1f} MB, "
      "peak RSS after load {:.1f} MB",
      o.model.model_dir, model->weight_format_description(), kv_dtype_name(o.model.kv_dtype()),
      o.parallel.layout.describe(), static_cast<double>(model->resident_weight_bytes()) / 1e6,
      static_cast<double>(runtime::peak_rss_bytes()) / 1e6);
  run_once(worker, groups,
           synthetic_batch(o.batch_sizes.front(), o.input_lens.front(), 8, card.info.vocab_size,
                           o.seed));
  std::ofstream results(o.result_filename, std::ios::app);
  for (int64_t bs : o.batch_sizes) {
    for (int64_t in : o.input_lens) {
      for (int64_t out : o.output_lens) {
        std::printf("\nbatch_size=%ld input_len=%ld output_len=%ld\n", static_cast<long>(bs),
                    static_cast<long>(in), static_cast<long>(out));
        const RunTimes t =
            run_once(worker, groups, synthetic_batch(bs, in, out, card.info.vocab_size, o.seed));
        results << report(o, bs, in, out, t).dump() << "\n";
      }
    }
  }
  shut_down_followers(worker);
}

}  // namespace

void add_bench_one_batch(CLI::App& app) {
  auto opts = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench-one-batch",
      "Latency of one static batch: prefill, then decode steps (SGLang bench_one_batch)");
  opts->model.add_to(*cmd);
  opts->parallel.add_to(*cmd);
  cmd->add_option("--batch-size", opts->batch_sizes, "Batch sizes to sweep")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--input-len", opts->input_lens, "Prompt lengths to sweep")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--output-len", opts->output_lens,
                  "Generated lengths to sweep (1 = prefill only)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--result-filename", opts->result_filename,
                  "JSONL file to append one record per combination to")
      ->capture_default_str();
  cmd->add_option("--run-name", opts->run_name, "Name stored in each record")
      ->capture_default_str();
  cmd->add_option("--seed", opts->seed, "Seed of the synthetic prompts")->capture_default_str();
  cmd->callback([opts] {
    runtime::run_ranks(opts->parallel.layout.world_size(), opts->parallel.watchdog_options(),
                       [&](const runtime::MpiSession& mpi) { run_rank(*opts, mpi); });
  });
}

}  // namespace mlaserve::tools
