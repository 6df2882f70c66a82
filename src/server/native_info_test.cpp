// Health, info, cache, abort, tokenization and metrics routes.
#include <gmock/gmock.h>
#include <unistd.h>

#include <optional>
#include <thread>

#include "server/server_test_util.h"

namespace mlaserve::server::testing {
namespace {

using ::testing::HasSubstr;

class NativeInfoTest : public ServerTest {};

TEST_F(NativeInfoTest, HealthAnswersOk) {
  const httplib::Result result = get("/health");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  EXPECT_EQ(result->body, "OK");
}

TEST_F(NativeInfoTest, HealthGenerateRunsOneGreedyToken) {
  const httplib::Result result = get("/health_generate");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  ASSERT_EQ(engine().submitted().size(), 1u);
  EXPECT_EQ(engine().submitted()[0].max_new_tokens, 1);
  EXPECT_EQ(engine().submitted()[0].sampling.temperature, 0.0f);
}

TEST_F(NativeInfoTest, HealthGenerateFailsWhenTheEngineDoes) {
  engine().fail_prompts_containing(*tokenizer().bos_id());
  const httplib::Result result = get("/health_generate");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 503);
  EXPECT_THAT(result->body, HasSubstr("fake engine failure"));
}

TEST_F(NativeInfoTest, ModelInfo) {
  const httplib::Result result = get("/get_model_info");
  ASSERT_TRUE(result);
  const nlohmann::json body = nlohmann::json::parse(result->body);
  EXPECT_EQ(body["model_path"], kModelPath);
  EXPECT_EQ(body["tokenizer_path"], "tests/data/brown-tiny-tokenizer");
  EXPECT_EQ(body["is_generation"], true);
}

TEST_F(NativeInfoTest, ServerInfoHasOptionsAndEngineStatus) {
  const nlohmann::json body = nlohmann::json::parse(get("/get_server_info")->body);
  EXPECT_EQ(body["host"], "127.0.0.1");
  EXPECT_GT(body["port"].get<int>(), 0);
  EXPECT_EQ(body["served_model_name"], kModelName);
  EXPECT_EQ(body["context_length"], 256);
  EXPECT_EQ(body["api_key_required"], false);
  EXPECT_FALSE(body.contains("api_key"));
  EXPECT_EQ(body["pid"], getpid());  // the server runs in this test's process
  EXPECT_EQ(body["engine"]["max_total_num_tokens"], 4096);
}

TEST_F(NativeInfoTest, LoadComesFromTheEngine) {
  const nlohmann::json body = nlohmann::json::parse(get("/get_load")->body);
  ASSERT_TRUE(body.is_array());
  EXPECT_EQ(body[0]["dp_rank"], 0);
  EXPECT_EQ(body[0]["running_requests"], 0);
}

TEST_F(NativeInfoTest, FlushCache) {
  const httplib::Result flushed = post("/flush_cache", std::string());
  ASSERT_TRUE(flushed);
  EXPECT_EQ(flushed->status, 200);
  EXPECT_EQ(engine().flush_calls(), 1);
  engine().set_flush_result(false);
  const httplib::Result refused = post("/flush_cache", std::string());
  EXPECT_EQ(refused->status, 400);
  EXPECT_THAT(refused->body, HasSubstr("requests are running"));
}

TEST_F(NativeInfoTest, TokenizeAndDetokenize) {
  const nlohmann::json tokens = post_json("/tokenize", {{"text", "Hello there"}});
  const std::vector<int32_t> expected = tokenizer().encode("Hello there", true);
  EXPECT_EQ(tokens["tokens"], expected);
  EXPECT_EQ(tokens["count"], expected.size());
  EXPECT_EQ(tokens["max_model_len"], 256);
  const nlohmann::json plain =
      post_json("/tokenize", {{"prompt", "Hello there"}, {"add_special_tokens", false}});
  EXPECT_EQ(plain["tokens"], tokenizer().encode("Hello there", false));
  const nlohmann::json text = post_json("/detokenize", {{"tokens", expected}});
  EXPECT_EQ(text["text"], tokenizer().decode(expected, false));
  const nlohmann::json chat =
      post_json("/tokenize", {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}});
  EXPECT_EQ(chat["tokens"], tokenizer().encode(tokenizer().apply_chat_template(
                                                   {{{"role", "user"}, {"content", "Hi"}}}, true),
                                               false));
}

