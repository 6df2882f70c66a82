// A tour of the real `mlaserve serve` process (brown-tiny) through every endpoint, in float32 at
// a single rank and under tp 2 dp 2 DP attention, and with every default (bf16): answers checked
// for content (usage equal to the token counts, streams equal to the non-streamed answers,
// tokenize/detokenize round trips, greedy ids equal `eval`), each kind of client error answered in
// OpenAI's error shape with the server serving on, and a client that hangs up freeing its engine
// request and KV cache.
//
// One server per layout serves the whole suite (typed tests: a suite per layout, so a layout's
// server is stopped before the next one starts; ctest runs each layout's suite as one test). It
// requires an API key and takes small bodies, so the 401 and 413 cases need no server of their
// own.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <future>
#include <memory>
#include <thread>

#include "support/command.h"
#include "support/files.h"
#include "support/server_process.h"

namespace mlaserve::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kApiKey = "tour-secret";
constexpr size_t kMaxBodyBytes = 64 << 10;
constexpr int kContextLength = 2048;  // brown-tiny's max_position_embeddings
constexpr const char* kModelName = "brown-tiny";
constexpr const char* kPrompt = "The jury said that";

// kDtype is given to the server and to `eval`, whose greedy ids the server's must equal.
struct SingleRank {
  static constexpr const char* kName = "SingleRank";
  static constexpr const char* kFlags = "";
  static constexpr const char* kDtype = "float32";
  static constexpr int kTp = 1;
  static constexpr size_t kGroups = 1;
};

struct DpAttention {
  static constexpr const char* kName = "DpAttention";
  static constexpr const char* kFlags = "--tp 2 --dp 2 --enable-dp-attention";
  static constexpr const char* kDtype = "float32";
  static constexpr int kTp = 2;
  static constexpr size_t kGroups = 2;
};

// The server as a user starts it: every default, bf16 weights.
struct DefaultConfig {
  static constexpr const char* kName = "DefaultConfig";
  static constexpr const char* kFlags = "";
  static constexpr const char* kDtype = "bfloat16";
  static constexpr int kTp = 1;
  static constexpr size_t kGroups = 1;
};

// How much a counter grew between two /metrics texts (a labelled series appears at its first
// increment: absent counts as 0).
double counter_growth(const std::string& before, const std::string& after,
                      const std::string& series) {
  const auto value = [&](const std::string& metrics) {
    const double v = metric_value(metrics, series);
    return std::isnan(v) ? 0.0 : v;
  };
  return value(after) - value(before);
}

// The engine has no request running or waiting (its status is published after each step).
bool engine_idle(const json& status) {
  return status.value("running_requests", -1) == 0 && status.value("waiting_requests", -1) == 0;
}

// Waits until the engine is idle; its status then.
json idle_engine_status(const ServerApi& api) {
  json status;
  EXPECT_TRUE(wait_until(
      [&] {
        status = api.engine_status();
        return engine_idle(status);
      },
      5s))
      << status.dump();
  return status;
}

int64_t radix_cached_tokens(const json& status) {
  int64_t cached = 0;
  for (const json& group : status.value("load", json::array()))
    cached += group.value("radix_cached_tokens", int64_t{0});
  return cached;
}

// `body` as a greedy OpenAI request for exactly `max_tokens` tokens.
json greedy(json body, int max_tokens) {
  body["max_tokens"] = max_tokens;
  body["temperature"] = 0;
  body["ignore_eos"] = true;
  return body;
}

json greedy_generate_body(json prompt, int max_new_tokens) {
  prompt["sampling_params"] = {
      {"max_new_tokens", max_new_tokens}, {"temperature", 0}, {"ignore_eos", true}};
  return prompt;
}

json completion_body(int max_tokens) {
  return greedy({{"model", kModelName}, {"prompt", kPrompt}, {"logprobs", 0}}, max_tokens);
}

json chat_body(int max_tokens) {
  return greedy({{"model", kModelName},
                 {"messages", {{{"role", "user"}, {"content", "Tell me about the jury."}}}},
                 {"logprobs", true}},
                max_tokens);
}

