// mlaserve serve: the HTTP server on rank 0 in front of the serving engine; every rank runs its
// share of each step. With no --model it serves the built-in demo model (models/brown-tiny).
#include <spdlog/spdlog.h>

#include <csignal>

#include "core/error.h"
#include "models/deepseek_v4/kv_store.h"
#include "parallel/collective_watchdog.h"
#include "parallel/kv_capacity.h"
#include "runtime/launch.h"
#include "runtime/rank_report.h"
#include "runtime/worker.h"
#include "sched/serving_engine.h"
#include "server/http_server.h"
#include "server/serving_tokenizer.h"
#include "tools/commands.h"
#include "tools/model_options.h"
#include "tools/parallel_options.h"
#include "tools/rank_loop.h"

namespace mlaserve::tools {

namespace {

struct ServeOptions {
  ModelOptions model;
  ParallelFlags parallel;
  server::ServerOptions http;
  int64_t kv_cache_mib = 1024;
  int64_t max_total_tokens = 0;  // 0: what --kv-cache-memory holds
  int64_t max_running_requests = 256;
  int64_t chunked_prefill_size = 8192;
  int64_t max_prefill_tokens = 16384;
  bool disable_radix_cache = false;
  bool disable_mixed_chunk = false;
  bool enable_priority_scheduling = false;
  double max_step_time_ms = 500;
  std::string schedule_policy = "fcfs";
  std::string load_balance = "cache_aware";
  std::string speculative_algorithm;
  int speculative_num_steps = 0, speculative_eagle_topk = 1, speculative_num_draft_tokens = 0;
};

// SGLang's speculative flags, of which NEXTN (the model's own MTP layer as the draft model)
// with a chain of drafts (topk 1) is what runs here. Returns the drafts per step (0: off).
int speculative_steps(const ServeOptions& o) {
  if (o.speculative_algorithm.empty()) {
    if (o.speculative_num_steps > 0 || o.speculative_num_draft_tokens > 0)
      fail(
          "--speculative-num-steps and --speculative-num-draft-tokens need "
          "--speculative-algorithm NEXTN");
    return 0;
  }
  if (o.speculative_algorithm != "NEXTN" && o.speculative_algorithm != "EAGLE")
    fail("--speculative-algorithm {} is not supported (NEXTN: the model's MTP layer drafts)",
         o.speculative_algorithm);
  if (o.speculative_eagle_topk != 1)
    fail("--speculative-eagle-topk {} is not supported: drafts form a chain (topk 1)",
         o.speculative_eagle_topk);
  const int steps = o.speculative_num_steps > 0 ? o.speculative_num_steps : 1;
  if (o.speculative_num_draft_tokens > 0 && o.speculative_num_draft_tokens != steps + 1)
    fail("--speculative-num-draft-tokens {} must be --speculative-num-steps + 1 = {} with topk 1",
         o.speculative_num_draft_tokens, steps + 1);
  return steps;
}

sched::ServingEngine* g_engine = nullptr;
extern "C" void on_signal(int signal) {
  parallel::watchdog_note_stop_signal(signal);
  if (g_engine) g_engine->stop();
}
// mpirun's kill sequence opens with SIGCONT, a second before SIGTERM (and SIGKILL right after):
// the one warning that leaves time to answer the clients (collective_watchdog.h).
extern "C" void on_continue(int signal) {
  parallel::watchdog_note_stop_signal(signal);
}

void resolve_defaults(ServeOptions& o) {
  if (o.model.model_dir.empty()) {
    o.model.model_dir = MLASERVE_DEMO_MODEL_DIR;
    spdlog::info("serve: no --model given, serving the built-in demo model {}", o.model.model_dir);
  }
  if (o.http.tokenizer_path.empty()) o.http.tokenizer_path = o.model.model_dir;
  o.http.model_path = o.model.model_dir;
  if (o.http.model_name.empty())
    o.http.model_name = std::filesystem::path(o.model.model_dir).filename().string();
}

// DeepSeek-V4 keeps a window and compressor state per running request and compressed entries per
// token; the budget holds the fixed parts of max_running requests first, and as many prefix
// snapshots (a window and compressor state each) unless the radix cache is off; with speculative
// decoding the MTP block's layer counts as one more layer.
parallel::KvCapacity deepseek_v4_capacity(const ServeOptions& o,
                                          const models::deepseek_v4::V4Config& cfg,
                                          int64_t max_running, bool with_mtp) {
  const int64_t snapshots = o.disable_radix_cache ? 0 : max_running;
  const auto c = models::deepseek_v4::kv_capacity(cfg, o.model.kv_dtype(), o.kv_cache_mib << 20,
                                                  max_running + snapshots, with_mtp);
  if (c.tokens < 1) {
    fail(
        "--kv-cache-memory {} MiB does not hold {} DeepSeek-V4 requests' windows and compressor "
        "state ({:.1f} MiB each) and {} prefix snapshots of the same size, and their tokens: "
        "raise it, lower --max-running-requests or --disable-radix-cache",
        o.kv_cache_mib, max_running, static_cast<double>(c.bytes_per_sequence) / (1 << 20),
        snapshots);
  }
  spdlog::info(
      "serve: deepseek_v4 KV in {}: {} bytes per token of compressed entries, {:.1f} MiB per "
      "running request and per prefix snapshot (windows, compressor state; {} snapshots per DP "
      "group)",
      kv_dtype_name(o.model.kv_dtype()), c.bytes_per_token,
      static_cast<double>(c.bytes_per_sequence) / (1 << 20), snapshots);
  return {c.bytes_per_token, 0, c.tokens, c.tokens};
}

sched::EngineOptions engine_options(const ServeOptions& o, const parallel::Topology& topo,
                                    const models::ModelCard& card) {
  const int spec_steps = speculative_steps(o);
  const int64_t groups = topo.instances * topo.groups_per_instance;
  const int64_t max_running = std::max<int64_t>(1, o.max_running_requests / groups);
  const parallel::KvCapacity kv =
      card.deepseek_v4 ? deepseek_v4_capacity(o, *card.deepseek_v4, max_running, spec_steps > 0)
                       : parallel::kv_capacity(topo, *card.deepseek, o.model.kv_dtype(),
                                               o.kv_cache_mib << 20, spec_steps > 0);
  if (kv.per_rank_tokens < 1)
    fail("--kv-cache-memory {} MiB holds no token ({} bytes per token)", o.kv_cache_mib,
         kv.bytes_per_token);
  const KvDtype kv_dtype = o.model.kv_dtype();
  sched::EngineOptions e;
  e.kv_tokens_per_group = kv.per_rank_tokens;
  if (o.max_total_tokens > 0) {
    if (o.max_total_tokens > kv.per_rank_tokens) {
      fail("--max-total-tokens {} needs more than --kv-cache-memory {} MiB ({} tokens per rank)",
           o.max_total_tokens, o.kv_cache_mib, kv.per_rank_tokens);
    }
    e.kv_tokens_per_group = o.max_total_tokens;
  }
  const int64_t instance_tokens = e.kv_tokens_per_group * topo.groups_per_instance;
  const model::ModelInfo& info = card.info;
  // Global budgets divided by the DP groups, as SGLang does: the MLP batch after the gather stays
  // about the configured size.
  e.limits.chunk_tokens = std::max<int64_t>(1, o.chunked_prefill_size / groups);
  e.limits.max_running = max_running;
  e.limits.max_prefill_tokens = std::max<int64_t>(1, o.max_prefill_tokens / groups);
  e.limits.radix_cache = !o.disable_radix_cache;
  // DeepSeek-V4 reuses a cached prefix from a snapshot of its state
  // (models/deepseek_v4/kv_store.h).
  // Below a window's length a snapshot (a window and compressor state) saves little.
  if (card.deepseek_v4) {
    e.limits.max_snapshots = max_running;
    e.limits.min_snapshot_tokens = card.deepseek_v4->sliding_window;
  }
  e.limits.mixed_steps = !o.disable_mixed_chunk;
  e.limits.priority = o.enable_priority_scheduling;
  e.prefill_tokens_per_step = o.chunked_prefill_size;
  e.max_step_time_ms = o.max_step_time_ms;
  e.limits.policy = sched::parse_schedule_policy(o.schedule_policy);
  e.load_balance = sched::parse_load_balance_method(o.load_balance);
  e.context_length = info.max_position_embeddings;
  e.spec_steps = spec_steps;
  e.eos_token_ids = info.eos_token_ids;
  e.vocab_size = info.vocab_size;
  // Well inside the followers' deadline for the next plan.
  e.keepalive_seconds = o.parallel.collective_timeout_s / 3;
  e.layout = {
      {"tp", o.parallel.layout.tp},
      {"dp", o.parallel.layout.dp},
      {"enable_dp_attention", o.parallel.layout.dp_attention},
      {"enable_dp_linear", o.parallel.layout.dp_linear},
      {"enable_ep_moe", o.parallel.layout.ep_moe},
      {"dtype", o.model.dtype},
      {"quantization", model::quantization_name(model::resolve_weight_format(
                                                    o.model.weight_format(), card.fp8_checkpoint())
                                                    .quantization)},
      {"quantize_lm_head", o.model.quantize_lm_head},
      {"kv_cache_dtype", std::string(kv_dtype_name(kv_dtype))},
      {"kv_bytes_per_token", kv.bytes_per_token},
      {"kv_index_bytes_per_token", kv.index_bytes_per_token},
      {"kv_tokens_per_rank", e.kv_tokens_per_group},
      {"kv_tokens_per_instance", instance_tokens},
      {"speculative_algorithm", e.spec_steps > 0 ? "NEXTN" : ""}};
  spdlog::info(
      "serve: layout {}, KV cache {} ({} bytes per token{}), max_total_num_tokens {} per rank ({} "
      "per instance, --kv-cache-memory {} MiB holds {})",
      o.parallel.layout.describe(), kv_dtype_name(kv_dtype), kv.bytes_per_token,
      kv.index_bytes_per_token > 0
          ? fmt::format(", {} of them the indexer's keys", kv.index_bytes_per_token)
          : "",
      e.kv_tokens_per_group, instance_tokens, o.kv_cache_mib, kv.per_rank_tokens);
  return e;
}

// The largest step a group can be planned: its decodes (each verifying its drafts under
// speculation) plus a prompt chunk, never more new tokens than its KV pool holds; logits for
// each running request's last token, or its verified drafts. Claiming the memory for it now
// keeps it flat under any mix of steps, and an out-of-memory shows at start-up, not under load.
void reserve_step_buffers(runtime::Worker& worker, const sched::EngineOptions& eo, int rank) {
  const int64_t verify_rows = eo.limits.max_running * (eo.spec_steps + 1);
  const int64_t group_tokens =
      std::min(eo.limits.chunk_tokens + verify_rows, eo.kv_tokens_per_group);
  const size_t bytes =
      worker.reserve_step_buffers(group_tokens, std::min(group_tokens, verify_rows));
  spdlog::info(
      "serve: rank {} holds {:.1f} MB of step buffers for steps of up to {} tokens per "
      "group; peak RSS so far {:.1f} MB",
      rank, static_cast<double>(bytes) / 1e6, group_tokens,
      static_cast<double>(runtime::peak_rss_bytes()) / 1e6);
}

void run_rank(ServeOptions o, const runtime::MpiSession& mpi) {
  resolve_defaults(o);
  const parallel::Topology topo =
      parallel::compute_topology(o.parallel.layout, mpi.rank(), mpi.size());
  const bool mtp = speculative_steps(o) > 0;
  const models::ModelCard card = o.model.read_card(topo, mtp, o.kv_cache_mib << 20);
  const sched::EngineOptions eo = engine_options(o, topo, card);
  const std::unique_ptr<model::Model> model = o.model.load(card, topo, mtp);
  spdlog::info("serve: rank {} holds {:.1f} MB of weights ({}); peak RSS so far {:.1f} MB",
               mpi.rank(), static_cast<double>(model->resident_weight_bytes()) / 1e6,
               model->weight_format_description(),
               static_cast<double>(runtime::peak_rss_bytes()) / 1e6);
  runtime::Worker worker(topo, *model,
                         {eo.kv_tokens_per_group, o.model.kv_dtype(), o.parallel.comm_options()});
  reserve_step_buffers(worker, eo, mpi.rank());
  if (mpi.rank() != 0) return follow_rank0(worker);
  const tokenizer::Tokenizer tok = server::load_serving_tokenizer(o.http);
  sched::ServingEngine engine(topo.instances * topo.groups_per_instance, eo);
  server::HttpServer http(o.http, engine, tok);
  http.start();
  spdlog::info("serve: listening on http://{}:{} (model \"{}\")", o.http.host, http.port(),
               o.http.model_name);
  // A failed job answers every waiting client with an error before it exits.
  runtime::set_job_failure_hook([&](const std::string& message) {
    engine.fail_all("the server's job failed: " + message);
    http.wait_for_streams(std::chrono::milliseconds(500));
    http.stop();
  });
  g_engine = &engine;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGCONT, on_continue);
  engine.run(worker);
  g_engine = nullptr;
  runtime::set_job_failure_hook(nullptr);
  spdlog::info("serve: shutting down");
  http.stop();
}

}  // namespace

