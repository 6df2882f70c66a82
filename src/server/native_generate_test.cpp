// POST /generate (SGLang's native API) against the fake engine.
#include <gmock/gmock.h>

#include "server/server_test_util.h"

namespace mlaserve::server::testing {
namespace {

using ::testing::ElementsAre;

class GenerateTest : public ServerTest {};

TEST_F(GenerateTest, TextGetsTextIdsAndMetaInfo) {
  script({id_of("Ġthe"), id_of("re"), id_of("Ġa")});
  const nlohmann::json body =
      post_json("/generate", {{"text", "Hello"}, {"sampling_params", {{"max_new_tokens", 3}}}});
  EXPECT_EQ(body["text"], " there a");
  EXPECT_EQ(body["output_ids"], nlohmann::json({id_of("Ġthe"), id_of("re"), id_of("Ġa")}));
  const nlohmann::json& meta = body["meta_info"];
  EXPECT_EQ(meta["id"].get<std::string>().size(), 32u);
  EXPECT_EQ(meta["prompt_tokens"], tokenizer().encode("Hello", true).size());
  EXPECT_EQ(meta["completion_tokens"], 3);
  EXPECT_EQ(meta["cached_tokens"], 0);
  EXPECT_EQ(meta["finish_reason"], nlohmann::json({{"type", "length"}, {"length", 3}}));
  EXPECT_GE(meta["e2e_latency"].get<double>(), 0.0);
  EXPECT_EQ(engine().submitted()[0].prompt, tokenizer().encode("Hello", true));
}

TEST_F(GenerateTest, DefaultMaxNewTokensIs128) {
  post_json("/generate", {{"text", "Hello"}, {"sampling_params", {{"max_new_tokens", nullptr}}}});
  EXPECT_EQ(engine().submitted()[0].max_new_tokens, 128);
}

TEST_F(GenerateTest, SamplingParamsReachTheEngine) {
  post_json("/generate", {{"input_ids", {10, 11}},
                          {"rid", "my-request"},
                          {"sampling_params",
                           {{"max_new_tokens", 2},
                            {"temperature", 0},
                            {"top_k", 5},
                            {"stop_token_ids", {7}},
                            {"ignore_eos", true}}}});
  const sched::GenerationRequest request = engine().submitted()[0];
  EXPECT_THAT(request.prompt, ElementsAre(10, 11));
  EXPECT_EQ(request.sampling.temperature, 0.0f);
  EXPECT_EQ(request.sampling.top_k, 5);
  EXPECT_THAT(request.stop_token_ids, ElementsAre(7));
  EXPECT_TRUE(request.ignore_eos);
}

TEST_F(GenerateTest, StopStringReportsWhatMatched) {
  script({id_of("Ġthe"), id_of("re"), id_of("Ġa")});
  const nlohmann::json body = post_json(
      "/generate",
      {{"text", "Hello"}, {"sampling_params", {{"max_new_tokens", 10}, {"stop", {"her"}}}}});
  EXPECT_EQ(body["text"], " t");
  EXPECT_EQ(body["meta_info"]["finish_reason"],
            nlohmann::json({{"type", "stop"}, {"matched", "her"}}));
}

TEST_F(GenerateTest, EosReportsTheMatchedTokenId) {
  script({id_of("Ġthe"), *tokenizer().eos_id()});
  const nlohmann::json body = post_json("/generate", {{"text", "Hello"}});
  EXPECT_EQ(body["text"], " the");
  EXPECT_EQ(body["output_ids"], nlohmann::json({id_of("Ġthe"), *tokenizer().eos_id()}));
  EXPECT_EQ(body["meta_info"]["finish_reason"],
            nlohmann::json({{"type", "stop"}, {"matched", *tokenizer().eos_id()}}));
}

TEST_F(GenerateTest, BatchesAnswerWithAList) {
  const nlohmann::json texts = post_json(
      "/generate", {{"text", {"Hello", "The cat"}}, {"sampling_params", {{"max_new_tokens", 1}}}});
  ASSERT_TRUE(texts.is_array());
  EXPECT_EQ(texts.size(), 2u);
  const nlohmann::json ids = post_json(
      "/generate", {{"input_ids", {{10, 11}, {12}}}, {"sampling_params", {{"max_new_tokens", 1}}}});
  ASSERT_TRUE(ids.is_array());
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[1]["output_ids"], nlohmann::json({13}));  // fake rule: last + 1
  const nlohmann::json n = post_json(
      "/generate", {{"text", "Hello"}, {"sampling_params", {{"max_new_tokens", 1}, {"n", 3}}}});
  EXPECT_EQ(n.size(), 3u);
}

TEST_F(GenerateTest, GivenRidsNameTheRequests) {
  const nlohmann::json body =
      post_json("/generate", {{"input_ids", {{10}, {12}}},
                              {"rid", {"first", "second"}},
                              {"sampling_params", {{"max_new_tokens", 1}}}});
  EXPECT_EQ(body[0]["meta_info"]["id"], "first");
  EXPECT_EQ(body[1]["meta_info"]["id"], "second");
}

TEST_F(GenerateTest, LogprobsInSglangShape) {
  script({id_of("Ġthe"), id_of("re")});
  const nlohmann::json body = post_json("/generate", {{"text", "Hello"},
                                                      {"sampling_params", {{"max_new_tokens", 2}}},
                                                      {"return_logprob", true},
                                                      {"top_logprobs_num", 2},
                                                      {"return_text_in_logprobs", true}});
  const nlohmann::json& meta = body["meta_info"];
  EXPECT_EQ(meta["output_token_logprobs"],
            nlohmann::json({{-0.25, id_of("Ġthe"), " the"}, {-0.5, id_of("re"), "re"}}));
  ASSERT_EQ(meta["output_top_logprobs"].size(), 2u);
  EXPECT_EQ(meta["output_top_logprobs"][1][1],
            nlohmann::json({-1.5, id_of("re") + 1,
                            tokenizer().decode(std::vector<int32_t>{id_of("re") + 1}, false)}));
}

TEST_F(GenerateTest, StreamSendsCumulativeTextThenDone) {
  script({id_of("Ġthe"), id_of("re"), id_of("Ġa")});
  const httplib::Result result =
      post("/generate",
           nlohmann::json{
               {"text", "Hello"}, {"stream", true}, {"sampling_params", {{"max_new_tokens", 3}}}});
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  const std::vector<nlohmann::json> events = sse_json_events(result->body);
  ASSERT_FALSE(events.empty());
  std::string previous;
  for (const nlohmann::json& event : events) {
    const std::string text = event["text"];
    EXPECT_EQ(text.rfind(previous, 0), 0u) << "text is cumulative";
    previous = text;
  }
  EXPECT_EQ(events.back()["text"], " there a");
  EXPECT_EQ(events.back()["output_ids"].size(), 3u);
  EXPECT_EQ(events.back()["meta_info"]["finish_reason"]["type"], "length");
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    EXPECT_TRUE(events[i]["meta_info"]["finish_reason"].is_null());
  }
}

}  // namespace
}  // namespace mlaserve::server::testing