// A stream that the fake engine would run for ever until /abort_request ends it.
TEST_F(NativeInfoTest, AbortRequestEndsARunningStream) {
  FakeEngine::Options slow;
  slow.step_interval = std::chrono::milliseconds(5);
  slow.context_length = 100000;
  start({}, slow);
  std::optional<httplib::Result> streamed;
  std::thread client([&] {
    streamed.emplace(
        post("/generate", nlohmann::json{{"text", "Hello"},
                                         {"rid", "long-one"},
                                         {"stream", true},
                                         {"sampling_params", {{"max_new_tokens", 90000}}}}));
  });
  // Not ASSERT: the client thread must be joined; without a submission it times out by itself.
  EXPECT_TRUE(engine().wait_for_submitted(1, std::chrono::seconds(30)))
      << "the stream never reached the engine";
  const nlohmann::json aborted = post_json("/abort_request", {{"rid", "long-one"}});
  EXPECT_EQ(aborted["aborted"], 1);
  client.join();
  ASSERT_TRUE(streamed && *streamed);
  const std::vector<nlohmann::json> events = sse_json_events((*streamed)->body);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["meta_info"]["finish_reason"]["type"], "abort");
  EXPECT_EQ(engine().aborted(), std::vector<uint64_t>{1});

  const httplib::Result unknown = post("/abort_request", nlohmann::json{{"rid", "long-one"}});
  EXPECT_EQ(unknown->status, 404);
}

TEST_F(NativeInfoTest, MetricsCountRequestsTokensAndLatencies) {
  script({id_of("Ġthe"), id_of("re")});
  post_json("/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 2}});
  post_json("/v1/completions", {{"prompt", ""}}, 400);
  const httplib::Result result = get("/metrics");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  const std::string& text = result->body;
  EXPECT_THAT(text, HasSubstr("# TYPE mlaserve_http_requests_total counter\n"));
  EXPECT_THAT(text,
              HasSubstr("mlaserve_http_requests_total{endpoint=\"/v1/completions\",status=\"200\"} "
                        "1\n"));
  EXPECT_THAT(text,
              HasSubstr("mlaserve_http_requests_total{endpoint=\"/v1/completions\",status=\"400\"} "
                        "1\n"));
  EXPECT_THAT(text, HasSubstr("mlaserve_prompt_tokens_total " +
                              std::to_string(tokenizer().encode("Hello", true).size()) + "\n"));
  EXPECT_THAT(text, HasSubstr("mlaserve_generation_tokens_total 2\n"));
  EXPECT_THAT(text, HasSubstr("mlaserve_time_to_first_token_seconds_count 1\n"));
  EXPECT_THAT(text, HasSubstr("mlaserve_time_to_first_token_seconds_bucket{le=\"+Inf\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("mlaserve_inter_token_latency_seconds_count 1\n"));
  EXPECT_THAT(text, HasSubstr("mlaserve_request_finished_total{reason=\"length\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("mlaserve_num_requests_running 0\n"));
  EXPECT_THAT(text, HasSubstr("mlaserve_kv_cache_capacity_tokens 4096\n"));
  EXPECT_THAT(text, HasSubstr("mlaserve_kv_cache_usage_ratio 0\n"));
  EXPECT_THAT(text, HasSubstr("mlaserve_dp_kv_cache_capacity_tokens{dp_rank=\"0\"} 4096\n"));
  EXPECT_THAT(text, HasSubstr("mlaserve_dp_running_requests{dp_rank=\"0\"} 0\n"));
}

TEST_F(NativeInfoTest, UnknownPathsAreCountedAsUnmatched) {
  get("/no/such/path");
  EXPECT_THAT(get("/metrics")->body,
              HasSubstr("mlaserve_http_requests_total{endpoint=\"unmatched\",status=\"404\"} 1\n"));
}

}  // namespace
}  // namespace mlaserve::server::testing
