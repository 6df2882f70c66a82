// `mlaserve bench-one-batch` on a golden tiny model: one JSONL record per combination of the
// swept lists, in order, with SGLang's field names and figures consistent with each other, and
// the printed report lines.
#include <gtest/gtest.h>

#include <sstream>

#include "support/command.h"
#include "support/files.h"

namespace mlaserve::testing {
namespace {

using nlohmann::json;

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// Runs bench-one-batch with `flags`; the records it appended and its output.
std::pair<std::vector<json>, std::string> bench(const std::string& flags) {
  TempDir tmp;
  const auto r = run_command(mlaserve_bin() +
                             " bench-one-batch --model tests/data/models/tiny-v3 --dtype float32 "
                             "--result-filename " +
                             (tmp / "r.jsonl").string() + " " + flags);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return {read_jsonl(tmp / "r.jsonl"), r.output};
}

void expect_consistent(const json& r, int64_t bs, int64_t in, int64_t out) {
  SCOPED_TRACE(r.dump());
  EXPECT_EQ(r["batch_size"], bs);
  EXPECT_EQ(r["input_len"], in);
  EXPECT_EQ(r["output_len"], out);
  const double prefill = r["prefill_latency"], total = r["total_latency"];
  EXPECT_GT(prefill, 0);
  EXPECT_GE(total, prefill);
  EXPECT_NEAR(r["prefill_throughput"].get<double>(), bs * in / prefill, 1e-6 * bs * in / prefill);
  EXPECT_NEAR(r["overall_throughput"].get<double>(), bs * (in + out) / total,
              1e-6 * bs * (in + out) / total);
  // One generated token comes from the prefill step; decode steps exist only beyond it.
  EXPECT_EQ(r.contains("median_decode_latency"), out > 1);
  if (out > 1) {
    const double decode = r["median_decode_latency"];
    EXPECT_GT(decode, 0);
    EXPECT_LE(decode, total - prefill);  // the median decode step is one of the steps after prefill
    EXPECT_NEAR(r["median_decode_throughput"].get<double>(), bs / decode, 1e-6 * bs / decode);
  }
}

TEST(BenchOneBatch, SweepsEveryCombinationInOrder) {
  const auto [records, output] = bench("--batch-size 1 3 --input-len 5 --output-len 1 4");
  ASSERT_EQ(records.size(), 4u) << output;
  const int64_t combos[4][2] = {{1, 1}, {1, 4}, {3, 1}, {3, 4}};  // {batch, output}
  for (size_t i = 0; i < 4; ++i) expect_consistent(records[i], combos[i][0], 5, combos[i][1]);
  EXPECT_EQ(count_of(output, "Prefill. latency:"), 4u) << output;
  EXPECT_EQ(count_of(output, "Decode.  median latency:"), 2u) << output;
  EXPECT_EQ(count_of(output, "Total. latency:"), 4u) << output;
}

TEST(BenchOneBatch, RunsUnderDpAttention) {
  const auto [records, output] =
      bench("--tp 2 --dp 2 --enable-dp-attention --batch-size 3 --input-len 6 --output-len 3");
  ASSERT_EQ(records.size(), 1u) << output;
  expect_consistent(records[0], 3, 6, 3);
  EXPECT_EQ(records[0]["layout"], "tp=2 dp=2 dp-attention") << output;
}

}  // namespace
}  // namespace mlaserve::testing
