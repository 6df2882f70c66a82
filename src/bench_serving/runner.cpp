#include "bench_serving/runner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "bench_serving/dataset.h"
#include "bench_serving/progress.h"
#include "bench_serving/request.h"
#include "bench_serving/server_info.h"
#include "bench_serving/vocabulary.h"
#include "bench_serving/work_queue.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace mlaserve::bench_serving {

namespace {

using Clock = std::chrono::steady_clock;

void check_options(const BenchOptions& o) {
  constexpr int64_t kMaxPrompts = 100000;
  if (o.dataset.num_prompts < 1 || o.dataset.num_prompts > kMaxPrompts) {
    fail("--num-prompts must be in [1, {}], got {}", kMaxPrompts, o.dataset.num_prompts);
  }
  if (!(o.request_rate > 0.0)) fail("--request-rate must be positive or inf");
  if (o.max_concurrency < 0) fail("--max-concurrency must be positive");
  if (!(o.request_timeout_s > 0.0)) fail("--request-timeout must be positive");
  if (o.dataset.input_len < 1 || o.dataset.output_len < 1) {
    fail("--random-input-len and --random-output-len must be at least 1");
  }
  if (o.dataset.shared_prefix_len < 0) fail("--shared-prefix-len must not be negative");
  if (o.mix.abort_fraction > 0.0 && !is_native(o.backend)) {
    fail(
        "--abort-fraction needs the native API (--backend mlaserve or sglang): POST "
        "/abort_request names the request by its rid");
  }
}

RequestSettings request_settings(const BenchOptions& o) {
  return {o.backend, o.ignore_eos, o.model, o.extra_request_body};
}

// The plans come from a random source of their own, so that a seed gives the prompts and
// arrival times it gave before plans existed. Aborted requests get a rid unique to this client
// process, so that two clients of one server do not abort each other's requests.
std::vector<RequestPlan> make_plans(const BenchOptions& o,
                                    const std::vector<BenchRequest>& requests) {
  constexpr uint64_t kPlanSeedMix = 0x9e3779b97f4a7c15;  // any fixed odd constant
  Rng rng(o.seed ^ kPlanSeedMix);
  std::vector<RequestPlan> plans = plan_requests(o.mix, requests, rng);
  for (size_t i = 0; i < plans.size(); ++i) {
    if (plans[i].abort_delay_s) plans[i].rid = fmt::format("bench-serving-{}-{}", getpid(), i);
  }
  return plans;
}

void warm_up(const HttpClient& client, const BenchOptions& o, const BenchRequest& first,
             std::FILE* log) {
  constexpr int64_t kWarmUpTokens = 32;
  std::fprintf(log, "Starting warmup with 1 sequence...\n");
  const BenchRequest request{first.prompt, first.prompt_len,
                             std::min(first.output_len, kWarmUpTokens)};
  RequestPlan plan;
  plan.stream = o.mix.stream_fraction > 0.0;
  const RequestResult result = send_request(client, request_settings(o), request, plan);
  if (!result.ok()) fail("the warm-up request failed: {}", result.error);
  std::fprintf(log, "Warmup completed. Starting main benchmark run...\n");
}

void flush_cache(const HttpClient& client, const BenchOptions& o, std::FILE* log) {
  if (!is_native(o.backend)) return;  // OpenAI-compatible servers have no /flush_cache
  const HttpResult http = client.post_json("/flush_cache", "");
  if (!http.ok()) std::fprintf(log, "note: POST /flush_cache: %s\n", http.describe().c_str());
}

// Sends each request at its arrival time; `workers` threads take them in arrival order.
// Returns the benchmark duration: from the first send to the last completion.
double send_all(const HttpClient& client, const BenchOptions& o, BenchmarkRun& run,
                const std::vector<double>& arrivals) {
  const std::vector<BenchRequest>& requests = run.requests;
  const int64_t limit = o.max_concurrency > 0 ? o.max_concurrency : kMaxInFlight;
  const size_t workers = static_cast<size_t>(
      std::min<int64_t>(std::min(limit, kMaxInFlight), static_cast<int64_t>(requests.size())));
  const RequestSettings settings = request_settings(o);
  Progress progress(requests.size(), o.progress);
  WorkQueue queue;
  std::vector<std::jthread> threads;
  for (size_t w = 0; w < workers; ++w) {
    threads.emplace_back([&] {
      while (const std::optional<size_t> i = queue.pop()) {
        run.results[*i] = send_request(client, settings, requests[*i], run.plans[*i]);
        progress.advance();
      }
    });
  }
  const Clock::time_point start = Clock::now();  // the workers are ready: time from here
  for (size_t i = 0; i < requests.size(); ++i) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(arrivals[i])));
    queue.push(i);
  }
  queue.close();
  threads.clear();  // joins
  const double duration = std::chrono::duration<double>(Clock::now() - start).count();
  progress.finish();
  return duration;
}

// Counts each generated text with the client's tokenizer, after the run. A server that
// reported no token count (only possible without streaming) is credited with that count.
void retokenize(const tokenizer::Tokenizer& tokenizer, std::vector<RequestResult>& results) {
  for (RequestResult& result : results) {
    if (!result.ok()) continue;
    result.retokenized_len =
        static_cast<int64_t>(tokenizer.encode(result.generated_text, false).size());
    if (result.output_len == 0) result.output_len = result.retokenized_len;
  }
}

void log_dataset(const std::vector<BenchRequest>& requests, std::FILE* log) {
  int64_t input = 0, output = 0;
  for (const BenchRequest& r : requests) {
    input += r.prompt_len;
    output += r.output_len;
  }
  std::fprintf(log, "#Input tokens: %lld\n#Output tokens: %lld\n", static_cast<long long>(input),
               static_cast<long long>(output));
}

}  // namespace

BenchmarkRun run_benchmark(BenchOptions options, std::FILE* log) {
  check_options(options);
  const HttpClient client(parse_server_url(options.base_url), options.request_timeout_s);
  if (options.tokenizer_dir.empty()) options.tokenizer_dir = served_tokenizer_dir(client);
  std::fprintf(log, "Tokenizer: %s\n", options.tokenizer_dir.c_str());
  const tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::load(options.tokenizer_dir);
  const PromptMaker maker(tokenizer, prompt_token_ids(options.tokenizer_dir, tokenizer));
  Rng rng(options.seed);
  std::vector<BenchRequest> requests = make_dataset(options.dataset, maker, rng);
  const std::vector<double> arrivals = arrival_times(requests.size(), options.request_rate, rng);
  std::vector<RequestPlan> plans = make_plans(options, requests);
  log_dataset(requests, log);
  if (!is_native(options.backend) && options.model.empty()) {
    options.model = served_model_name(client);
  }

  warm_up(client, options, requests.front(), log);
  flush_cache(client, options, log);
  std::this_thread::sleep_for(std::chrono::duration<double>(options.pause_before_run_s));

  std::vector<RequestResult> results(requests.size());
  BenchmarkRun run{.options = options,
                   .requests = std::move(requests),
                   .plans = std::move(plans),
                   .results = std::move(results),
                   .metrics = {}};
  const double duration = send_all(client, options, run, arrivals);
  retokenize(tokenizer, run.results);
  run.metrics = compute_metrics(run.results, duration);
  return run;
}

}  // namespace mlaserve::bench_serving
