// POST /v1/completions and GET /v1/models against the fake engine.
#include <gmock/gmock.h>

#include "server/server_test_util.h"

namespace mlaserve::server::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::StartsWith;

class CompletionsTest : public ServerTest {};

TEST_F(CompletionsTest, ModelsListsTheServedModel) {
  const httplib::Result result = get("/v1/models");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  const nlohmann::json body = nlohmann::json::parse(result->body);
  EXPECT_EQ(body["object"], "list");
  ASSERT_EQ(body["data"].size(), 1u);
  EXPECT_EQ(body["data"][0]["id"], kModelName);
  EXPECT_EQ(body["data"][0]["object"], "model");
  EXPECT_EQ(body["data"][0]["max_model_len"], 256);
}

TEST_F(CompletionsTest, TextPromptGetsBosAndStopsAtMaxTokens) {
  const std::vector<int32_t> output = {id_of("Ġthe"), id_of("re"), id_of("Ġa"), id_of("in")};
  script(output);
  const nlohmann::json body =
      post_json("/v1/completions", {{"model", kModelName}, {"prompt", "Hello"}, {"max_tokens", 3}});

  EXPECT_THAT(body["id"].get<std::string>(), StartsWith("cmpl-"));
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["model"], kModelName);
  EXPECT_GT(body["created"].get<int64_t>(), 1'700'000'000);
  ASSERT_EQ(body["choices"].size(), 1u);
  EXPECT_EQ(body["choices"][0]["index"], 0);
  EXPECT_EQ(body["choices"][0]["text"], " there a");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(body["choices"][0]["logprobs"].is_null());

  const std::vector<int32_t> prompt = tokenizer().encode("Hello", true);
  ASSERT_EQ(prompt.front(), *tokenizer().bos_id());
  const std::vector<sched::GenerationRequest> submitted = engine().submitted();
  ASSERT_EQ(submitted.size(), 1u);
  EXPECT_EQ(submitted[0].prompt, prompt);
  EXPECT_EQ(submitted[0].max_new_tokens, 3);
  const nlohmann::json& usage = body["usage"];
  EXPECT_EQ(usage["prompt_tokens"], prompt.size());
  EXPECT_EQ(usage["completion_tokens"], 3);
  EXPECT_EQ(usage["total_tokens"], prompt.size() + 3);
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], 0);
}

TEST_F(CompletionsTest, DefaultMaxTokensIsSixteen) {
  post_json("/v1/completions", {{"prompt", "Hello"}});
  ASSERT_EQ(engine().submitted().size(), 1u);
  EXPECT_EQ(engine().submitted()[0].max_new_tokens, 16);
}