// What differs between /v1/completions and /v1/chat/completions for the stream checks.
struct OpenAiEndpoint {
  std::string path;
  std::string object;        // of the whole answer
  std::string chunk_object;  // of each streamed event
  json body;                 // greedy, with logprobs (one entry per generated token)
  json tokenize_request;     // the /tokenize body that gives the prompt's tokens
  std::function<std::string(json choice)> text;        // of an answer's choice
  std::function<std::string(json choice)> chunk_text;  // of an event's choice
  std::function<size_t(json choice)> token_count;      // generated tokens in a choice
};

std::vector<OpenAiEndpoint> openai_endpoints(int max_tokens) {
  const json chat = chat_body(max_tokens);
  return {
      {"/v1/completions", "text_completion", "text_completion", completion_body(max_tokens),
       json{{"text", kPrompt}}, [](json choice) { return choice.value("text", std::string()); },
       [](json choice) { return choice.value("text", std::string()); },
       [](json choice) { return choice["logprobs"]["tokens"].size(); }},
      {"/v1/chat/completions", "chat.completion", "chat.completion.chunk", chat,
       json{{"messages", chat["messages"]}},
       [](json choice) { return choice["message"].value("content", std::string()); },
       [](json choice) { return choice["delta"].value("content", std::string()); },
       [](json choice) { return choice["logprobs"]["content"].size(); }},
  };
}

// OpenAI's error object with `status`, its message containing `names` (what went wrong).
void expect_openai_error(const httplib::Result& result, int status, const std::string& names) {
  ASSERT_TRUE(result) << "no response";
  EXPECT_EQ(result->status, status) << result->body;
  EXPECT_EQ(result->get_header_value("Content-Type"), "application/json");
  json body = json::parse(result->body, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(body.is_object() && body.contains("error")) << result->body;
  json& error = body["error"];
  ASSERT_TRUE(error["message"].is_string()) << result->body;
  EXPECT_NE(error["message"].get<std::string>().find(names), std::string::npos) << result->body;
  EXPECT_TRUE(error["type"].is_string()) << result->body;
  EXPECT_TRUE(error.contains("param")) << result->body;
  EXPECT_TRUE(error.contains("code")) << result->body;
}

// A small greedy completion, which must succeed after each error.
void expect_still_serving(const ServerApi& api) {
  json answer = api.post_json("/v1/completions", completion_body(2));
  EXPECT_EQ(answer["usage"]["completion_tokens"], 2) << answer.dump();
}

template <typename Layout>
class ServerTour : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    server_ = std::make_unique<ServerProcess>(std::string("--api-key ") + kApiKey +
                                              " --max-body-bytes " + std::to_string(kMaxBodyBytes) +
                                              " --dtype " + Layout::kDtype + " " + Layout::kFlags);
  }
  static void TearDownTestSuite() { server_.reset(); }

 protected:
  void SetUp() override { ASSERT_GT(port(), 0) << "the server did not start"; }

  static int port() { return server_->port(); }
  static ServerApi api(std::string api_key = kApiKey) { return ServerApi(port(), api_key); }

 private:
  static inline std::unique_ptr<ServerProcess> server_;
};

struct LayoutName {
  template <typename Layout>
  static std::string GetName(int) {
    return Layout::kName;
  }
};

using Layouts = ::testing::Types<SingleRank, DpAttention, DefaultConfig>;
TYPED_TEST_SUITE(ServerTour, Layouts, LayoutName);

