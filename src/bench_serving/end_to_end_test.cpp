// bench-serving against a fake server with known chunk timing: TTFT, ITL (including the
// multi-token chunk rule), TPOT and concurrency within tolerances, token totals equal to what
// the server generated, failures and timeouts counted. (The command's table and JSONL:
// tests/bench_serving_test.cpp.)
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <numeric>
#include <thread>

#include "bench_serving/details.h"
#include "bench_serving/report.h"
#include "bench_serving/runner.h"
#include "core/error.h"
#include "support/fake_server.h"
#include "support/files.h"
#include "support/serving_table.h"

namespace mlaserve::bench_serving {
namespace {

using testing::FakeServer;
using testing::FakeServerConfig;

constexpr int64_t kOutputLen = 7;  // 1 token, then 3 chunks of 2 tokens 20 ms apart
// The fake server's sleeps before the first chunk and between chunks.
const double kFirstChunkS = FakeServerConfig{}.first_chunk_delay_s;
const double kChunkGapS = FakeServerConfig{}.chunk_gap_s;

// One streamed request's timing, checked without upper bounds that a loaded machine could break.
// Each chunk that counts k tokens adds k equal gaps (SGLang's rule; a wrong one such as 20 ms
// and 0 for a chunk of 2 breaks this), and the gaps add up to the time from the first token to
// the last, which the server's sleeps make at least `chunks` gaps after the first chunk.
void expect_chunk_timing(const RequestResult& r, size_t tokens_per_chunk, int chunks) {
  ASSERT_EQ(r.itl.size(), tokens_per_chunk * static_cast<size_t>(chunks));
  for (size_t i = 0; i < r.itl.size(); ++i) {
    EXPECT_EQ(r.itl[i], r.itl[i - i % tokens_per_chunk]) << "gap " << i;
  }
  const double last_token = r.ttft + std::accumulate(r.itl.begin(), r.itl.end(), 0.0);
  EXPECT_GE(r.ttft, kFirstChunkS);
  EXPECT_GE(last_token, kFirstChunkS + chunks * kChunkGapS - 1e-9);
  EXPECT_LE(last_token, r.latency + 1e-9);
}

// The mean of every request's `value`, in milliseconds: what the run's metrics should report.
double mean_ms(const std::vector<RequestResult>& results,
               const std::function<std::vector<double>(const RequestResult&)>& values) {
  std::vector<double> all;
  for (const RequestResult& r : results) {
    for (const double value : values(r)) all.push_back(value * 1000.0);
  }
  return std::accumulate(all.begin(), all.end(), 0.0) / static_cast<double>(all.size());
}

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
    ASSERT_TRUE(r.ok()) << r.error;
    expect_chunk_timing(r, 2, 3);
  }
  // The metrics' means against the same means taken here from the per-request results.
  const auto seconds = [](auto value) {
    return [value](const RequestResult& r) { return std::vector<double>{value(r)}; };
  };
  EXPECT_NEAR(m.ttft_ms.mean, mean_ms(run.results, seconds([](auto& r) { return r.ttft; })), 1e-9);
  EXPECT_NEAR(m.itl_ms.mean, mean_ms(run.results, [](auto& r) { return r.itl; }), 1e-9);
  EXPECT_NEAR(m.tpot_ms.mean, mean_ms(run.results, seconds([](auto& r) {
                                        return (r.latency - r.ttft) / (kOutputLen - 1);
                                      })),
              1e-9);
  EXPECT_NEAR(m.e2e_ms.mean, mean_ms(run.results, seconds([](auto& r) { return r.latency; })),
              1e-9);
  // Four at a time, each request at least 90 ms long: near 4 unless the client idled between
  // requests longer than they ran; one at a time could not exceed 1.
  EXPECT_GT(m.concurrency, 1.5);
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
      for (const RequestResult& r : run.results) {
        expect_chunk_timing(r, usage_in_every_chunk ? 2 : 1, 3);  // else one gap per chunk
        EXPECT_EQ(r.output_len, kOutputLen);
      }
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
        EXPECT_GE(r.ttft, kFirstChunkS + 6 * kChunkGapS);
        EXPECT_EQ(r.retokenized_len, 0);
      } else {
        expect_chunk_timing(r, 1, kOutputLen - 1);
        EXPECT_EQ(r.retokenized_len, kOutputLen);
      }
    }
    EXPECT_EQ(withheld, 2u);
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
  EXPECT_FALSE(run.results[1].ok());
  EXPECT_EQ(run.metrics.total_output, server.measured_tokens());
}

TEST(EndToEnd, WithoutStreamingTtftIsTheLatency) {
  FakeServer server(FakeServerConfig{});
  BenchOptions options = options_for(server, Backend::Sglang, 4);
  options.mix.stream_fraction = 0.0;
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
  EXPECT_FALSE(run.results[1].ok());
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
  config.stall_after_flush_s = 120.0;  // cut short when the server is destroyed
  FakeServer server(config);
  BenchOptions options = options_for(server, Backend::Mlaserve, 2);
  options.request_timeout_s = 0.3;
  const BenchmarkRun run = run_benchmark(options, stdout);
  EXPECT_EQ(run.metrics.failed, 2);
  EXPECT_EQ(run.metrics.first_error, "timed out after 0.3 s");
  // A run that waited for the server would take the whole stall; half of it leaves any load room.
  EXPECT_LT(run.metrics.duration_s, 60.0);
}

