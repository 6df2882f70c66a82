#include "bench_serving/report.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>

#include "core/error.h"

namespace mlaserve::bench_serving {

using nlohmann::ordered_json;

namespace {

constexpr size_t kTableWidth = 50;

// How Python prints a float: "inf", "4.0", "0.25".
std::string python_float(double value) {
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == std::floor(value) && std::fabs(value) < 1e16) return fmt::format("{:.1f}", value);
  return fmt::format("{}", value);
}

class TableWriter {
 public:
  // Python's "{:=^50}": centred, the odd fill character on the right.
  void title(std::string_view text, char fill) {
    const size_t padding = kTableWidth - std::min(text.size(), kTableWidth);
    out_ += std::string(padding / 2, fill);
    out_ += text;
    out_ += std::string(padding - padding / 2, fill) + "\n";
  }
  void line(std::string_view label, std::string_view value) {
    out_ += fmt::format("{:<40} {:<10}\n", label, value);
  }
  void line(std::string_view label, int64_t value) { line(label, std::to_string(value)); }
  void line(std::string_view label, double value) { line(label, fmt::format("{:.2f}", value)); }
  void raw(std::string_view text) { out_ += text; }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

void write_totals(TableWriter& t, const BenchOptions& o, const BenchmarkMetrics& m) {
  t.line("Backend:", backend_name(o.backend));
  t.line("Traffic request rate:", python_float(o.request_rate));
  t.line("Max request concurrency:",
         o.max_concurrency > 0 ? std::to_string(o.max_concurrency) : std::string("not set"));
  t.line("Successful requests:", m.completed);
  if (m.failed > 0) t.line("Failed requests:", m.failed);
  if (m.cut > 0) t.line("Disconnected requests (on purpose):", m.cut);
  if (m.aborted > 0) t.line("Aborted requests (on purpose):", m.aborted);
  t.line("Benchmark duration (s):", m.duration_s);
  t.line("Total input tokens:", m.total_input);
  t.line("Total generated tokens:", m.total_output);
  t.line("Total generated tokens (retokenized):", m.total_output_retokenized);
  t.line("Request throughput (req/s):", m.request_throughput);
  t.line("Input token throughput (tok/s):", m.input_throughput);
  t.line("Output token throughput (tok/s):", m.output_throughput);
  t.line("Total token throughput (tok/s):", m.total_throughput);
  t.line("Concurrency:", m.concurrency);
  if (m.accept_length > 0) t.line("Accept length:", m.accept_length);
}

void write_mean_median_p99(TableWriter& t, std::string_view title, std::string_view name,
                           const Distribution& d) {
  t.title(title, '-');
  t.line(fmt::format("Mean {} (ms):", name), d.mean);
  t.line(fmt::format("Median {} (ms):", name), d.median);
  t.line(fmt::format("P99 {} (ms):", name), d.p99);
}

void write_latencies(TableWriter& t, const BenchmarkMetrics& m) {
  write_mean_median_p99(t, "End-to-End Latency", "E2E Latency", m.e2e_ms);
  write_mean_median_p99(t, "Time to First Token", "TTFT", m.ttft_ms);
  write_mean_median_p99(t, "Time per Output Token (excl. 1st token)", "TPOT", m.tpot_ms);
  t.title("Inter-Token Latency", '-');
  t.line("Mean ITL (ms):", m.itl_ms.mean);
  t.line("Median ITL (ms):", m.itl_ms.median);
  t.line("P95 ITL (ms):", m.itl_ms.p95);
  t.line("P99 ITL (ms):", m.itl_ms.p99);
  t.line("Max ITL (ms):", m.itl_ms.max);
}

std::string local_date() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S%z", &local);
  return text;
}

void add_distribution(ordered_json& record, const std::string& name, const Distribution& d,
                      bool with_p95_and_max) {
  record["mean_" + name + "_ms"] = d.mean;
  record["median_" + name + "_ms"] = d.median;
  record["std_" + name + "_ms"] = d.std;
  if (with_p95_and_max) record["p95_" + name + "_ms"] = d.p95;
  record["p99_" + name + "_ms"] = d.p99;
  if (with_p95_and_max) record["max_" + name + "_ms"] = d.max;
}

ordered_json settings_record(const BenchOptions& o) {
  const DatasetOptions& d = o.dataset;
  ordered_json record;
  record["backend"] = backend_name(o.backend);
  record["dataset_name"] = d.name;
  record["request_rate"] =
      std::isinf(o.request_rate) ? ordered_json("inf") : ordered_json(o.request_rate);
  record["max_concurrency"] =
      o.max_concurrency > 0 ? ordered_json(o.max_concurrency) : ordered_json(nullptr);
  record["num_prompts"] = d.num_prompts;
  record["random_input_len"] = d.input_len;
  record["random_output_len"] = d.output_len;
  record["random_range_ratio"] = d.range_ratio;
  if (d.name == "shared-prefix") {
    record["shared_prefix_len"] = d.shared_prefix_len;
    record["num_groups"] = d.num_groups;
  }
  record["seed"] = o.seed;
  record["ignore_eos"] = o.ignore_eos;
  record["stream"] = o.mix.stream_fraction > 0.0;
  record["stream_fraction"] = o.mix.stream_fraction;
  record["disconnect_fraction"] = o.mix.disconnect_fraction;
  record["abort_fraction"] = o.mix.abort_fraction;
  record["base_url"] = o.base_url;
  record["tokenizer"] = o.tokenizer_dir;
  record["date"] = local_date();
  return record;
}

}  // namespace

std::string format_table(const BenchOptions& options, const BenchmarkMetrics& metrics) {
  TableWriter table;
  table.raw("\n");
  table.title(" Serving Benchmark Result ", '=');
  write_totals(table, options, metrics);
  write_latencies(table, metrics);
  table.raw(std::string(kTableWidth, '=') + "\n");
  if (metrics.failed > 0) {
    table.raw(fmt::format("{} of {} requests failed; the first error: {}\n", metrics.failed,
                          metrics.failed + metrics.completed, metrics.first_error));
  }
  return table.take();
}

ordered_json result_record(const BenchOptions& options, const BenchmarkMetrics& m) {
  ordered_json record = settings_record(options);
  record["duration"] = m.duration_s;
  record["completed"] = m.completed;
  record["failed"] = m.failed;
  if (m.failed > 0) record["first_error"] = m.first_error;
  record["cut"] = m.cut;
  record["aborted"] = m.aborted;
  record["total_input_tokens"] = m.total_input;
  record["total_output_tokens"] = m.total_output;
  record["total_output_tokens_retokenized"] = m.total_output_retokenized;
  if (m.accept_length > 0) record["accept_length"] = m.accept_length;
  record["request_throughput"] = m.request_throughput;
  record["input_throughput"] = m.input_throughput;
  record["output_throughput"] = m.output_throughput;
  record["total_throughput"] = m.total_throughput;
  add_distribution(record, "e2e_latency", m.e2e_ms, false);
  add_distribution(record, "ttft", m.ttft_ms, false);
  add_distribution(record, "tpot", m.tpot_ms, false);
  add_distribution(record, "itl", m.itl_ms, true);
  record["concurrency"] = m.concurrency;
  return record;
}

void append_jsonl(const std::string& path, const ordered_json& record) {
  std::ofstream file(path, std::ios::app);
  if (!file) fail("cannot open --output-file {} for appending", path);
  file << record.dump(-1, ' ', false, ordered_json::error_handler_t::replace) << '\n';
  if (!file) fail("cannot write --output-file {}", path);
}

}  // namespace mlaserve::bench_serving