TYPED_TEST(ServerTour, InfoEndpointsDescribeTheServer) {
  const ServerApi api = this->api();
  json models = api.get_json("/v1/models");
  EXPECT_EQ(models["object"], "list");
  ASSERT_EQ(models["data"].size(), 1u) << models.dump();
  EXPECT_EQ(models["data"][0]["id"], kModelName);
  EXPECT_EQ(models["data"][0]["max_model_len"], kContextLength);

  json model_info = api.get_json("/get_model_info");
  EXPECT_EQ(model_info["served_model_name"], kModelName);
  EXPECT_EQ(model_info["is_generation"], true);
  EXPECT_TRUE(model_info["model_path"].get<std::string>().ends_with(kModelName));

  json info = api.get_json("/get_server_info");
  EXPECT_EQ(info["api_key_required"], true);
  EXPECT_EQ(info["max_body_bytes"], kMaxBodyBytes);
  EXPECT_EQ(info["context_length"], kContextLength);
  EXPECT_EQ(info["port"], this->port());
  json& engine = info["engine"];
  EXPECT_EQ(engine["layout"]["tp"], TypeParam::kTp);
  EXPECT_EQ(engine["load"].size(), TypeParam::kGroups);
  EXPECT_GT(engine["max_total_num_tokens"].get<int64_t>(), kContextLength);

  json load = api.get_json("/get_load");
  ASSERT_EQ(load.size(), TypeParam::kGroups) << load.dump();
  for (size_t g = 0; g < TypeParam::kGroups; ++g) EXPECT_EQ(load[g]["dp_rank"], g);

  // The health checks need no key; /health_generate runs a token through the engine.
  const ServerApi keyless = this->api("");
  for (const char* path : {"/health", "/health_generate"}) {
    const httplib::Result health = keyless.get(path);
    ASSERT_TRUE(health) << path;
    EXPECT_EQ(health->status, 200) << path;
    EXPECT_EQ(health->body, "OK") << path;
  }
}

// /metrics counts the requests and tokens of a completion exactly, and reports the engine's
// capacity and each DP group's load.
TYPED_TEST(ServerTour, MetricsCountACompletion) {
  const ServerApi api = this->api();
  const int max_tokens = 5;
  const size_t prompt_tokens = api.tokenize({{"text", kPrompt}}).size();
  idle_engine_status(api);
  const std::string before = api.metrics();
  api.post_json("/v1/completions", completion_body(max_tokens));
  const std::string after = api.metrics();
  const auto growth = [&](const std::string& series) {
    return counter_growth(before, after, series);
  };
  EXPECT_EQ(growth("mlaserve_generation_tokens_total"), max_tokens) << after;
  EXPECT_EQ(growth("mlaserve_prompt_tokens_total"), static_cast<double>(prompt_tokens));
  EXPECT_EQ(growth(R"(mlaserve_http_requests_total{endpoint="/v1/completions",status="200"})"), 1);
  EXPECT_EQ(growth(R"(mlaserve_request_finished_total{reason="length"})"), 1);
  EXPECT_EQ(growth("mlaserve_time_to_first_token_seconds_count"), 1);
  EXPECT_EQ(growth("mlaserve_inter_token_latency_seconds_count"), max_tokens - 1);
  EXPECT_EQ(metric_value(after, "mlaserve_kv_cache_capacity_tokens"),
            api.engine_status()["max_total_num_tokens"].get<double>());
  for (size_t g = 0; g < TypeParam::kGroups; ++g) {
    const std::string group = "{dp_rank=\"" + std::to_string(g) + "\"}";
    EXPECT_GT(metric_value(after, "mlaserve_dp_kv_cache_capacity_tokens" + group), 0)
        << group << "\n"
        << after;
  }
}

