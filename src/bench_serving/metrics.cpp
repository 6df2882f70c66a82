#include "bench_serving/metrics.h"

#include "bench_serving/stats.h"

namespace mlaserve::bench_serving {

Distribution summarize_ms(std::span<const double> seconds) {
  constexpr double kMs = 1000.0;
  return {
      .mean = mean(seconds) * kMs,
      .median = median(seconds) * kMs,
      .std = standard_deviation(seconds) * kMs,
      .p95 = percentile(seconds, 95.0) * kMs,
      .p99 = percentile(seconds, 99.0) * kMs,
      .max = maximum(seconds) * kMs,
  };
}

std::string_view outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::Ok:
      return "ok";
    case Outcome::Cut:
      return "cut";
    case Outcome::Aborted:
      return "aborted";
    case Outcome::Failed:
      return "failed";
  }
  return "?";
}

namespace {

// The per-request samples that the distributions are computed from.
struct Samples {
  std::vector<double> e2e, ttft, tpot, itl;
};

void add_success(const RequestResult& result, BenchmarkMetrics& metrics, Samples& samples) {
  ++metrics.completed;
  metrics.total_input += result.prompt_len;
  metrics.total_output += result.output_len;
  metrics.total_output_retokenized += result.retokenized_len;
  samples.e2e.push_back(result.latency);
  samples.ttft.push_back(result.ttft);
  if (result.output_len > 1) {
    samples.tpot.push_back((result.latency - result.ttft) /
                           static_cast<double>(result.output_len - 1));
  }
  samples.itl.insert(samples.itl.end(), result.itl.begin(), result.itl.end());
}

// Tokens per verify step over the requests whose server counted verify steps.
double accept_length(std::span<const RequestResult> results) {
  int64_t tokens = 0, verify_steps = 0;
  for (const RequestResult& r : results) {
    if (!r.ok() || r.spec_verify_ct == 0) continue;
    tokens += r.output_len;
    verify_steps += r.spec_verify_ct;
  }
  return verify_steps > 0 ? static_cast<double>(tokens) / static_cast<double>(verify_steps) : 0.0;
}

void add_throughputs(BenchmarkMetrics& m) {
  if (m.duration_s <= 0.0) return;
  const double d = m.duration_s;
  m.request_throughput = static_cast<double>(m.completed) / d;
  m.input_throughput = static_cast<double>(m.total_input) / d;
  m.output_throughput = static_cast<double>(m.total_output) / d;
  m.total_throughput = static_cast<double>(m.total_input + m.total_output) / d;
}

}  // namespace

BenchmarkMetrics compute_metrics(std::span<const RequestResult> results, double duration_s) {
  BenchmarkMetrics metrics;
  metrics.duration_s = duration_s;
  metrics.accept_length = accept_length(results);
  Samples samples;
  for (const RequestResult& result : results) {
    switch (result.outcome) {
      case Outcome::Ok:
        add_success(result, metrics, samples);
        break;
      case Outcome::Cut:
        ++metrics.cut;
        break;
      case Outcome::Aborted:
        ++metrics.aborted;
        break;
      case Outcome::Failed:
        if (metrics.failed++ == 0) metrics.first_error = result.error;
        break;
    }
  }
  add_throughputs(metrics);
  double e2e_sum = 0.0;
  for (const double latency : samples.e2e) e2e_sum += latency;
  if (duration_s > 0.0) metrics.concurrency = e2e_sum / duration_s;
  metrics.e2e_ms = summarize_ms(samples.e2e);
  metrics.ttft_ms = summarize_ms(samples.ttft);
  metrics.tpot_ms = summarize_ms(samples.tpot);
  metrics.itl_ms = summarize_ms(samples.itl);
  return metrics;
}

}  // namespace mlaserve::bench_serving
