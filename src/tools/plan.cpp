// mlaserve plan: which layout to serve a model with on the user's machines, from config.json
// (and the safetensors headers when the weights are there) without loading any weight.
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/footprint.h"
#include "models/registry.h"
#include "parallel/layout_planner.h"
#include "tools/commands.h"
#include "tools/model_options.h"

namespace mlaserve::tools {

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

struct PlanOptions {
  ModelOptions model;
  parallel::Machines machines;
  double mem_per_host_gib = 0, mem_bandwidth_gbs = 100, network_gbits = 25;
  parallel::Workload workload;
  std::string speculative_algorithm;
  int top = 10;
  bool json = false;
};

// The flags that reproduce the layout and formats in `mlaserve serve`.
std::string serve_command(const PlanOptions& o, const parallel::LayoutPlan& p) {
  const parallel::ParallelOptions& l = p.options;
  std::string cmd = fmt::format("mlaserve serve --model {} --tp {}", o.model.model_dir, l.tp);
  if (l.dp > 1) cmd += fmt::format(" --dp {}", l.dp);
  if (l.dp_attention) cmd += " --enable-dp-attention";
  if (l.ep_moe) cmd += " --enable-ep-moe";
  if (o.model.dtype != "bfloat16") cmd += " --dtype " + o.model.dtype;
  if (o.model.quantization != "auto") cmd += " --quantization " + o.model.quantization;
  if (o.model.group_size != 32)
    cmd += fmt::format(" --quantization-group-size {}", o.model.group_size);
  if (o.model.quantize_lm_head) cmd += " --quantize-lm-head";
  if (o.model.weight_packing != "auto") cmd += " --weight-packing " + o.model.weight_packing;
  if (o.model.kv_cache_dtype != "auto") cmd += " --kv-cache-dtype " + o.model.kv_cache_dtype;
  if (o.workload.speculative) cmd += " --speculative-algorithm " + o.speculative_algorithm;
  cmd += fmt::format(" --kv-cache-memory {}", p.kv_bytes_per_rank >> 20);
  if (o.machines.hosts == 1) return cmd;
  return fmt::format("mpirun -np {} --hostfile HOSTFILE --map-by ppr:{}:node {}",
                     o.machines.ranks(), o.machines.sockets_per_host, cmd);
}

nlohmann::json to_json(const PlanOptions& o, const parallel::LayoutPlan& p) {
  return {{"layout", p.options.describe()},
          {"tp", p.options.tp},
          {"dp", p.options.dp},
          {"dp_attention", p.options.dp_attention},
          {"ep_moe", p.options.ep_moe},
          {"fits", p.fits},
          {"why_not", p.why_not},
          {"weight_value_bytes", p.weight_value_bytes},
          {"resident_weight_bytes", p.resident_weight_bytes},
          {"kv_bytes_per_rank", p.kv_bytes_per_rank},
          {"kv_tokens", p.kv_tokens},
          {"kv_tokens_per_group", p.kv_tokens_per_group},
          {"decode_bytes_per_token", p.decode_bytes_per_token},
          {"comm_bytes_per_token", p.comm_bytes_per_token},
          {"attention_spans_hosts", p.attention_spans_hosts},
          {"seconds_per_token", p.seconds_per_token},
          {"command", p.fits ? serve_command(o, p) : ""}};
}

void print_table(const PlanOptions& o, const model::ModelSizing& m,
                 const std::vector<parallel::LayoutPlan>& plans) {
  std::printf(
      "plan: %s, %lld layers, %lld routed experts; --quantization %s, KV cache %s\n"
      "machines: %d host(s) x %d socket(s), %.0f GiB per host: %.1f GiB usable per rank "
      "(%.0f %% kept free)\nworkload: %lld requests decoding at once, %lld tokens of context "
      "each\n\n",
      m.model_type.c_str(), static_cast<long long>(m.layers),
      static_cast<long long>(m.routed_experts), o.model.quantization.c_str(),
      std::string(kv_dtype_name(o.model.kv_dtype())).c_str(), o.machines.hosts,
      o.machines.sockets_per_host, o.mem_per_host_gib, o.machines.usable_bytes_per_rank() / kGiB,
      100 * o.machines.reserve_fraction, static_cast<long long>(o.workload.concurrency),
      static_cast<long long>(o.workload.context));
  std::printf("%-3s %-30s %12s %12s %14s %12s %9s  %s\n", "#", "layout", "weights/rank",
              "KV tokens", "decode MB/tok", "comm KB/tok", "ms/tok", "note");
  int shown = 0;
  for (const parallel::LayoutPlan& p : plans) {
    if (shown++ == o.top) break;
    const std::string note = !p.fits                   ? p.why_not
                             : p.attention_spans_hosts ? "attention TP crosses hosts"
                                                       : "";
    std::printf("%-3d %-30s %9.1f GiB %12lld %14.1f %12.1f %9.2f  %s\n", shown,
                p.options.describe().c_str(), static_cast<double>(p.resident_weight_bytes) / kGiB,
                static_cast<long long>(p.kv_tokens), p.decode_bytes_per_token / 1e6,
                p.comm_bytes_per_token / 1e3, p.seconds_per_token * 1e3, note.c_str());
  }
  std::printf(
      "\nweights/rank: the busiest rank's weights with the kernels' packed copies (none under "
      "--weight-packing off); decode "
      "MB/tok: bytes that rank streams per decoded token at this concurrency (decode is "
      "memory-bound); comm KB/tok: bytes a rank sends per decoded token; ms/tok: both over "
      "--mem-bandwidth and, where the model spans hosts, --network-bandwidth (an estimate that "
      "ranks layouts; it leaves out compute, latency and the attention over the context).\n");
  if (plans.empty() || !plans.front().fits) {
    std::printf(
        "\nno layout fits: more memory per host, more hosts, --quantization fp8/int8, "
        "--weight-packing off, "
        "a shorter --context or a lower --concurrency\n");
    return;
  }
  std::printf("\nbest: %s\n", serve_command(o, plans.front()).c_str());
}

void run(PlanOptions& o) {
  o.machines.mem_per_host_bytes = o.mem_per_host_gib * kGiB;
  o.machines.mem_bandwidth = o.mem_bandwidth_gbs * 1e9;
  o.machines.network_bandwidth = o.network_gbits * 1e9 / 8;
  o.workload.speculative = !o.speculative_algorithm.empty();
  const models::ModelCard card = models::read_model_card(o.model.model_dir);
  model::ModelSizing sizing;
  try {
    sizing = models::model_sizing(card, o.model.model_dir, o.model.weight_format(),
                                  o.model.kv_dtype(), o.workload.speculative);
  } catch (const Error& e) {
    fail("plan: {}", e.what());
  }
  const std::vector<parallel::LayoutPlan> plans =
      parallel::plan_layouts(sizing, o.machines, o.workload);
  if (!o.json) {
    print_table(o, sizing, plans);
    return;
  }
  nlohmann::json out = nlohmann::json::array();
  for (const parallel::LayoutPlan& p : plans) out.push_back(to_json(o, p));
  std::printf("%s\n", out.dump(2).c_str());
}

}  // namespace