// Non-streamed answers of both OpenAI endpoints: usage equals the prompt's tokens (by
// /tokenize) and the generated tokens (one logprob entry each). A stream of the same greedy
// request gives the same text in pieces, the same tokens, and the same usage in its last event.
TYPED_TEST(ServerTour, OpenAiStreamsEqualTheirNonStreamedAnswers) {
  const ServerApi api = this->api();
  const int max_tokens = 12;
  for (const OpenAiEndpoint& endpoint : openai_endpoints(max_tokens)) {
    SCOPED_TRACE(endpoint.path);
    json answer = api.post_json(endpoint.path, endpoint.body);
    EXPECT_EQ(answer["object"], endpoint.object);
    EXPECT_EQ(answer["model"], kModelName);
    ASSERT_EQ(answer["choices"].size(), 1u) << answer.dump();
    json& choice = answer["choices"][0];
    const std::string text = endpoint.text(choice);
    EXPECT_FALSE(text.empty()) << answer.dump();
    EXPECT_EQ(choice["finish_reason"], "length");
    json& usage = answer["usage"];
    EXPECT_EQ(usage["completion_tokens"], max_tokens);
    EXPECT_EQ(endpoint.token_count(choice), static_cast<size_t>(max_tokens));
    EXPECT_EQ(usage["prompt_tokens"], api.tokenize(endpoint.tokenize_request).size());
    EXPECT_EQ(usage["total_tokens"],
              usage["prompt_tokens"].get<int>() + usage["completion_tokens"].get<int>());

    json stream_body = endpoint.body;
    stream_body["stream_options"] = {{"include_usage", true}};
    EventStream stream = api.stream(endpoint.path, stream_body);
    EXPECT_EQ(stream.status, 200);
    EXPECT_TRUE(stream.done);
    // How the answer is cut depends on timing: each write sends what the engine made since the
    // last one, and a fast model can finish before the first. src/server/streaming_test.cpp
    // checks the cuts against a scripted engine; here the pieces must add up to the answer.
    ASSERT_GE(stream.events.size(), 2u) << "no usage event";
    std::string streamed_text;
    size_t streamed_tokens = 0;
    int finishes = 0;
    for (size_t i = 0; i + 1 < stream.events.size(); ++i) {
      json& event = stream.events[i];
      EXPECT_EQ(event["object"], endpoint.chunk_object);
      EXPECT_EQ(event["id"], stream.events[0]["id"]);
      EXPECT_TRUE(event.contains("usage") && event["usage"].is_null()) << event.dump();
      ASSERT_EQ(event["choices"].size(), 1u) << event.dump();
      json& chunk = event["choices"][0];
      streamed_text += endpoint.chunk_text(chunk);
      if (!chunk["logprobs"].is_null()) streamed_tokens += endpoint.token_count(chunk);
      if (!chunk["finish_reason"].is_null()) {
        ++finishes;
        EXPECT_EQ(chunk["finish_reason"], "length");
      }
    }
    EXPECT_EQ(finishes, 1);
    EXPECT_EQ(streamed_text, text);
    EXPECT_EQ(streamed_tokens, static_cast<size_t>(max_tokens));
    json& last = stream.events.back();
    EXPECT_EQ(last["object"], endpoint.chunk_object);
    EXPECT_TRUE(last["choices"].empty()) << last.dump();
    EXPECT_EQ(last["usage"]["prompt_tokens"], usage["prompt_tokens"]);
    EXPECT_EQ(last["usage"]["completion_tokens"], max_tokens);
    EXPECT_EQ(last["usage"]["total_tokens"], usage["total_tokens"]);
  }
}

// A stop string that spans two tokens (first seen there) ends the text just before it, streamed
// or not, with finish_reason "stop".
TYPED_TEST(ServerTour, StopStringAcrossTokensEndsTheTextStreamedOrNot) {
  const ServerApi api = this->api();
  json plain = api.post_json("/v1/completions", completion_body(12));
  ASSERT_EQ(plain["choices"].size(), 1u) << plain.dump();
  const std::string text = plain["choices"][0]["text"].get<std::string>();
  const std::vector<size_t> starts =
      plain["choices"][0]["logprobs"]["text_offset"].get<std::vector<size_t>>();
  std::string stop;  // the last character of a token and the first two of the next
  for (size_t t = 2; t + 1 < starts.size() && stop.empty(); ++t) {
    const size_t boundary = starts[t];
    if (starts[t + 1] < boundary + 2) continue;
    const std::string candidate = text.substr(boundary - 1, 3);
    if (text.find(candidate) == boundary - 1) stop = candidate;
  }
  ASSERT_FALSE(stop.empty()) << "no token boundary to stop at in " << plain.dump();
  const std::string expected = text.substr(0, text.find(stop));

  json body = completion_body(12);
  body["stop"] = {stop};
  json stopped = api.post_json("/v1/completions", body);
  json& choice = stopped["choices"][0];
  EXPECT_EQ(choice["text"], expected) << "stop " << json(stop);
  EXPECT_EQ(choice["finish_reason"], "stop");
  EXPECT_EQ(choice["matched_stop"], stop);
  EXPECT_LT(stopped["usage"]["completion_tokens"].get<int>(), 12);

  EventStream stream = api.stream("/v1/completions", body);
  EXPECT_TRUE(stream.done);
  std::string streamed;
  json finish_reasons = json::array();
  for (json& event : stream.events) {
    ASSERT_EQ(event["choices"].size(), 1u) << event.dump();
    streamed += event["choices"][0]["text"].get<std::string>();
    if (!event["choices"][0]["finish_reason"].is_null())
      finish_reasons.push_back(event["choices"][0]["finish_reason"]);
  }
  EXPECT_EQ(streamed, expected);
  EXPECT_EQ(finish_reasons, json::array({"stop"}));
}

