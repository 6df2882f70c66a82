// The bench-serving command against a fake server (its table and JSONL record, token totals
// equal to what the server generated, also when it streams as llama.cpp's llama-server does),
// and bench-serving against the real `mlaserve serve` (brown-tiny, on a free port): 50 requests
// all succeed, the table has every line, and the JSONL record's token totals equal the server's
// own counters (/metrics), which also confirms that each prompt has exactly its token count on
// the server's side.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_serving/report.h"
#include "bench_serving/runner.h"
#include "support/command.h"
#include "support/fake_server.h"
#include "support/files.h"
#include "support/server_process.h"
#include "support/serving_table.h"

namespace mlaserve::bench_serving {
namespace {

using testing::FakeServer;
using testing::FakeServerConfig;
using testing::mlaserve_bin;
using testing::read_jsonl;
using testing::run_command;
using testing::TempDir;

// Runs the bench-serving command against `server` with `flags`, its JSONL record to `jsonl`;
// its output, checked for a clean exit and the whole table.
std::string run_bench_serving(const FakeServer& server, const std::string& flags,
                              const std::filesystem::path& jsonl) {
  const testing::CommandResult result =
      run_command(fmt::format("{} bench-serving --base-url {} {} --output-file {}", mlaserve_bin(),
                              server.url(), flags, jsonl.string()));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  testing::expect_full_table(result.output);
  return result.output;
}

TEST(EndToEnd, CommandPrintsTheTableAndAppendsJsonl) {
  FakeServer server(FakeServerConfig{});
  const TempDir tmp;
  const std::string output = run_bench_serving(
      server,
      "--backend sglang --dataset random --num-prompts 20 --random-input-len 16 "
      "--random-output-len 7 --random-range-ratio 1 --request-rate 100 --max-concurrency 5 "
      "--seed 3 --tokenizer models/brown-tiny",
      tmp / "result.jsonl");
  for (const char* line :
       {"Max request concurrency:                 5", "Successful requests:                     20",
        "Total input tokens:                      320",
        "Total generated tokens:                  140"}) {
    EXPECT_NE(output.find(line), std::string::npos) << line << " missing in\n" << output;
  }
  const std::vector<nlohmann::json> records = read_jsonl(tmp / "result.jsonl");
  ASSERT_EQ(records.size(), 1u) << output;  // one record per run
  const nlohmann::json& record = records[0];
  EXPECT_EQ(record["completed"], 20);
  EXPECT_EQ(record["total_output_tokens"].get<int64_t>(), server.measured_tokens());
  EXPECT_EQ(record["total_output_tokens_retokenized"].get<int64_t>(), server.measured_tokens());
  EXPECT_EQ(record["total_input_tokens"], 320);
  EXPECT_EQ(record["request_rate"], 100.0);
  EXPECT_EQ(record["backend"], "sglang");
}

// The command against a server that streams as llama-server does, with an explicit tokenizer
// (llama-server has no /get_model_info), through both OpenAI backends.
TEST(EndToEnd, CommandAgainstALlamaServerLikeServer) {
  for (const char* backend : {"openai", "openai-chat"}) {
    FakeServerConfig config;
    config.llama_server_chunks = true;
    config.tokens_per_chunk = 1;
    config.withhold_text_every = 5;  // requests 4 and 9 of 0..12
    FakeServer server(config);
    const TempDir tmp;
    const std::string output = run_bench_serving(
        server,
        fmt::format("--backend {} --tokenizer models/brown-tiny --dataset random --num-prompts 12 "
                    "--random-input-len 16 --random-output-len 7 --random-range-ratio 1 "
                    "--max-concurrency 2 --seed 1",
                    backend),
        tmp / "result.jsonl");
    for (const std::string& line :
         {fmt::format("Backend:                                 {}", backend),
          std::string("Successful requests:                     12"),
          std::string("Total generated tokens:                  84")}) {
      EXPECT_NE(output.find(line), std::string::npos) << line << " missing in\n" << output;
    }
    EXPECT_EQ(output.find("failed"), std::string::npos) << output;
    const std::vector<nlohmann::json> records = read_jsonl(tmp / "result.jsonl");
    ASSERT_EQ(records.size(), 1u) << output;
    const nlohmann::json& record = records[0];
    EXPECT_EQ(record["completed"], 12);
    EXPECT_EQ(record["failed"], 0);
    EXPECT_EQ(record["total_output_tokens"].get<int64_t>(), server.measured_tokens());
    // Two requests streamed no text: their 14 tokens are not retokenized.
    EXPECT_EQ(record["total_output_tokens_retokenized"].get<int64_t>(), 84 - 14);
    EXPECT_TRUE(server.problems().empty()) << server.problems().front();
  }
}

// A counter from the Prometheus text of GET /metrics.
int64_t counter(const testing::ServerApi& api, const std::string& name) {
  const double value = testing::metric_value(api.metrics(), name);
  if (std::isnan(value)) {
    ADD_FAILURE() << name << " not in /metrics";
    return -1;
  }
  return static_cast<int64_t>(value);
}

TEST(MlaserveServe, FiftyRequestsMatchTheServersCounters) {
  const TempDir tmp;
  const testing::ServerProcess serve(
      testing::ServerCommand{mlaserve_bin() + " serve --model models/brown-tiny --port 0"},
      /*wait_seconds=*/180);
  ASSERT_GT(serve.port(), 0);
  const std::string url = "http://127.0.0.1:" + std::to_string(serve.port());

  const testing::ServerApi api(serve.port());
  const int64_t prompt_before = counter(api, "mlaserve_prompt_tokens_total");
  const int64_t generated_before = counter(api, "mlaserve_generation_tokens_total");
  BenchOptions options;
  options.base_url = url;
  options.dataset.num_prompts = 50;
  options.dataset.input_len = 128;
  options.dataset.output_len = 32;
  options.dataset.range_ratio = 1.0;  // so the warm-up request is 128 + 32 tokens too
  options.max_concurrency = 8;
  options.progress = false;
  const BenchmarkRun run = run_benchmark(options, stdout);
  const std::string table = format_table(run.options, run.metrics);
  std::fputs(table.c_str(), stdout);
  testing::expect_full_table(table);
  EXPECT_EQ(run.metrics.completed, 50);
  EXPECT_EQ(run.metrics.failed, 0) << run.metrics.first_error;

  append_jsonl((tmp / "result.jsonl").string(), result_record(run.options, run.metrics));
  const std::vector<nlohmann::json> records = read_jsonl(tmp / "result.jsonl");
  ASSERT_EQ(records.size(), 1u);
  const nlohmann::json& record = records[0];
  const int64_t generated = counter(api, "mlaserve_generation_tokens_total") - generated_before;
  const int64_t prompt = counter(api, "mlaserve_prompt_tokens_total") - prompt_before;
  constexpr int64_t kWarmUpOutput = 32, kWarmUpPrompt = 128 + 1, kBos = 1;
  EXPECT_EQ(record["total_output_tokens"].get<int64_t>(), generated - kWarmUpOutput);
  EXPECT_EQ(record["total_output_tokens"].get<int64_t>(), 50 * 32);
  EXPECT_EQ(record["total_input_tokens"].get<int64_t>() + 50 * kBos, prompt - kWarmUpPrompt);
  EXPECT_EQ(record["total_input_tokens"].get<int64_t>(), 50 * 128);
  EXPECT_EQ(record["completed"], 50);
}

// Against a server that speculates: the table reports SGLang's accept length, generated tokens
// per verify step of the requests, between 1 and the draft tokens per step + 1.
TEST(MlaserveServe, SpeculationShowsTheAcceptLength) {
  const testing::ServerProcess serve(
      testing::ServerCommand{mlaserve_bin() +
                             " serve --model models/brown-tiny-mtp --port 0 "
                             "--speculative-algorithm NEXTN --speculative-num-steps 2"},
      /*wait_seconds=*/180);
  ASSERT_GT(serve.port(), 0);
  BenchOptions options;
  options.base_url = "http://127.0.0.1:" + std::to_string(serve.port());
  options.dataset.num_prompts = 16;
  options.dataset.input_len = 32;
  options.dataset.output_len = 32;
  options.dataset.range_ratio = 1.0;
  options.max_concurrency = 4;
  options.progress = false;
  const BenchmarkRun run = run_benchmark(options, stdout);
  const std::string table = format_table(run.options, run.metrics);
  std::fputs(table.c_str(), stdout);
  EXPECT_EQ(run.metrics.failed, 0) << run.metrics.first_error;
  EXPECT_GT(run.metrics.accept_length, 1.0);
  EXPECT_LE(run.metrics.accept_length, 3.0);
  EXPECT_NE(table.find("Accept length:"), std::string::npos) << table;
}

}  // namespace
}  // namespace mlaserve::bench_serving
