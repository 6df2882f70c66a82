// bench-serving against a fake server with known chunk timing: TTFT, ITL (including the
// multi-token chunk rule), TPOT and concurrency within tolerances, token totals equal to what
// the server generated, failures and timeouts counted. (The command's table and JSONL:
// tests/bench_serving_test.cpp.)
#include <gtest/gtest.h>

#include <cstdio>

#include "bench_serving/report.h"
#include "bench_serving/runner.h"
#include "core/error.h"
#include "support/fake_server.h"
#include "support/serving_table.h"

namespace mlaserve::bench_serving {
namespace {

using testing::FakeServer;
using testing::FakeServerConfig;

constexpr int64_t kOutputLen = 7;  // 1 token, then 3 chunks of 2 tokens 20 ms apart

BenchOptions options_for(const FakeServer& server, Backend backend, int64_t prompts) {
  BenchOptions o;
  o.base_url = server.url();
  o.backend = backend;
  o.dataset.num_prompts = prompts;
  o.dataset.input_len = 32;
  o.dataset.output_len = kOutputLen;
  o.dataset.range_ratio = 1.0;
  o.max_concurrency = 4;
  o.pause_before_run_s = 0.0;
  o.progress = false;
  return o;
}

TEST(EndToEnd, NativeStreamsAreTimedAndCounted) {
  FakeServer server(FakeServerConfig{});
  const BenchmarkRun run = run_benchmark(options_for(server, Backend::Mlaserve, 24), stdout);
  const std::string table = format_table(run.options, run.metrics);
  std::fputs(table.c_str(), stdout);
  testing::expect_full_table(table);
  const BenchmarkMetrics& m = run.metrics;
  EXPECT_EQ(m.completed, 24);
  EXPECT_EQ(m.failed, 0);
  EXPECT_EQ(run.options.tokenizer_dir, "models/brown-tiny");  // from /get_model_info
  EXPECT_EQ(server.flushes(), 1);
  EXPECT_EQ(server.tokens_per_request().size(), 25u);
  EXPECT_EQ(server.tokens_per_request()[0], kOutputLen);  // the warm-up: min(7, 32)
  EXPECT_EQ(m.total_output, server.measured_tokens());
  EXPECT_EQ(m.total_output, 24 * kOutputLen);
  EXPECT_EQ(m.total_output_retokenized, m.total_output);  // " the" is one token
  EXPECT_EQ(m.total_input, 24 * 32);
  EXPECT_TRUE(server.problems().empty()) << server.problems().front();
  for (const RequestResult& r : run.results) {
    ASSERT_TRUE(r.success) << r.error;
    EXPECT_EQ(r.itl.size(), static_cast<size_t>(kOutputLen - 1));
    EXPECT_GE(r.ttft, 0.03);
  }
  // Chunks of 2 tokens 20 ms apart: every gap is 10 ms, not 20 and 0.
  EXPECT_NEAR(m.ttft_ms.median, 32.0, 15.0);
  EXPECT_NEAR(m.itl_ms.median, 10.0, 3.0);
  EXPECT_NEAR(m.itl_ms.mean, 10.0, 3.0);
  EXPECT_NEAR(m.tpot_ms.median, 10.0, 3.0);  // (E2E - TTFT) / 6 = 60 ms / 6
  EXPECT_NEAR(m.e2e_ms.median, 92.0, 25.0);
  EXPECT_GT(m.concurrency, 2.5);  // four at a time, less the gaps between them
  EXPECT_LE(m.concurrency, 4.0 + 1e-9);
  EXPECT_NEAR(m.request_throughput, 24.0 / m.duration_s, 1e-9);
}

// OpenAI chunks say how many tokens they carry only through a running usage count; without it
// each chunk with text counts as one token (SGLang's rule), and the final usage chunk still
// gives the request's total.
TEST(EndToEnd, OpenAiBackendsCountUsage) {
  for (const bool usage_in_every_chunk : {false, true}) {
    for (const Backend backend : {Backend::OpenAi, Backend::OpenAiChat}) {
      FakeServerConfig config;
      config.usage_in_every_chunk = usage_in_every_chunk;
      FakeServer server(config);
      BenchOptions options = options_for(server, backend, 8);
      options.request_rate = 50.0;
      const BenchmarkRun run = run_benchmark(options, stdout);
      EXPECT_EQ(run.metrics.completed, 8);
      EXPECT_EQ(run.options.model, "fake-model");
      EXPECT_EQ(server.flushes(), 0);  // OpenAI servers have no /flush_cache
      EXPECT_EQ(run.metrics.total_output, server.measured_tokens());
      EXPECT_TRUE(server.problems().empty()) << server.problems().front();
      const size_t gaps = usage_in_every_chunk ? kOutputLen - 1 : 3;  // else one per chunk
      for (const RequestResult& r : run.results) {
        EXPECT_EQ(r.itl.size(), gaps);
        EXPECT_EQ(r.output_len, kOutputLen);
      }
      EXPECT_NEAR(run.metrics.itl_ms.median, usage_in_every_chunk ? 10.0 : 20.0, 3.0);
      EXPECT_NEAR(run.metrics.tpot_ms.median, 10.0, 3.0);
    }
  }
}

// llama.cpp's llama-server (see FakeServerConfig::llama_server_chunks): one token per chunk, the
// usage only at the end (in chat only when asked for), and a request whose output it could not
// stream as text still counted from that usage, as one chunk that arrived at the end.
TEST(EndToEnd, LlamaServerStreamsAreCounted) {
  for (const Backend backend : {Backend::OpenAi, Backend::OpenAiChat}) {
    FakeServerConfig config;
    config.llama_server_chunks = true;
    config.tokens_per_chunk = 1;
    config.withhold_text_every = 4;  // requests 3 and 7 of 0..8
    FakeServer server(config);
    const BenchmarkRun run = run_benchmark(options_for(server, backend, 8), stdout);
    const BenchmarkMetrics& m = run.metrics;
    EXPECT_EQ(m.completed, 8) << m.first_error;
    EXPECT_EQ(run.options.model, "/models/fake.gguf");
    EXPECT_EQ(m.total_output, server.measured_tokens());
    EXPECT_EQ(m.total_output, 8 * kOutputLen);
    EXPECT_TRUE(server.problems().empty()) << server.problems().front();
    size_t withheld = 0;
    for (const RequestResult& r : run.results) {
      EXPECT_EQ(r.output_len, kOutputLen);
      if (r.generated_text.empty()) {  // the whole output came with the closing usage chunk
        ++withheld;
        EXPECT_TRUE(r.itl.empty());
        EXPECT_GE(r.ttft, 0.03 + 6 * 0.02);
        EXPECT_EQ(r.retokenized_len, 0);
      } else {
        EXPECT_EQ(r.itl.size(), static_cast<size_t>(kOutputLen - 1));
        EXPECT_EQ(r.retokenized_len, kOutputLen);
      }
    }
    EXPECT_EQ(withheld, 2u);
    EXPECT_NEAR(m.itl_ms.median, 20.0, 5.0);
  }
}

// llama-server reports a failure after the stream has begun as an error chunk (HTTP 200).
TEST(EndToEnd, AnErrorChunkMidStreamFailsTheRequest) {
  FakeServerConfig config;
  config.llama_server_chunks = true;
  config.error_chunk_every = 3;  // requests 2 and 5 of 0..6
  FakeServer server(config);
  BenchOptions options = options_for(server, Backend::OpenAi, 6);
  options.max_concurrency = 1;
  const BenchmarkRun run = run_benchmark(options, stdout);
  EXPECT_EQ(run.metrics.completed, 4);
  EXPECT_EQ(run.metrics.failed, 2);
  EXPECT_EQ(run.metrics.first_error,
            "server error: The model produced output that does not match the expected "
            "Content-only format");
  EXPECT_FALSE(run.results[1].success);
  EXPECT_EQ(run.metrics.total_output, server.measured_tokens());
}

TEST(EndToEnd, WithoutStreamingTtftIsTheLatency) {
  FakeServer server(FakeServerConfig{});
  BenchOptions options = options_for(server, Backend::Sglang, 4);
  options.stream = false;
  const BenchmarkRun run = run_benchmark(options, stdout);
  EXPECT_EQ(run.metrics.completed, 4);
  EXPECT_EQ(run.metrics.total_output, 4 * kOutputLen);
  for (const RequestResult& r : run.results) {
    EXPECT_EQ(r.ttft, r.latency);
    EXPECT_TRUE(r.itl.empty());
  }
}

TEST(EndToEnd, FailedRequestsAreCountedWithTheFirstError) {
  FakeServerConfig config;
  config.fail_every = 3;  // requests 2, 5, 8 of 0..9
  FakeServer server(config);
  BenchOptions options = options_for(server, Backend::Mlaserve, 9);
  options.max_concurrency = 1;  // so that the server sees them in dataset order
  const BenchmarkRun run = run_benchmark(options, stdout);
  EXPECT_EQ(run.metrics.completed, 6);
  EXPECT_EQ(run.metrics.failed, 3);
  EXPECT_EQ(run.metrics.first_error, "HTTP 500: boom");
  EXPECT_FALSE(run.results[1].success);
  EXPECT_EQ(run.metrics.total_output, server.measured_tokens());
  EXPECT_NE(format_table(run.options, run.metrics).find("the first error: HTTP 500: boom"),
            std::string::npos);
}

TEST(EndToEnd, AFailedWarmUpStopsTheRun) {
  FakeServerConfig config;
  config.fail_every = 1;
  FakeServer server(config);
  EXPECT_THROW(run_benchmark(options_for(server, Backend::Mlaserve, 3), stdout), Error);
  EXPECT_EQ(server.tokens_per_request().size(), 1u);
}

TEST(EndToEnd, SlowRequestsTimeOut) {
  FakeServerConfig config;
  config.stall_after_flush_s = 1.5;
  FakeServer server(config);
  BenchOptions options = options_for(server, Backend::Mlaserve, 2);
  options.request_timeout_s = 0.3;
  const BenchmarkRun run = run_benchmark(options, stdout);
  EXPECT_EQ(run.metrics.failed, 2);
  EXPECT_EQ(run.metrics.first_error, "timed out after 0.3 s");
  EXPECT_LT(run.metrics.duration_s, 1.2);
}

TEST(EndToEnd, UnreachableServerNeedsATokenizer) {
  BenchOptions options;
  options.base_url = "http://127.0.0.1:1";  // nothing listens on port 1
  options.request_timeout_s = 2.0;
  EXPECT_THROW(run_benchmark(options, stdout), Error);
}

}  // namespace
}  // namespace mlaserve::bench_serving