TYPED_TEST(ServerTour, ChatStreamStartsWithTheAssistantRole) {
  EventStream stream = this->api().stream("/v1/chat/completions", chat_body(3));
  EXPECT_TRUE(stream.done);
  ASSERT_FALSE(stream.events.empty());
  EXPECT_EQ(stream.events[0]["choices"][0]["delta"]["role"], "assistant");
  // Without stream_options no event carries usage.
  for (const json& event : stream.events) EXPECT_FALSE(event.contains("usage")) << event.dump();
}

// /generate streams cumulative text and ids; its last event equals the non-streamed answer.
TYPED_TEST(ServerTour, GenerateStreamEndsWithTheNonStreamedAnswer) {
  const ServerApi api = this->api();
  const int max_new = 10;
  const json body = greedy_generate_body({{"text", kPrompt}}, max_new);
  json answer = api.post_json("/generate", body);
  ASSERT_EQ(answer["output_ids"].size(), static_cast<size_t>(max_new)) << answer.dump();
  json& meta = answer["meta_info"];
  EXPECT_EQ(meta["prompt_tokens"], api.tokenize({{"text", kPrompt}}).size());
  EXPECT_EQ(meta["completion_tokens"], max_new);
  EXPECT_EQ(meta["finish_reason"]["type"], "length");
  EXPECT_EQ(meta["finish_reason"]["length"], max_new);
  EXPECT_EQ(answer["text"], api.detokenize(answer["output_ids"].get<std::vector<int>>(),
                                           /*skip_special_tokens=*/true));

  EventStream stream = api.stream("/generate", body);
  EXPECT_EQ(stream.status, 200);
  EXPECT_TRUE(stream.done);
  ASSERT_FALSE(stream.events.empty());  // one event or more, as the timing cuts the answer
  std::string previous;
  for (const json& event : stream.events) {
    const std::string text = event.value("text", std::string());
    EXPECT_EQ(text.rfind(previous, 0), 0u) << "not cumulative: " << event.dump();
    previous = text;
  }
  json& last = stream.events.back();
  EXPECT_EQ(last["text"], answer["text"]);
  EXPECT_EQ(last["output_ids"], answer["output_ids"]);
  EXPECT_EQ(last["meta_info"]["finish_reason"], meta["finish_reason"]);
}

TYPED_TEST(ServerTour, TokenizeAndDetokenizeRoundTrip) {
  const ServerApi api = this->api();
  const std::string text =
      "The jury's report, on 12 May: \"no evidence\" \xE2\x80\x94 caf\xC3\xA9 \xF0\x9F\x98\x80.";
  json tokenized = api.post_json("/tokenize", {{"text", text}, {"add_special_tokens", false}});
  const std::vector<int> ids = tokenized["tokens"].get<std::vector<int>>();
  EXPECT_EQ(tokenized["count"], ids.size());
  EXPECT_EQ(tokenized["max_model_len"], kContextLength);
  EXPECT_GT(ids.size(), 10u);
  EXPECT_EQ(api.detokenize(ids, /*skip_special_tokens=*/false), text);
  // With special tokens the BOS comes first; detokenize keeps or skips it on request.
  const std::vector<int> with_bos = api.tokenize({{"text", text}});
  ASSERT_EQ(with_bos.size(), ids.size() + 1);
  EXPECT_EQ(std::vector<int>(with_bos.begin() + 1, with_bos.end()), ids);
  EXPECT_EQ(api.detokenize(with_bos, /*skip_special_tokens=*/true), text);
  EXPECT_NE(api.detokenize(with_bos, /*skip_special_tokens=*/false), text);
}