void add_plan(CLI::App& app) {
  auto o = std::make_shared<PlanOptions>();
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "Rank the parallel layouts for a model on given machines (reads config.json only): "
      "weights and KV cache per rank, decode bytes per token, communication, and the serve "
      "command of the best");
  o->model.add_to(*cmd, true, false);
  cmd->add_option("--hosts", o->machines.hosts, "Machines the job runs on")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--sockets-per-host", o->machines.sockets_per_host,
                  "Ranks per machine: one per socket (NUMA node), each with its own memory "
                  "bandwidth")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--mem-per-host", o->mem_per_host_gib, "Memory of each machine, in GiB")
      ->required()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--reserve-fraction", o->machines.reserve_fraction,
                  "Share of each rank's memory kept free for activations, buffers and the OS")
      ->check(CLI::Range(0.0, 0.9))
      ->capture_default_str();
  cmd->add_option("--mem-bandwidth", o->mem_bandwidth_gbs,
                  "Memory bandwidth of one socket, in GB/s (what a decode step's weight stream "
                  "runs at; STREAM-like read figure)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--network-bandwidth", o->network_gbits,
                  "Network bandwidth between hosts, in Gbit/s (the collectives of a model "
                  "instance that spans hosts cross it every layer)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--context", o->workload.context,
                  "Tokens of KV cache each request may need (prompt + output)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--concurrency", o->workload.concurrency,
                  "Requests decoding at once over the whole job")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--speculative-algorithm", o->speculative_algorithm,
                  "NEXTN: plan for serve's speculative decoding, which also loads the model's "
                  "multi-token-prediction layer (its weights, and one more KV layer)")
      ->check(CLI::IsMember({"NEXTN", "EAGLE"}));
  cmd->add_option("--top", o->top, "Layouts shown, best first (text output)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "Every layout as a JSON array instead of the table");
  cmd->callback([o] { run(*o); });
}

}  // namespace mlaserve::tools