void add_serve(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
  o->model.add_to(*cmd, /*model_required=*/false);
  o->parallel.add_to(*cmd);
  cmd->add_option("--host", o->http.host, "Address to bind (loopback by default)")
      ->capture_default_str();
  cmd->add_option("--port", o->http.port, "Port to bind (0 picks a free one)")
      ->capture_default_str();
  cmd->add_option("--api-key", o->http.api_key,
                  "Require 'Authorization: Bearer <key>' on every request");
  cmd->add_option("--served-model-name", o->http.model_name,
                  "Model name in the API (default: the model directory's name)");
  cmd->add_option("--tokenizer", o->http.tokenizer_path,
                  "Directory with tokenizer.json (default: the model directory)");
  cmd->add_option("--max-body-bytes", o->http.max_body_bytes,
                  "Largest request body accepted (413 above)")
      ->capture_default_str();
  cmd->add_option("--http-threads", o->http.threads,
                  "Connections served at once (each open stream holds one)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--enable-cors", o->http.cors, "Send CORS headers (off by default)");
  cmd->add_option("--reasoning-parser", o->http.reasoning_parser,
                  "deepseek-r1: a chat answer's text before '</think>' (all of it if the model "
                  "never closes its thinking) is returned as message.reasoning_content "
                  "(delta.reasoning_content when streaming), the rest as content; deepseek-v3: "
                  "the same only for requests whose chat_template_kwargs say \"thinking\": true. "
                  "A chat format with a thinking switch (DeepSeek-V3.1's template, V3.2's and "
                  "V4's formats) splits exactly when thinking is on, with or without this flag")
      ->check(CLI::IsMember({"deepseek-r1", "deepseek-v3"}));
  cmd->add_option("--chat-template", o->http.chat_template,
                  "A Jinja chat-template file to use instead of the model's, or deepseek-v32 / "
                  "deepseek-v4 for DeepSeek-V3.2's / V4's built-in format (the default for a "
                  "model whose config.json says model_type deepseek_v32 / deepseek_v4 and that "
                  "ships no template)");
  cmd->add_option("--kv-cache-memory", o->kv_cache_mib,
                  "KV cache per rank, in MiB (sets max_total_num_tokens): latent rows per token "
                  "for DeepSeek-V2/V3; for DeepSeek-V4, the windows and compressor state of "
                  "--max-running-requests requests and as many prefix snapshots first (no "
                  "snapshots with --disable-radix-cache), then compressed entries per token")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max-total-tokens", o->max_total_tokens,
                  "Token slots in each rank's KV pool, instead of all that --kv-cache-memory holds")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-running-requests", o->max_running_requests,
                  "Requests decoding at once, over all DP groups (divided by dp)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option(
         "--chunked-prefill-size", o->chunked_prefill_size,
         "Prefill tokens per step, a global budget divided by the DP groups (SGLang semantics)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max-prefill-tokens", o->max_prefill_tokens,
                  "Prompt tokens admitted per prefill step, over all DP groups (divided by dp); a "
                  "single longer "
                  "prompt still runs, in chunks")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--schedule-policy", o->schedule_policy,
                  "Order of waiting requests: fcfs (arrival) or lpm (longest cached prefix first)")
      ->check(CLI::IsMember({"fcfs", "lpm"}))
      ->capture_default_str();
  cmd->add_flag("--enable-priority-scheduling", o->enable_priority_scheduling,
                "Admit waiting requests by their 'priority' field (higher first; ties in "
                "--schedule-policy order) within each DP group. A request that finds its group "
                "full (--max-running-requests or the KV pool) preempts the lowest-priority "
                "running request below it, which resumes later with the tokens it had (same "
                "output), and one that outranks every running request prefills in a step of its "
                "own. Strict priority: lower ones wait while higher ones fill the group. Without "
                "this flag a request that sets a non-zero priority is refused (400)");
  cmd->add_flag("--disable-radix-cache", o->disable_radix_cache,
                "Do not reuse the KV of shared prompt prefixes across requests (DeepSeek-V4: "
                "nor keep prefix snapshots, whose memory then holds tokens)");
  cmd->add_flag("--disable-mixed-chunk", o->disable_mixed_chunk,
                "Run prompt chunks in steps of their own (prefill first, as SGLang without "
                "--enable-mixed-chunk) instead of beside the running requests' decodes");
  cmd->add_option("--max-step-time-ms", o->max_step_time_ms,
                  "Target time of a step that prefills while others decode: the prompt tokens per "
                  "step adapt to it (measured at run time, at least 128 per DP group, at most "
                  "--chunked-prefill-size), bounding the time between tokens; 0 turns it off")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--load-balance-method", o->load_balance,
                  "How new requests pick a DP group: cache_aware (the group whose radix cache "
                  "holds half the prompt or more, else the fewest outstanding tokens), "
                  "minimum_tokens (fewest outstanding tokens) or round_robin")
      ->check(CLI::IsMember({"round_robin", "minimum_tokens", "cache_aware"}))
      ->capture_default_str();
  cmd->add_option(
         "--speculative-algorithm", o->speculative_algorithm,
         "NEXTN: speculative decoding with the checkpoint's own multi-token-prediction "
         "layer as the draft model (DeepSeek-V3 and V4's mtp.0; EAGLE is accepted as a "
         "synonym). Each "
         "step drafts --speculative-num-steps tokens and the model verifies them in one "
         "pass: greedy output is identical, sampled output has the same distribution; "
         "requests with penalties, logprobs or structured output decode one token per step")
      ->check(CLI::IsMember({"NEXTN", "EAGLE"}));
  cmd->add_option("--speculative-num-steps", o->speculative_num_steps,
                  "Draft tokens per step (default 1 with --speculative-algorithm)")
      ->check(CLI::Range(1, 8));
  cmd->add_option("--speculative-eagle-topk", o->speculative_eagle_topk,
                  "Drafts per position: 1 (a chain) is what runs")
      ->capture_default_str();
  cmd->add_option("--speculative-num-draft-tokens", o->speculative_num_draft_tokens,
                  "Tokens a verify step runs: --speculative-num-steps + 1 (the default)");
  cmd->callback([o] {
    runtime::run_ranks(o->parallel.layout.world_size(), o->parallel.watchdog_options(),
                       [&](const runtime::MpiSession& mpi) { run_rank(*o, mpi); });
  });
}

}  // namespace mlaserve::tools