// /v1/completions with token-id prompts (two in one request) gives the greedy tokens `eval`
// gives: the same text and, token by token, the same strings in its logprobs. /generate on the
// same prompts gives the same ids.
TYPED_TEST(ServerTour, GreedyCompletionEqualsEval) {
  const ServerApi api = this->api();
  const int max_new = 16;
  const std::vector<std::vector<int>> prompts = {
      {0, 476, 1610, 278, 263},  // "The government of the"
      api.tokenize({{"text", "It was the first time that the county had"}})};
  TempDir tmp;
  json eval_input = {{"prompts", json::array()}};
  for (const auto& ids : prompts) eval_input["prompts"].push_back({{"ids", ids}});
  json eval = run_eval("models/brown-tiny", eval_input, std::string("--dtype ") + TypeParam::kDtype,
                       tmp, max_new);
  ASSERT_EQ(eval["prompts"].size(), prompts.size()) << eval.dump();

  json answer =
      api.post_json("/v1/completions", greedy({{"prompt", prompts}, {"logprobs", 0}}, max_new));
  ASSERT_EQ(answer["choices"].size(), prompts.size()) << answer.dump();
  for (size_t p = 0; p < prompts.size(); ++p) {
    SCOPED_TRACE("prompt " + std::to_string(p));
    const std::vector<int> expected = eval["prompts"][p]["greedy"].get<std::vector<int>>();
    ASSERT_EQ(expected.size(), static_cast<size_t>(max_new));
    json& choice = answer["choices"][p];
    EXPECT_EQ(choice["index"], p);
    EXPECT_EQ(choice["text"], api.detokenize(expected, /*skip_special_tokens=*/true));
    // Each token's string is its vocabulary entry (a piece that is not whole UTF-8 shows as
    // "bytes:\x..", and detokenizes alone to U+FFFD).
    json& tokens = choice["logprobs"]["tokens"];
    ASSERT_EQ(tokens.size(), expected.size());
    for (size_t t = 0; t < expected.size(); ++t) {
      const std::string piece = api.detokenize({expected[t]}, /*skip_special_tokens=*/false);
      if (piece.find("\xEF\xBF\xBD") != std::string::npos) {
        EXPECT_EQ(tokens[t].get<std::string>().rfind("bytes:", 0), 0u) << t;
      } else {
        EXPECT_EQ(tokens[t], piece) << "token " << t << " (id " << expected[t] << ")";
      }
    }
    json native =
        api.post_json("/generate", greedy_generate_body({{"input_ids", prompts[p]}}, max_new));
    EXPECT_EQ(native["output_ids"].get<std::vector<int>>(), expected);
  }
}

// Finished requests leave their prompts in the radix cache; /flush_cache empties it.
TYPED_TEST(ServerTour, FlushCacheEmptiesTheRadixCache) {
  const ServerApi api = this->api();
  api.post_json("/v1/completions", completion_body(4));
  EXPECT_GT(radix_cached_tokens(idle_engine_status(api)), 0);
  const httplib::Result flushed = api.post("/flush_cache", "{}");
  ASSERT_TRUE(flushed);
  EXPECT_EQ(flushed->status, 200) << flushed->body;
  EXPECT_EQ(flushed->body, "Cache flushed.\n");
  EXPECT_EQ(radix_cached_tokens(idle_engine_status(api)), 0);
}

// A greedy request for nearly the whole context: it runs until something ends it.
constexpr int kLongMaxTokens = kContextLength - 64;

