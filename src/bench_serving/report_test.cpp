// The table's exact layout (SGLang's format strings) and the JSONL record's fields.
#include "bench_serving/report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "support/serving_table.h"

namespace mlaserve::bench_serving {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

BenchmarkMetrics sample_metrics() {
  BenchmarkMetrics m;
  m.completed = 50;
  m.duration_s = 12.3456;
  m.total_input = 5000;
  m.total_output = 1600;
  m.total_output_retokenized = 1598;
  m.request_throughput = 4.05;
  m.concurrency = 3.999;
  m.itl_ms.max = 123.456;
  return m;
}

TEST(Report, TableLinesAreSglangs) {
  BenchOptions options;
  options.backend = Backend::Sglang;
  const std::string table = format_table(options, sample_metrics());
  testing::expect_full_table(table);
  const std::vector<std::string> lines = lines_of(table);
  const std::vector<std::string> expected_start = {
      "",
      "============ Serving Benchmark Result ============",
      "Backend:                                 sglang    ",
      "Traffic request rate:                    inf       ",
      "Max request concurrency:                 not set   ",
      "Successful requests:                     50        ",
      "Benchmark duration (s):                  12.35     ",
      "Total input tokens:                      5000      ",
      "Total generated tokens:                  1600      ",
      "Total generated tokens (retokenized):    1598      ",
      "Request throughput (req/s):              4.05      ",
  };
  ASSERT_GE(lines.size(), expected_start.size());
  for (size_t i = 0; i < expected_start.size(); ++i) EXPECT_EQ(lines[i], expected_start[i]);
  for (const char* line : {"Concurrency:                             4.00      ",
                           "Max ITL (ms):                            123.46    "}) {
    EXPECT_NE(std::find(lines.begin(), lines.end(), line), lines.end()) << line;
  }
}

TEST(Report, RateAndConcurrencyPrintLikePython) {
  BenchOptions options;
  options.request_rate = 4.0;
  options.max_concurrency = 8;
  const std::string table = format_table(options, sample_metrics());
  EXPECT_NE(table.find("Traffic request rate:                    4.0       \n"), std::string::npos);
  EXPECT_NE(table.find("Max request concurrency:                 8         \n"), std::string::npos);
  options.request_rate = 0.25;
  EXPECT_NE(format_table(options, sample_metrics()).find("rate:                    0.25      \n"),
            std::string::npos);
}

TEST(Report, FailuresAreCountedAndTheFirstErrorShown) {
  BenchmarkMetrics m = sample_metrics();
  m.failed = 2;
  m.first_error = "HTTP 500: boom";
  const std::string table = format_table(BenchOptions{}, m);
  EXPECT_NE(table.find("Failed requests:                         2         \n"), std::string::npos);
  EXPECT_NE(table.find("2 of 52 requests failed; the first error: HTTP 500: boom\n"),
            std::string::npos);
}

TEST(Report, JsonRecordHasEveryField) {
  BenchOptions options;
  options.max_concurrency = 4;
  const nlohmann::ordered_json record = result_record(options, sample_metrics());
  for (const char* key :
       {"backend", "dataset_name", "request_rate", "max_concurrency", "random_input_len",
        "random_output_len", "random_range_ratio", "duration", "completed", "total_input_tokens",
        "total_output_tokens", "total_output_tokens_retokenized", "request_throughput",
        "input_throughput", "output_throughput", "total_throughput", "concurrency", "p95_itl_ms",
        "max_itl_ms"}) {
    EXPECT_TRUE(record.contains(key)) << key;
  }
  for (const char* stat : {"mean", "median", "std", "p99"}) {
    for (const char* metric : {"e2e_latency", "ttft", "tpot", "itl"}) {
      const std::string key = std::string(stat) + "_" + metric + "_ms";
      EXPECT_TRUE(record.contains(key)) << key;
    }
  }
  EXPECT_EQ(record["request_rate"], "inf");
  EXPECT_EQ(record["max_concurrency"], 4);
  EXPECT_EQ(record["total_output_tokens"], 1600);
  EXPECT_FALSE(record.contains("first_error"));
}

}  // namespace
}  // namespace mlaserve::bench_serving
