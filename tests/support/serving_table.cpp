#include "support/serving_table.h"

#include <gtest/gtest.h>

#include <array>
#include <string_view>

namespace mlaserve::testing {
namespace {

// The table's labels and section titles in printed order.
constexpr std::array<std::string_view, 33> kTableLines = {
    "============ Serving Benchmark Result ============",
    "Backend:",
    "Traffic request rate:",
    "Max request concurrency:",
    "Successful requests:",
    "Benchmark duration (s):",
    "Total input tokens:",
    "Total generated tokens:",
    "Total generated tokens (retokenized):",
    "Request throughput (req/s):",
    "Input token throughput (tok/s):",
    "Output token throughput (tok/s):",
    "Total token throughput (tok/s):",
    "Concurrency:",
    "----------------End-to-End Latency----------------",
    "Mean E2E Latency (ms):",
    "Median E2E Latency (ms):",
    "P99 E2E Latency (ms):",
    "---------------Time to First Token----------------",
    "Mean TTFT (ms):",
    "Median TTFT (ms):",
    "P99 TTFT (ms):",
    "-----Time per Output Token (excl. 1st token)------",
    "Mean TPOT (ms):",
    "Median TPOT (ms):",
    "P99 TPOT (ms):",
    "---------------Inter-Token Latency----------------",
    "Mean ITL (ms):",
    "Median ITL (ms):",
    "P95 ITL (ms):",
    "P99 ITL (ms):",
    "Max ITL (ms):",
    "==================================================",
};

}  // namespace

void expect_full_table(const std::string& output) {
  size_t at = 0;
  for (const std::string_view line : kTableLines) {
    std::string start_of_line = "\n";  // (not "\n" + ...: GCC 12 warns falsely of -Wrestrict)
    start_of_line += line;
    const size_t found = output.find(start_of_line, at);
    ASSERT_NE(found, std::string::npos) << "'" << line << "' missing or out of order in\n"
                                        << output;
    at = found + 1;
  }
}

}  // namespace mlaserve::testing