// Runs `cut_off` (one long request that something ends early) on an idle engine and expects
// that the engine stopped generating for it short of its max_new_tokens and is idle again within
// 5 s, with the KV slots in use back where they were; the server counts it as aborted.
void expect_cut_off_request_is_freed(const ServerApi& api, const std::function<void()>& cut_off) {
  const json before = idle_engine_status(api);
  const int64_t kv_before = before["kv_used_tokens"].get<int64_t>();
  const std::string metrics_before = api.metrics();
  cut_off();
  json status;
  EXPECT_TRUE(wait_until(
      [&] {
        status = api.engine_status();
        return engine_idle(status) && status["kv_used_tokens"] == kv_before;
      },
      5s))
      << "kv_used_tokens before: " << kv_before << ", now " << status.dump();
  const int64_t generated = status["generation_tokens_total"].get<int64_t>() -
                            before["generation_tokens_total"].get<int64_t>();
  EXPECT_LT(generated, kLongMaxTokens) << "the engine generated the whole request";
  const std::string metrics_after = api.metrics();
  // A one-token request is a barrier: a request still generating would add tokens in
  // the barrier's steps too. The status is published after each step, so wait for its token.
  const int64_t tokens_before = status["generation_tokens_total"].get<int64_t>();
  api.post_json("/generate", greedy_generate_body({{"text", kPrompt}}, 1));
  EXPECT_TRUE(wait_until(
      [&] {
        status = api.engine_status();
        return engine_idle(status) && status["generation_tokens_total"] != tokens_before;
      },
      30s))
      << status.dump();
  EXPECT_EQ(status["generation_tokens_total"], tokens_before + 1) << "still generating";
  const auto finished = [&](const std::string& reason) {
    return counter_growth(metrics_before, metrics_after,
                          "mlaserve_request_finished_total{reason=\"" + reason + "\"}");
  };
  EXPECT_EQ(finished("abort"), 1);
  EXPECT_EQ(finished("length"), 0);
}

TYPED_TEST(ServerTour, AbortRequestEndsARunningGeneration) {
  const ServerApi api = this->api();
  const std::string rid = "tour-abort";
  expect_cut_off_request_is_freed(api, [&] {
    json body = greedy_generate_body({{"text", kPrompt}}, kLongMaxTokens);
    body["rid"] = rid;
    auto generation =
        std::async(std::launch::async, [&] { return api.post("/generate", body.dump()); });
    EXPECT_TRUE(
        wait_until([&] { return api.engine_status().value("running_requests", 0) == 1; }, 10s));
    expect_openai_error(api.post("/flush_cache", "{}"), 400, "requests are running");
    json aborted = api.post_json("/abort_request", {{"rid", rid}});
    EXPECT_EQ(aborted["aborted"], 1);
    ASSERT_EQ(generation.wait_for(5s), std::future_status::ready) << "the abort did not end it";
    const httplib::Result result = generation.get();
    ASSERT_TRUE(result);
    EXPECT_EQ(result->status, 200) << result->body;
    json answer = json::parse(result->body, nullptr, /*allow_exceptions=*/false);
    EXPECT_EQ(answer["meta_info"]["id"], rid);
    EXPECT_EQ(answer["meta_info"]["finish_reason"]["type"], "abort") << result->body;
    EXPECT_LT(answer["meta_info"]["completion_tokens"].get<int>(), kLongMaxTokens);
  });
  // The id is gone: aborting it again is a 404 that names it.
  expect_openai_error(api.post("/abort_request", json{{"rid", rid}}.dump()), 404, rid);
}

// A client that hangs up a stream after a few events gets its engine request aborted.
TYPED_TEST(ServerTour, ClientLeavingAStreamFreesItsEngineRequest) {
  const ServerApi api = this->api();
  expect_cut_off_request_is_freed(api, [&] {
    const int64_t kv_before = api.engine_status()["kv_used_tokens"].get<int64_t>();
    httplib::Request request;
    request.method = "POST";
    request.path = "/v1/completions";
    request.set_header("Content-Type", "application/json");
    json body = greedy({{"prompt", kPrompt}, {"stream", true}}, kLongMaxTokens);
    request.body = body.dump();
    int chunks = 0;
    json during;  // the engine's status while the stream is open
    request.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
      if (++chunks < 3) return true;
      during = api.engine_status();
      return false;  // hang up
    };
    EXPECT_FALSE(api.client().send(request)) << "the stream was not cut";
    EXPECT_EQ(chunks, 3);
    EXPECT_EQ(during["running_requests"], 1) << during.dump();
    EXPECT_GT(during["kv_used_tokens"].get<int64_t>(), kv_before) << during.dump();
  });
}