// A mix of streamed and whole requests against a slow fake server (one token per chunk, each
// request 0.93 s: an abort, at most 0.1 s after its first token, lands before the end), some
// closed mid-stream and some aborted: each ends as planned, counted apart from the failures, and
// the details file has every request with its outcome.
TEST(EndToEnd, DisconnectsAndAbortsAreCountedApart) {
  FakeServerConfig config;
  config.chunk_gap_s = 0.15;
  config.tokens_per_chunk = 1;
  FakeServer server(config);
  BenchOptions options = options_for(server, Backend::Mlaserve, 24);
  options.max_concurrency = 12;
  options.mix = {.stream_fraction = 0.5, .disconnect_fraction = 0.25, .abort_fraction = 0.25};
  const BenchmarkRun run = run_benchmark(options, stdout);
  const BenchmarkMetrics& m = run.metrics;
  int64_t disconnects = 0, aborts = 0, streams = 0;
  for (const RequestPlan& plan : run.plans) {
    disconnects += plan.disconnect_after > 0;
    aborts += plan.abort_delay_s.has_value();
    streams += plan.stream;
  }
  EXPECT_EQ(streams, 12);
  EXPECT_EQ(disconnects, 3);  // a quarter of the streams
  EXPECT_EQ(aborts, 5);       // a quarter of the other 21, rounded
  EXPECT_EQ(m.failed, 0) << m.first_error;
  EXPECT_EQ(m.cut, disconnects);
  EXPECT_EQ(m.aborted, aborts);
  EXPECT_EQ(m.completed, 24 - disconnects - aborts);
  EXPECT_EQ(server.aborts(), aborts);
  // The server sees a client gone at its next write, up to a chunk gap after the client left.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (server.streams_left_early() < disconnects && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(server.streams_left_early(), disconnects);
  for (size_t i = 0; i < run.plans.size(); ++i) {
    const RequestPlan& plan = run.plans[i];
    const RequestResult& r = run.results[i];
    if (plan.disconnect_after > 0) {  // closed once the planned tokens had arrived
      EXPECT_GE(r.output_len, plan.disconnect_after) << i;
      EXPECT_LT(r.output_len, kOutputLen) << i;
    } else if (r.ok()) {
      EXPECT_EQ(r.output_len, kOutputLen) << i;
      EXPECT_EQ(r.output_ids.size(), static_cast<size_t>(kOutputLen)) << i;
      EXPECT_EQ(r.itl.empty(), !plan.stream) << i;  // whole responses have no ITL
    } else {
      EXPECT_FALSE(plan.rid.empty()) << i;
      EXPECT_LT(r.output_len, kOutputLen) << i;
    }
  }
  const std::string table = format_table(run.options, m);
  EXPECT_NE(table.find(fmt::format("Disconnected requests (on purpose):      {}", disconnects)),
            std::string::npos)
      << table;
  EXPECT_NE(table.find(fmt::format("Aborted requests (on purpose):           {}", aborts)),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("Failed"), std::string::npos) << table;

  const testing::TempDir tmp;
  write_details((tmp / "details.jsonl").string(), run);
  const std::vector<nlohmann::json> lines = testing::read_jsonl(tmp / "details.jsonl");
  ASSERT_EQ(lines.size(), 24u);
  for (size_t i = 0; i < lines.size(); ++i) {
    const nlohmann::json& line = lines[i];
    EXPECT_EQ(line["index"], i);
    EXPECT_EQ(line["prompt"], run.requests[i].prompt);
    EXPECT_EQ(line["max_new_tokens"], kOutputLen);
    EXPECT_EQ(line["stream"], run.plans[i].stream);
    EXPECT_EQ(line["outcome"], outcome_name(run.results[i].outcome));
    EXPECT_EQ(line.contains("rid"), run.plans[i].abort_delay_s.has_value()) << line;
    EXPECT_EQ(line.contains("disconnect_after"), run.plans[i].disconnect_after > 0) << line;
    if (line["outcome"] == "ok") {
      EXPECT_EQ(line["output_ids"].size(), static_cast<size_t>(kOutputLen)) << line;
      EXPECT_EQ(line["text"], run.results[i].generated_text);
    }
  }
}

TEST(EndToEnd, AbortsNeedTheNativeApi) {
  FakeServer server(FakeServerConfig{});
  BenchOptions options = options_for(server, Backend::OpenAi, 2);
  options.mix.abort_fraction = 0.5;
  EXPECT_THROW(run_benchmark(options, stdout), Error);
}

TEST(EndToEnd, UnreachableServerNeedsATokenizer) {
  BenchOptions options;
  options.base_url = "http://127.0.0.1:1";  // nothing listens on port 1
  options.request_timeout_s = 2.0;
  try {
    run_benchmark(options, stdout);
    FAIL() << "ran against a server that is not there";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("cannot ask the server for its tokenizer"), std::string::npos)
        << message;
    EXPECT_NE(message.find("pass --tokenizer DIR"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace mlaserve::bench_serving
