// Request controls end to end on brown-tiny. Priority: refused (400) by a server started without
// --enable-priority-scheduling, served by one started with it; a high-priority request preempts a
// running low-priority one, which still gives the tokens it gives alone. Timings: a request that
// waited for a place says so in its queue time, and the phases add up to its latency. logit_bias:
// -100 on the greedy token makes the model pick another, +100 on a token it would not pick forces
// it (native /generate and OpenAI completions); and under MTP speculation on brown-tiny-mtp a
// moderate bias (one that changes the greedy continuation) gives the tokens it gives without
// speculation: the verify rows carry the bias.
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <thread>

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

// /generate, greedy, ignoring EOS, at `priority`; the whole answer.
json generate_at(const ServerApi& api, const std::vector<int>& prompt, int max_new, int priority) {
  const json body = {
      {"input_ids", prompt},
      {"priority", priority},
      {"sampling_params", {{"max_new_tokens", max_new}, {"temperature", 0}, {"ignore_eos", true}}}};
  return api.post_json("/generate", body);
}

// One place for a running request: the high-priority request, sent while the low-priority one
// runs, preempts it (its first token comes long before the low one ends), and the low one resumes
// and gives its tokens of a run alone.
TEST(Priority, AHigherPriorityRequestPreemptsARunningOne) {
  ServerProcess server("--enable-priority-scheduling --max-running-requests 1");
  ASSERT_GT(server.port(), 0);
  const ServerApi api(server.port());
  const std::vector<int> low_prompt = {0, 11, 22, 33}, high_prompt = {0, 44, 55, 66};
  // Long enough to be still running when the high one comes on any machine.
  constexpr int kLowTokens = 1000;
  const json low_alone = generate_at(api, low_prompt, kLowTokens, 0);
  auto low =
      std::async(std::launch::async, [&] { return generate_at(api, low_prompt, kLowTokens, 0); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // low runs
  const json high = generate_at(api, high_prompt, 4, 10);
  const json low_done = low.get();
  EXPECT_EQ(low_done["output_ids"], low_alone["output_ids"]);
  // The high request did not wait for the low one's tokens.
  EXPECT_LT(high["meta_info"]["timings"]["queue_ms"].get<double>(),
            0.5 * low_alone["meta_info"]["timings"]["decode_ms"].get<double>())
      << high.dump() << "\n"
      << low_alone.dump();
  EXPECT_GT(api.engine_status().value("preemptions", 0), 0) << api.engine_status().dump();
}

TEST(Timings, QueueAndPhasesOfARequest) {
  ServerProcess server("--max-running-requests 1");
  ASSERT_GT(server.port(), 0);
  const ServerApi api(server.port());
  // Long enough to be still running when the second comes on any machine.
  auto first = std::async(std::launch::async, [&] { return generate_at(api, kPrompt, 800, 0); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const json second = generate_at(api, kPrompt, 4, 0);
  const json first_done = first.get();
  const json& running = first_done["meta_info"]["timings"];
  const json& queued = second["meta_info"]["timings"];
  // The second waited for the first's place (most of the first's decode).
  EXPECT_GT(queued["queue_ms"].get<double>(), 0.3 * running["decode_ms"].get<double>())
      << first_done.dump() << "\n"
      << second.dump();
  for (const json* t : {&running, &queued}) {
    const double parts = (*t)["queue_ms"].get<double>() + (*t)["prefill_ms"].get<double>() +
                         (*t)["decode_ms"].get<double>();
    EXPECT_NEAR(parts, (*t)["e2e_ms"].get<double>(), 5.0) << t->dump();
  }
  EXPECT_GT(running["decode_tokens_per_second"].get<double>(), 0.0);
  // OpenAI routes give them on request, per choice.
  const json chat = {{"prompt", "The jury"}, {"max_tokens", 3}, {"return_timings", true}};
  const json answer = server.call("/v1/completions", &chat);
  EXPECT_TRUE(answer["choices"][0]["timings"]["decode_ms"].is_number()) << answer.dump();
  const json plain = {{"prompt", "The jury"}, {"max_tokens", 3}};
  EXPECT_FALSE(server.call("/v1/completions", &plain)["choices"][0].contains("timings"));
}

}  // namespace
}  // namespace mlaserve::testing
