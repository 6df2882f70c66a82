// Request controls end to end on brown-tiny. Priority: refused (400) by a server started without
// --enable-priority-scheduling, served by one started with it. logit_bias: -100 on the greedy token
// makes the model pick another, +100 on a token it would not pick forces it (native /generate and
// OpenAI completions); and under MTP speculation on brown-tiny-mtp a moderate bias (one that
// changes the greedy continuation) gives the tokens it gives without speculation: the verify rows
// carry the bias.
#include <gtest/gtest.h>

#include <string>

#include "support/server_process.h"

namespace mlaserve::testing {
namespace {

using nlohmann::json;

const std::vector<int> kPrompt = {0, 120, 230, 340, 450};

// POST /generate, greedy, with `bias`; the whole answer.
json generate(const ServerProcess& server, int max_new, const json& bias) {
  const json body = {{"input_ids", kPrompt},
                     {"sampling_params",
                      {{"max_new_tokens", max_new},
                       {"temperature", 0},
                       {"ignore_eos", true},
                       {"logit_bias", bias}}}};
  return server.call("/generate", &body);
}

TEST(LogitBias, MinusOneHundredBansAndPlusOneHundredForcesATokenOnBothApis) {
  ServerProcess server("");
  ASSERT_GT(server.port(), 0);
  const std::vector<int> plain = server.generate(kPrompt, 4);
  ASSERT_EQ(plain.size(), 4u);
  const json banned = generate(server, 1, {{std::to_string(plain[0]), -100}})["output_ids"];
  ASSERT_EQ(banned.size(), 1u);
  EXPECT_NE(banned[0].get<int>(), plain[0]);
  EXPECT_EQ(generate(server, 3, {{"777", 100}})["output_ids"], json({777, 777, 777}));
  // OpenAI completions: the same ids, bias keys as strings.
  const json body = {{"prompt", kPrompt},
                     {"max_tokens", 2},
                     {"temperature", 0},
                     {"logprobs", 0},
                     {"logit_bias", {{"777", 100}}}};
  const json answer = server.call("/v1/completions", &body);
  const json& tokens = answer["choices"][0]["logprobs"]["tokens"];
  ASSERT_EQ(tokens.size(), 2u) << answer.dump();
  EXPECT_EQ(tokens[0], tokens[1]);
  EXPECT_EQ(answer["usage"]["completion_tokens"], 2);
}

TEST(LogitBias, SpeculationBiasesDraftsAndVerifyRowsAlike) {
  const json kBias = {{"290", 4}, {"1020", -3}};
  const std::vector<int> plain_ids = [&] {
    ServerProcess plain("--model models/brown-tiny-mtp");
    EXPECT_GT(plain.port(), 0);
    if (plain.port() == 0) return std::vector<int>{};
    const auto biased = generate(plain, 24, kBias)["output_ids"].get<std::vector<int>>();
    EXPECT_NE(biased, plain.generate(kPrompt, 24)) << "the bias changes nothing: a weak test";
    return biased;
  }();
  ServerProcess speculative(
      "--model models/brown-tiny-mtp --speculative-algorithm NEXTN --speculative-num-steps 2");
  ASSERT_GT(speculative.port(), 0);
  ASSERT_EQ(plain_ids.size(), 24u);
  const json answer = generate(speculative, 24, kBias);
  EXPECT_EQ(answer["output_ids"].get<std::vector<int>>(), plain_ids);
  // It did speculate: fewer verify steps than tokens.
  const int verify_steps = answer["meta_info"].value("spec_verify_ct", 0);
  EXPECT_GT(verify_steps, 0) << answer["meta_info"].dump();
  EXPECT_LT(verify_steps, 24) << answer["meta_info"].dump();
}

TEST(Priority, NeedsTheFlagAndIsServedWithIt) {
  const json body = {{"prompt", "The jury"}, {"max_tokens", 2}, {"priority", 3}};
  {
    ServerProcess plain("");
    ASSERT_GT(plain.port(), 0);
    const auto refused = ServerApi(plain.port()).post("/v1/completions", body.dump());
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 400);
    EXPECT_NE(refused->body.find("--enable-priority-scheduling"), std::string::npos)
        << refused->body;
    // The server keeps serving.
    EXPECT_EQ(plain.generate(kPrompt, 2).size(), 2u);
  }
  ServerProcess prioritised("--enable-priority-scheduling");
  ASSERT_GT(prioritised.port(), 0);
  EXPECT_EQ(prioritised.call("/v1/completions", &body)["usage"]["completion_tokens"], 2);
}

}  // namespace
}  // namespace mlaserve::testing
