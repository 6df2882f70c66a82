// calculate_metrics arithmetic on hand-made request results, and the chunk timing rules.
#include "bench_serving/metrics.h"

#include <gtest/gtest.h>

#include "bench_serving/stream_timer.h"

namespace mlaserve::bench_serving {
namespace {

RequestResult success(double ttft, double latency, int64_t output_len, std::vector<double> itl) {
  RequestResult r;
  r.outcome = Outcome::Ok;
  r.prompt_len = 100;
  r.output_len = output_len;
  r.retokenized_len = output_len + 1;
  r.ttft = ttft;
  r.latency = latency;
  r.itl = std::move(itl);
  return r;
}

RequestResult failed(std::string error) {
  RequestResult r;
  r.prompt_len = 50;
  r.error = std::move(error);
  return r;
}

TEST(Metrics, TotalsThroughputsAndConcurrency) {
  const std::vector<RequestResult> results = {success(0.1, 1.0, 10, {}), failed("HTTP 500: boom"),
                                              success(0.2, 2.0, 4, {}), success(0.3, 3.0, 1, {}),
                                              failed("timed out")};
  const BenchmarkMetrics m = compute_metrics(results, 4.0);
  EXPECT_EQ(m.completed, 3);
  EXPECT_EQ(m.failed, 2);
  EXPECT_EQ(m.first_error, "HTTP 500: boom");
  EXPECT_EQ(m.total_input, 300);  // failed requests' prompts do not count
  EXPECT_EQ(m.total_output, 15);
  EXPECT_EQ(m.total_output_retokenized, 18);
  EXPECT_DOUBLE_EQ(m.request_throughput, 0.75);
  EXPECT_DOUBLE_EQ(m.input_throughput, 75.0);
  EXPECT_DOUBLE_EQ(m.output_throughput, 3.75);
  EXPECT_DOUBLE_EQ(m.total_throughput, 78.75);
  EXPECT_DOUBLE_EQ(m.concurrency, 1.5);  // (1 + 2 + 3) s of E2E over 4 s
  EXPECT_DOUBLE_EQ(m.e2e_ms.mean, 2000.0);
  EXPECT_DOUBLE_EQ(m.e2e_ms.median, 2000.0);
  EXPECT_DOUBLE_EQ(m.e2e_ms.p99, 2980.0);
  EXPECT_DOUBLE_EQ(m.ttft_ms.mean, 200.0);
}

TEST(Metrics, TpotExcludesTheFirstTokenAndOneTokenRequests) {
  // (1.0 - 0.1) / 9 = 0.1 s and (2.0 - 0.2) / 3 = 0.6 s; the 1-token request has no TPOT.
  const std::vector<RequestResult> results = {success(0.1, 1.0, 10, {}), success(0.2, 2.0, 4, {}),
                                              success(0.3, 3.0, 1, {})};
  const BenchmarkMetrics m = compute_metrics(results, 4.0);
  EXPECT_NEAR(m.tpot_ms.mean, 350.0, 1e-9);
  EXPECT_NEAR(m.tpot_ms.median, 350.0, 1e-9);
  EXPECT_NEAR(m.tpot_ms.p99, 100.0 + 0.99 * 500.0, 1e-9);
  EXPECT_NEAR(m.tpot_ms.std, 250.0, 1e-9);
}

TEST(Metrics, ItlPoolsTheGapsOfAllRequests) {
  const std::vector<RequestResult> results = {success(0.1, 1.0, 3, {0.01, 0.03}),
                                              success(0.1, 1.0, 3, {0.02, 0.04}), failed("x")};
  const BenchmarkMetrics m = compute_metrics(results, 1.0);
  EXPECT_NEAR(m.itl_ms.mean, 25.0, 1e-9);
  EXPECT_NEAR(m.itl_ms.median, 25.0, 1e-9);
  EXPECT_NEAR(m.itl_ms.p95, 38.5, 1e-9);  // rank 2.85 of 10 20 30 40
  EXPECT_NEAR(m.itl_ms.p99, 39.7, 1e-9);
  EXPECT_NEAR(m.itl_ms.max, 40.0, 1e-9);
}

// SGLang's accept length: generated tokens over verify steps, only over the requests whose
// server reported verify steps; none reported gives 0 (the table then leaves the line out).
TEST(Metrics, AcceptLengthIsTokensPerVerifyStepOfSpeculativeRequests) {
  std::vector<RequestResult> results = {success(0.1, 1.0, 30, {}), success(0.1, 1.0, 12, {}),
                                        success(0.1, 1.0, 50, {})};
  EXPECT_EQ(compute_metrics(results, 2.0).accept_length, 0.0);
  results[0].spec_verify_ct = 12;
  results[1].spec_verify_ct = 8;
  EXPECT_DOUBLE_EQ(compute_metrics(results, 2.0).accept_length, (30.0 + 12.0) / (12 + 8));
}

// Cut and aborted requests are counted apart: neither failed nor measured.
TEST(Metrics, CutAndAbortedRequestsAreNeitherFailedNorMeasured) {
  std::vector<RequestResult> results = {success(0.1, 1.0, 10, {}), success(0.1, 9.0, 3, {}),
                                        success(0.1, 9.0, 3, {}), failed("refused")};
  results[1].outcome = Outcome::Cut;
  results[2].outcome = Outcome::Aborted;
  const BenchmarkMetrics m = compute_metrics(results, 2.0);
  EXPECT_EQ(m.completed, 1);
  EXPECT_EQ(m.cut, 1);
  EXPECT_EQ(m.aborted, 1);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.total_output, 10);
  EXPECT_DOUBLE_EQ(m.e2e_ms.max, 1000.0);
  EXPECT_EQ(outcome_name(Outcome::Cut), "cut");
}

TEST(Metrics, NothingSucceeded) {
  const BenchmarkMetrics m = compute_metrics(std::vector<RequestResult>{failed("refused")}, 1.0);
  EXPECT_EQ(m.completed, 0);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.e2e_ms.mean, 0.0);
  EXPECT_EQ(m.concurrency, 0.0);
}