// So does a client that stops waiting for a non-streamed answer.
TYPED_TEST(ServerTour, ClientGivingUpOnAnAnswerFreesItsEngineRequest) {
  const ServerApi api = this->api();
  expect_cut_off_request_is_freed(api, [&] {
    httplib::Client impatient = api.client();
    impatient.set_read_timeout(0, 200'000);
    EXPECT_FALSE(impatient.Post("/v1/completions",
                                greedy({{"prompt", kPrompt}}, kLongMaxTokens).dump(),
                                "application/json"))
        << "answered within 200 ms";
  });
}

struct ErrorCase {
  std::string what;
  std::string path;
  std::string body;  // empty: GET
  int status;
  std::string message_names;  // a part of the error message that names the problem
  std::string api_key = kApiKey;
};

std::vector<ErrorCase> error_cases() {
  json unknown_model_chat = chat_body(1);
  unknown_model_chat["model"] = "gpt-4";
  const std::vector<int> too_long(kContextLength + 1, 300);
  const std::string over_limit = json{{"prompt", std::string(kMaxBodyBytes, 'a')}}.dump();
  return {
      {"malformed JSON", "/v1/completions", R"({"prompt": )", 400, "not valid JSON"},
      {"not an object", "/generate", "[1, 2]", 400, "must be a JSON object"},
      {"wrong type", "/v1/completions", R"({"prompt": "Hi", "max_tokens": "ten"})", 400,
       "'max_tokens' must be an integer, got \"ten\""},
      {"wrong type", "/generate", R"({"text": "Hi", "sampling_params": {"temperature": "hot"}})",
       400, "'temperature' must be a number, got \"hot\""},
      {"unknown model", "/v1/completions", R"({"model": "gpt-4", "prompt": "Hi"})", 404,
       "The model 'gpt-4' does not exist"},
      {"unknown model", "/v1/chat/completions", unknown_model_chat.dump(), 404, "'gpt-4'"},
      {"negative max_tokens", "/v1/completions", R"({"prompt": "Hi", "max_tokens": -5})", 400,
       "'max_tokens' must be at least 1, got -5"},
      {"negative max_new_tokens", "/generate",
       R"({"text": "Hi", "sampling_params": {"max_new_tokens": -1}})", 400,
       "'max_new_tokens' must be at least 1"},
      {"temperature < 0", "/v1/completions", R"({"prompt": "Hi", "temperature": -0.5})", 400,
       "temperature"},
      {"top_p 0", "/v1/completions", R"({"prompt": "Hi", "top_p": 0})", 400, "top_p"},
      {"top_p > 1", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "Hi"}], "top_p": 1.5})", 400, "top_p"},
      {"prompt longer than the context", "/v1/completions", json{{"prompt", too_long}}.dump(), 400,
       "maximum context length is 2048 tokens"},
      {"prompt plus max_tokens over the context", "/v1/completions",
       R"({"prompt": "Hi", "max_tokens": 4000})", 400, "maximum context length is 2048 tokens"},
      {"empty messages", "/v1/chat/completions", R"({"messages": []})", 400,
       "'messages' must be a non-empty list"},
      {"invalid UTF-8", "/v1/completions", "{\"prompt\": \"caf\xC3(\"}", 400, "UTF-8"},
      {"invalid UTF-8", "/tokenize", "{\"text\": \"\xFF\xFE\"}", 400, "UTF-8"},
      {"body over the limit", "/v1/completions", over_limit, 413,
       "larger than the limit of " + std::to_string(kMaxBodyBytes) + " bytes"},
      {"wrong API key", "/v1/completions", completion_body(1).dump(), 401, "invalid API key",
       "not-the-key"},
      {"no API key", "/get_server_info", "", 401, "invalid API key", ""},
  };
}

TYPED_TEST(ServerTour, ErrorsAreOpenAiErrorsAndTheServerServesOn) {
  for (const ErrorCase& error : error_cases()) {
    SCOPED_TRACE(error.what + " on " + error.path);
    const ServerApi api = this->api(error.api_key);
    expect_openai_error(error.body.empty() ? api.get(error.path) : api.post(error.path, error.body),
                        error.status, error.message_names);
    expect_still_serving(this->api());
  }
}

}  // namespace
}  // namespace mlaserve::testing
