// mlaserve bench-serving: SGLang's bench_serving as a C++ client, against any server with
// SGLang's native API or an OpenAI-compatible one (mlaserve, SGLang, llama.cpp's llama-server).
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>

#include "bench_serving/details.h"
#include "bench_serving/report.h"
#include "bench_serving/runner.h"
#include "core/error.h"
#include "tools/commands.h"

namespace mlaserve::tools {

namespace {

struct BenchServingFlags {
  bench_serving::BenchOptions options;
  std::string backend = "mlaserve";
  std::string request_rate = "inf";
  bool disable_ignore_eos = false;
  bool disable_stream = false;
  bool no_progress = false;
  std::string extra_request_body;
};

double parse_request_rate(const std::string& text) {
  if (text == "inf") return std::numeric_limits<double>::infinity();
  size_t used = 0;
  double rate = 0.0;
  try {
    rate = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(rate > 0.0) || std::isinf(rate)) {
    fail("--request-rate {}: expected a positive number of requests per second, or inf", text);
  }
  return rate;
}

void add_server_flags(CLI::App& cmd, BenchServingFlags& f) {
  bench_serving::BenchOptions& o = f.options;
  cmd.add_option("--base-url", o.base_url,
                 "The server to measure, e.g. http://127.0.0.1:30000; nothing else is contacted")
      ->required();
  cmd.add_option("--backend", f.backend,
                 "API to use: mlaserve and sglang POST /generate (SGLang's native API), openai "
                 "POST /v1/completions, openai-chat POST /v1/chat/completions (the prompt as "
                 "one user message)")
      ->check(CLI::IsMember({"mlaserve", "sglang", "openai", "openai-chat"}))
      ->capture_default_str();
  cmd.add_option("--tokenizer", o.tokenizer_dir,
                 "Directory with tokenizer.json (and tokenizer_config.json), used to build "
                 "prompts and to re-count generated text; default: the served model's, from "
                 "GET /get_model_info (works when the server runs on this host)");
  cmd.add_option("--model", o.model,
                 "The OpenAI \"model\" field; default: the first id of GET /v1/models");
  cmd.add_option("--request-timeout", o.request_timeout_s,
                 "Seconds after which a request counts as failed")
      ->capture_default_str();
}

void add_dataset_flags(CLI::App& cmd, BenchServingFlags& f) {
  bench_serving::DatasetOptions& d = f.options.dataset;
  cmd.add_option("--dataset", d.name,
                 "random: prompts of random vocabulary tokens, exactly --random-input-len "
                 "tokens or fewer (see --random-range-ratio); shared-prefix: --num-groups "
                 "prefixes of --shared-prefix-len tokens, each prompt one of them + \"\\n\\n\" "
                 "+ a random question sized like a random prompt")
      ->check(CLI::IsMember({"random", "shared-prefix"}))
      ->capture_default_str();
  cmd.add_option("--num-prompts", d.num_prompts, "Number of requests to send (at most 100000)")
      ->capture_default_str();
  cmd.add_option("--random-input-len", d.input_len,
                 "Prompt tokens (without the BOS the server adds)")
      ->capture_default_str();
  cmd.add_option("--random-output-len", d.output_len, "max_new_tokens of each request")
      ->capture_default_str();
  cmd.add_option("--random-range-ratio", d.range_ratio,
                 "Lengths are drawn uniformly from [max(1, floor(len * R)), len] (SGLang's "
                 "rule); 1 makes every request exactly len")
      ->capture_default_str();
  cmd.add_option("--shared-prefix-len", d.shared_prefix_len,
                 "shared-prefix: tokens of each group's common prefix")
      ->capture_default_str();
  cmd.add_option("--num-groups", d.num_groups, "shared-prefix: number of distinct prefixes")
      ->capture_default_str();
  cmd.add_option("--seed", f.options.seed, "Seed for the prompts, lengths and arrival times")
      ->capture_default_str();
}

void add_traffic_flags(CLI::App& cmd, BenchServingFlags& f) {
  bench_serving::BenchOptions& o = f.options;
  cmd.add_option("--request-rate", f.request_rate,
                 "Requests per second, arriving as a Poisson process (exponential gaps); inf "
                 "sends them all at once")
      ->capture_default_str();
  cmd.add_option("--max-concurrency", o.max_concurrency,
                 "At most this many requests in flight; later arrivals wait their turn (default: "
                 "not set, which still caps it at 1024)");
  cmd.add_option("--output-file", o.output_file,
                 "Append the result as one JSON line (SGLang's fields) to this file");
  cmd.add_flag("--disable-ignore-eos", f.disable_ignore_eos,
               "Let requests stop at EOS (by default they ask for ignore_eos, so every request "
               "generates exactly its max_new_tokens)");
  CLI::Option* disable_stream =
      cmd.add_flag("--disable-stream", f.disable_stream,
                   "Ask for whole responses instead of streams; TTFT then equals the latency and "
                   "there is no ITL");
  cmd.add_option("--stream-fraction", o.mix.stream_fraction,
                 "Stream this fraction of the requests (chosen with --seed) and ask for whole "
                 "responses for the rest")
      ->check(CLI::Range(0.0, 1.0))
      ->excludes(disable_stream)
      ->capture_default_str();
  cmd.add_option(
      "--extra-request-body", f.extra_request_body,
      "A JSON object merged into every request body (as a JSON merge patch), e.g. "
      "'{\"response_format\": {\"type\": \"json_object\"}}' to measure structured output");
  cmd.add_option("--output-details", o.output_details,
                 "Write one JSON line per request to this file (unlike SGLang's flag of this "
                 "name, which adds lists to --output-file's record): prompt, settings, outcome "
                 "(ok, cut, aborted, failed) and the generated text and token ids, so that a "
                 "checker can re-run the completed requests alone");
  cmd.add_flag("--disable-progress", f.no_progress,
               "No progress bar (it is drawn on stderr only when stderr is a terminal)");
}

// Faults for soak tests; the requests they hit are counted apart, not as failures.
void add_fault_flags(CLI::App& cmd, BenchServingFlags& f) {
  bench_serving::MixOptions& mix = f.options.mix;
  cmd.add_option("--disconnect-fraction", mix.disconnect_fraction,
                 "This fraction of the streaming requests (chosen with --seed) closes its "
                 "connection after its first 1 to max_new_tokens - 1 tokens (drawn with --seed); "
                 "counted as disconnected, not failed")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd.add_option("--abort-fraction", mix.abort_fraction,
                 "This fraction of the other requests (chosen with --seed) is sent with a rid "
                 "and aborted by POST /abort_request from another connection, 0 to 0.1 s (drawn "
                 "with --seed) after its first token, or after it was sent when not streaming; "
                 "counted as aborted when the server ends it so, not failed (native backends)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
}

void run_bench_serving(BenchServingFlags& f) {
  bench_serving::BenchOptions& o = f.options;
  o.backend = bench_serving::parse_backend(f.backend);
  o.request_rate = parse_request_rate(f.request_rate);
  o.ignore_eos = !f.disable_ignore_eos;
  if (f.disable_stream) o.mix.stream_fraction = 0.0;
  o.progress = !f.no_progress;
  if (!f.extra_request_body.empty()) {
    o.extra_request_body = nlohmann::json::parse(f.extra_request_body, nullptr, false);
    if (!o.extra_request_body.is_object()) {
      fail("--extra-request-body must be a JSON object, got: {}", f.extra_request_body);
    }
  }
  const bench_serving::BenchmarkRun run = bench_serving::run_benchmark(o, stdout);
  std::fputs(bench_serving::format_table(run.options, run.metrics).c_str(), stdout);
  std::fflush(stdout);
  if (!o.output_details.empty()) bench_serving::write_details(o.output_details, run);
  if (!o.output_file.empty()) {
    bench_serving::append_jsonl(o.output_file,
                                bench_serving::result_record(run.options, run.metrics));
  }
}

}  // namespace

void add_bench_serving(CLI::App& app) {
  auto flags = std::make_shared<BenchServingFlags>();
  CLI::App* cmd = app.add_subcommand(
      "bench-serving",
      "Measure a running server as SGLang's bench_serving does: TTFT, TPOT, ITL, E2E latency "
      "and throughput of streamed requests, printed as its table and appended as JSONL");
  add_server_flags(*cmd, *flags);
  add_dataset_flags(*cmd, *flags);
  add_traffic_flags(*cmd, *flags);
  add_fault_flags(*cmd, *flags);
  cmd->callback([flags] { run_bench_serving(*flags); });
}

}  // namespace mlaserve::tools
