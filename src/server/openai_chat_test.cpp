// POST /v1/chat/completions against the fake engine.
#include <gmock/gmock.h>

#include "server/server_test_util.h"

namespace mlaserve::server::testing {
namespace {

using ::testing::StartsWith;

class ChatTest : public ServerTest {
 protected:
  static nlohmann::json messages() {
    return {{{"role", "system"}, {"content", "Be brief."}},
            {{"role", "user"}, {"content", "Hello"}}};
  }
};

TEST_F(ChatTest, RendersTheTemplateAndEncodesWithoutAddingBos) {
  script({id_of("Ġthe"), id_of("re"), *tokenizer().eos_id()});
  const nlohmann::json body =
      post_json("/v1/chat/completions", {{"model", kModelName}, {"messages", messages()}});

  const std::string rendered = tokenizer().apply_chat_template(messages(), true);
  const std::vector<int32_t> expected_prompt = tokenizer().encode(rendered, false);
  ASSERT_EQ(engine().submitted().size(), 1u);
  const std::vector<int32_t> prompt = engine().submitted()[0].prompt;
  EXPECT_EQ(prompt, expected_prompt);
  ASSERT_GE(prompt.size(), 2u);
  EXPECT_EQ(prompt[0], *tokenizer().bos_id());
  EXPECT_NE(prompt[1], *tokenizer().bos_id());  // one BOS, from the template
  // Without max_tokens a chat may fill the context.
  EXPECT_EQ(engine().submitted()[0].max_new_tokens, 256 - static_cast<int64_t>(prompt.size()));

  EXPECT_THAT(body["id"].get<std::string>(), StartsWith("chatcmpl-"));
  EXPECT_EQ(body["object"], "chat.completion");
  ASSERT_EQ(body["choices"].size(), 1u);
  EXPECT_EQ(body["choices"][0]["message"],
            nlohmann::json({{"role", "assistant"}, {"content", " there"}}));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["usage"]["prompt_tokens"], prompt.size());
  EXPECT_EQ(body["usage"]["completion_tokens"], 3);
}

TEST_F(ChatTest, TextPartsAreJoined) {
  const nlohmann::json parts = {
      {{"role", "user"},
       {"content", {{{"type", "text"}, {"text", "Hel"}}, {{"type", "text"}, {"text", "lo"}}}}}};
  post_json("/v1/chat/completions", {{"messages", parts}, {"max_tokens", 1}});
  const nlohmann::json plain = {{{"role", "user"}, {"content", "Hello"}}};
  ASSERT_EQ(engine().submitted().size(), 1u);
  EXPECT_EQ(engine().submitted()[0].prompt,
            tokenizer().encode(tokenizer().apply_chat_template(plain, true), false));
}

TEST_F(ChatTest, MaxCompletionTokensLimitsTheReply) {
  const nlohmann::json body =
      post_json("/v1/chat/completions", {{"messages", messages()}, {"max_completion_tokens", 2}});
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["completion_tokens"], 2);
  EXPECT_EQ(engine().submitted()[0].max_new_tokens, 2);
}

TEST_F(ChatTest, LogprobsInTheChatShape) {
  script({id_of("Ġthe"), id_of("re")});
  const nlohmann::json body = post_json(
      "/v1/chat/completions",
      {{"messages", messages()}, {"max_tokens", 2}, {"logprobs", true}, {"top_logprobs", 3}});
  const nlohmann::json& content = body["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["token"], " the");
  EXPECT_EQ(content[0]["logprob"], -0.25);
  EXPECT_EQ(content[0]["bytes"], nlohmann::json({' ', 't', 'h', 'e'}));
  ASSERT_EQ(content[0]["top_logprobs"].size(), 3u);
  EXPECT_EQ(content[0]["top_logprobs"][0]["token"], " the");
  EXPECT_EQ(content[0]["top_logprobs"][1]["logprob"], -1.25);
  EXPECT_EQ(content[0]["top_logprobs"][2]["logprob"], -2.25);
  EXPECT_TRUE(content[0]["top_logprobs"][1].contains("bytes"));
  EXPECT_EQ(content[1]["token"], "re");
  EXPECT_EQ(content[1]["logprob"], -0.5);
}

TEST_F(ChatTest, LogprobsAreNullUnlessAsked) {
  const nlohmann::json body =
      post_json("/v1/chat/completions", {{"messages", messages()}, {"max_tokens", 1}});
  EXPECT_TRUE(body["choices"][0]["logprobs"].is_null());
  EXPECT_FALSE(engine().submitted()[0].logprobs);
}

TEST_F(ChatTest, NChoices) {
  const nlohmann::json body =
      post_json("/v1/chat/completions", {{"messages", messages()}, {"max_tokens", 2}, {"n", 2}});
  ASSERT_EQ(body["choices"].size(), 2u);
  EXPECT_EQ(body["choices"][1]["index"], 1);
  EXPECT_EQ(engine().submitted().size(), 2u);
  EXPECT_EQ(body["usage"]["completion_tokens"], 4);
}

}  // namespace
}  // namespace mlaserve::server::testing
