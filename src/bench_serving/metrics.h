// What one benchmark request measured, and the aggregate metrics of SGLang's bench_serving
// (calculate_metrics): totals, throughputs, and TTFT / TPOT / ITL / E2E distributions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mlaserve::bench_serving {

// How a request ended. Cut and Aborted are the faults a run injects on purpose (a client that
// closed its stream early, a request aborted through /abort_request): not failures, and not
// measured either.
enum class Outcome { Ok, Cut, Aborted, Failed };

std::string_view outcome_name(Outcome outcome);  // "ok", "cut", "aborted", "failed"

// Times are in seconds from the moment the request was sent.
struct RequestResult {
  Outcome outcome = Outcome::Failed;
  bool ok() const { return outcome == Outcome::Ok; }
  std::string error;                // why it failed
  int64_t prompt_len = 0;           // tokens in the prompt, as the dataset built it
  int64_t output_len = 0;           // generated tokens as the server reported them
  int64_t retokenized_len = 0;      // generated text re-encoded by the client's tokenizer
  double ttft = 0.0;                // time to the first chunk that carried tokens
  double latency = 0.0;             // end to end: until the response was complete
  std::vector<double> itl;          // one gap per token after the first chunk
  int64_t spec_verify_ct = 0;       // speculative verify steps, where the server reports them
  std::string generated_text;       // what arrived, also of a cut or aborted request
  std::vector<int32_t> output_ids;  // native: the ids of the generated tokens, as reported
};

// A distribution in milliseconds.
struct Distribution {
  double mean = 0.0, median = 0.0, std = 0.0, p95 = 0.0, p99 = 0.0, max = 0.0;
};

Distribution summarize_ms(std::span<const double> seconds);

struct BenchmarkMetrics {
  int64_t completed = 0;
  int64_t failed = 0;
  int64_t cut = 0;          // streams the client closed on purpose
  int64_t aborted = 0;      // requests aborted on purpose
  std::string first_error;  // of the first failed request in dataset order
  double duration_s = 0.0;
  int64_t total_input = 0;   // prompt tokens of the successful requests
  int64_t total_output = 0;  // server-reported generated tokens of the successful requests
  int64_t total_output_retokenized = 0;
  // SGLang's accept length: generated tokens per speculative verify step, over the requests
  // that report verify steps (0: none did).
  double accept_length = 0.0;
  double request_throughput = 0.0;  // per second
  double input_throughput = 0.0;
  double output_throughput = 0.0;
  double total_throughput = 0.0;
  double concurrency = 0.0;  // sum of E2E latencies / duration: the mean number in flight
  Distribution e2e_ms, ttft_ms, tpot_ms, itl_ms;
};

// TPOT per request = (latency - ttft) / (output_len - 1), for requests with output_len > 1;
// the ITL distribution pools the gaps of all successful requests.
BenchmarkMetrics compute_metrics(std::span<const RequestResult> results, double duration_s);

}  // namespace mlaserve::bench_serving