TEST_F(CompletionsTest, SamplingFieldsReachTheEngine) {
  post_json("/v1/completions", {{"prompt", "Hello"},
                                {"max_tokens", 2},
                                {"temperature", 0.5},
                                {"top_p", 0.9},
                                {"top_k", 40},
                                {"min_p", 0.1},
                                {"seed", 7},
                                {"presence_penalty", 0.5},
                                {"frequency_penalty", -0.5},
                                {"repetition_penalty", 1.2},
                                {"ignore_eos", true},
                                {"stop_token_ids", {5, 6}}});
  ASSERT_EQ(engine().submitted().size(), 1u);
  const sched::GenerationRequest request = engine().submitted()[0];
  EXPECT_FLOAT_EQ(request.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(request.sampling.top_p, 0.9f);
  EXPECT_EQ(request.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(request.sampling.min_p, 0.1f);
  EXPECT_EQ(request.sampling.seed, 7u);
  EXPECT_FLOAT_EQ(request.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(request.sampling.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(request.sampling.repetition_penalty, 1.2f);
  EXPECT_TRUE(request.ignore_eos);
  EXPECT_THAT(request.stop_token_ids, ElementsAre(5, 6));
  EXPECT_FALSE(request.logprobs);
}

TEST_F(CompletionsTest, EosStopsWithoutAppearingInTheText) {
  script({id_of("Ġthe"), id_of("re"), *tokenizer().eos_id(), id_of("Ġa")});
  const nlohmann::json body =
      post_json("/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 10}});
  EXPECT_EQ(body["choices"][0]["text"], " there");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["choices"][0]["matched_stop"], *tokenizer().eos_id());
  EXPECT_EQ(body["usage"]["completion_tokens"], 3);  // the EOS counts as generated
}

TEST_F(CompletionsTest, IgnoreEosKeepsGoing) {
  script({id_of("Ġthe"), *tokenizer().eos_id(), id_of("re")});
  const nlohmann::json body =
      post_json("/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 3}, {"ignore_eos", true}});
  EXPECT_EQ(body["choices"][0]["text"], " there");  // EOS is special: skipped in the text
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
}

TEST_F(CompletionsTest, StopTokenIdEndsTheTextBeforeIt) {
  script({id_of("Ġthe"), id_of("re"), id_of("Ġa")});
  const nlohmann::json body =
      post_json("/v1/completions",
                {{"prompt", "Hello"}, {"max_tokens", 10}, {"stop_token_ids", {id_of("re")}}});
  EXPECT_EQ(body["choices"][0]["text"], " the");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["choices"][0]["matched_stop"], id_of("re"));
}

// " the" + "re" + " a": the stop string "her" spans the first two tokens.
TEST_F(CompletionsTest, StopStringAcrossTokensIsTrimmedAndAbortsTheEngineRequest) {
  script({id_of("Ġthe"), id_of("re"), id_of("Ġa"), id_of("in")});
  const nlohmann::json body = post_json(
      "/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 10}, {"stop", {"zzz", "her"}}});
  EXPECT_EQ(body["choices"][0]["text"], " t");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["choices"][0]["matched_stop"], "her");
  // The script stalls after 4 tokens, so only the abort can have ended the engine request.
  EXPECT_EQ(engine().wait_for_abort(std::chrono::seconds(5)), 1u);
  EXPECT_TRUE(engine().wait_until_idle(std::chrono::seconds(5)));
}

TEST_F(CompletionsTest, StopStringAsPlainString) {
  script({id_of("Ġthe"), id_of("re"), id_of("Ġa")});
  const nlohmann::json body =
      post_json("/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 3}, {"stop", "e a"}});
  EXPECT_EQ(body["choices"][0]["text"], " ther");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
}

TEST_F(CompletionsTest, StopStringNotMatchedReleasesAllText) {
  script({id_of("Ġthe"), id_of("re")});
  const nlohmann::json body =
      post_json("/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 2}, {"stop", "reX"}});
  EXPECT_EQ(body["choices"][0]["text"], " there");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
}

TEST_F(CompletionsTest, ListOfStringsGivesOneChoicePerPrompt) {
  const nlohmann::json body =
      post_json("/v1/completions", {{"prompt", {"Hello", "The cat"}}, {"max_tokens", 2}});
  ASSERT_EQ(body["choices"].size(), 2u);
  EXPECT_EQ(body["choices"][0]["index"], 0);
  EXPECT_EQ(body["choices"][1]["index"], 1);
  // Default fake rule: (last prompt token + k) % vocab.
  const auto continuation = [&](const std::string& text) {
    const int32_t last = tokenizer().encode(text, true).back();
    return decode({last + 1, last + 2});
  };
  EXPECT_EQ(body["choices"][0]["text"], continuation("Hello"));
  EXPECT_EQ(body["choices"][1]["text"], continuation("The cat"));
  const size_t prompt_tokens =
      tokenizer().encode("Hello", true).size() + tokenizer().encode("The cat", true).size();
  EXPECT_EQ(body["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(body["usage"]["completion_tokens"], 4);
}

TEST_F(CompletionsTest, TokenIdPromptsAreUsedAsGiven) {
  post_json("/v1/completions", {{"prompt", {300, 301, 302}}, {"max_tokens", 1}});
  post_json("/v1/completions", {{"prompt", {{400, 401}, {500}}}, {"max_tokens", 1}});
  const std::vector<sched::GenerationRequest> submitted = engine().submitted();
  ASSERT_EQ(submitted.size(), 3u);
  EXPECT_THAT(submitted[0].prompt, ElementsAre(300, 301, 302));
  EXPECT_THAT(submitted[1].prompt, ElementsAre(400, 401));
  EXPECT_THAT(submitted[2].prompt, ElementsAre(500));
}

TEST_F(CompletionsTest, NChoicesGetSeedsOfTheirOwn) {
  const nlohmann::json body = post_json(
      "/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 2}, {"n", 2}, {"seed", 100}});
  ASSERT_EQ(body["choices"].size(), 2u);
  EXPECT_EQ(body["choices"][0]["index"], 0);
  EXPECT_EQ(body["choices"][1]["index"], 1);
  const std::vector<sched::GenerationRequest> submitted = engine().submitted();
  ASSERT_EQ(submitted.size(), 2u);
  EXPECT_EQ(submitted[0].sampling.seed, 100u);
  EXPECT_EQ(submitted[1].sampling.seed, 101u);
  // A shared prompt counts once.
  EXPECT_EQ(body["usage"]["prompt_tokens"], tokenizer().encode("Hello", true).size());
  EXPECT_EQ(body["usage"]["completion_tokens"], 4);
}

TEST_F(CompletionsTest, LogprobsInTheLegacyShape) {
  script({id_of("Ġthe"), id_of("re")});
  const nlohmann::json body =
      post_json("/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 2}, {"logprobs", 2}});
  ASSERT_EQ(engine().submitted().size(), 1u);
  EXPECT_TRUE(engine().submitted()[0].logprobs);
  EXPECT_EQ(engine().submitted()[0].top_logprobs, 2);
  const nlohmann::json& logprobs = body["choices"][0]["logprobs"];
  EXPECT_EQ(logprobs["tokens"], nlohmann::json({" the", "re"}));
  EXPECT_EQ(logprobs["token_logprobs"], nlohmann::json({-0.25, -0.5}));
  EXPECT_EQ(logprobs["text_offset"], nlohmann::json({0, 4}));
  ASSERT_EQ(logprobs["top_logprobs"].size(), 2u);
  // Alternatives: the token itself, then the next id one lower.
  const std::string after_the = tokenizer().decode(std::vector<int32_t>{id_of("Ġthe") + 1}, false);
  EXPECT_EQ(logprobs["top_logprobs"][0], nlohmann::json({{" the", -0.25}, {after_the, -1.25}}));
}

TEST_F(CompletionsTest, EchoPrependsThePrompt) {
  script({id_of("Ġthe")});
  const nlohmann::json body =
      post_json("/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 1}, {"echo", true}});
  EXPECT_EQ(body["choices"][0]["text"], "Hello the");
}

TEST_F(CompletionsTest, ModelPathIsAcceptedAsModelName) {
  post_json("/v1/completions", {{"model", kModelPath}, {"prompt", "Hello"}, {"max_tokens", 1}});
}

TEST_F(CompletionsTest, CachedTokensComeFromTheEngine) {
  FakeEngine::Options engine_options;
  engine_options.cached_tokens = 2;
  start({}, engine_options);
  const nlohmann::json body =
      post_json("/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 1}});
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
}

}  // namespace
}  // namespace mlaserve::server::testing