ChunkDelta tokens(int64_t count) {
  ChunkDelta delta;
  delta.text = std::string(static_cast<size_t>(count), 'x');
  delta.new_tokens = count;
  return delta;
}

TEST(StreamTimer, AChunkOfKTokensGivesKEqualGaps) {
  StreamTimer timer;
  timer.add(tokens(1), 0.1);  // first token: TTFT
  timer.add(tokens(2), 0.3);  // 0.2 s for 2 tokens: 0.1 + 0.1
  timer.add(tokens(1), 0.4);
  timer.add(tokens(0), 0.5);  // carries no tokens: no gap, and the next gap starts at 0.4
  timer.add(tokens(3), 0.7);
  EXPECT_DOUBLE_EQ(timer.ttft(), 0.1);
  ASSERT_EQ(timer.itl().size(), 6u);
  for (const double gap : timer.itl()) EXPECT_NEAR(gap, 0.1, 1e-12);
  EXPECT_EQ(timer.output_tokens(), 7);
  EXPECT_EQ(timer.text(), "xxxxxxx");
}

TEST(StreamTimer, TheFirstChunksExtraTokensHaveNoGaps) {
  StreamTimer timer;
  timer.add(tokens(0), 0.05);  // e.g. a role-only chat chunk
  timer.add(tokens(3), 0.2);
  timer.add(tokens(1), 0.3);
  EXPECT_DOUBLE_EQ(timer.ttft(), 0.2);
  ASSERT_EQ(timer.itl().size(), 1u);
  EXPECT_NEAR(timer.itl()[0], 0.1, 1e-12);
}

TEST(StreamTimer, TheServersCountWinsOverTheChunkCount) {
  StreamTimer timer;
  timer.add(tokens(1), 0.1);
  ChunkDelta usage;
  usage.completion_tokens = 5;
  timer.add(usage, 0.2);
  EXPECT_EQ(timer.output_tokens(), 5);
  EXPECT_TRUE(timer.itl().empty());
}

}  // namespace
}  // namespace mlaserve::bench_serving
