// DeepSeek-V4 through the runtime (the model::Model seam): `mlaserve eval` on a random V4 model
// in DeepSeek's released layout (FP8 blocks with E8M0 scales, FP4 experts) against the float64
// reference, and `mlaserve serve`: concurrent requests of mixed lengths, prompts prefilled in
// chunks beside decodes, and retractions each give the tokens a request gets alone (float32);
// every parallel layout (attention TP, DP attention, dp_linear, EP-MoE, replicas) against the
// same reference and the layout's own alone outputs; the MTP block against the reference, and
// NEXTN speculation giving the outputs of no speculation.
#include <gtest/gtest.h>

#include <cctype>

#include "support/command.h"
#include "support/files.h"
#include "support/golden.h"
#include "support/server_process.h"

namespace mlaserve::testing {
namespace {

using nlohmann::json;

// tests/data/configs/v4-tiny.json with `vocab` tokens and 4 blocks of 32 intermediate columns
// per expert (so that TP-MoE slices them over 4 ranks), and an MTP block with a CSA layer (its
// own compressors and indexer), written to dir/model.
std::filesystem::path make_v4_model(const std::filesystem::path& dir, int vocab) {
  json config = read_json("tests/data/configs/v4-tiny.json");
  config["vocab_size"] = vocab;
  config["moe_intermediate_size"] = 128;
  config["num_nextn_predict_layers"] = 1;
  config["compress_ratios"].push_back(4);
  write_json(dir / "config.json", config);
  const auto made = run_command(
      mlaserve_bin() + " make-model --config " + (dir / "config.json").string() + " --out " +
      (dir / "model").string() + " --dtype fp8 --seed 5 --tokenizer models/brown-tiny");
  EXPECT_EQ(made.exit_code, 0) << made.output;
  return dir / "model";
}

// The model with brown-tiny's vocabulary (the serving tests send its ids).
class DeepseekV4Serving : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    make_v4_model(dir_->path(), 4114);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::filesystem::path model() { return *dir_ / "model"; }
  static TempDir* dir_;
};
TempDir* DeepseekV4Serving::dir_ = nullptr;

// A parameterised test's name from its flags: their letters and digits.
std::string flags_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name;
  for (const char c : info.param) {
    if (std::isalnum(static_cast<unsigned char>(c))) name += c;
  }
  return name;
}

// Prompts of 1, 40 and 150 tokens (past the 8-token window, CSA's top-4 entries and HCA's first
// 128-token entry), 6 greedy tokens each, under `layout`.
void expect_eval_matches_reference(const std::filesystem::path& model, const std::string& layout) {
  json prompts = json::array();
  for (const int n : {1, 40, 150}) {
    std::vector<int> ids;
    for (int j = 0; j < n; ++j) ids.push_back(100 + (n * 13 + j * 37) % 3900);
    prompts.push_back({{"ids", ids}});
  }
  const json input = {{"prompts", prompts}};
  TempDir tmp;
  const json got = run_eval(model, input, "--dtype float32 --step-logits " + layout, tmp, 6);
  const json want = run_float64_reference(model, input, 6, tmp, "deepseek_v4_reference.py");
  ASSERT_FALSE(got.empty());
  ASSERT_FALSE(want.empty());
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE("prompt " + std::to_string(i));
    const json& g = got["prompts"][i];
    const json& w = want["prompts"][i];
    const auto reference = w["last_logits"].get<std::vector<float>>();
    EXPECT_LT(
        relative_l2(g["last_logits"].get<std::vector<float>>(), reference.data(), reference.size()),
        1e-4);
    // Greedy tokens agree wherever the reference's top two logits are apart (float32 may
    // legitimately pick the other of a near tie).
    const auto margins = w["greedy_margins"].get<std::vector<double>>();
    for (size_t t = 0; t < margins.size() && margins[t] > 1e-3; ++t)
      EXPECT_EQ(g["greedy"][t], w["greedy"][t]) << "greedy token " << t;
  }
}

TEST_F(DeepseekV4Serving, EvalMatchesTheFloat64Reference) {
  expect_eval_matches_reference(model(), "");
}

// Attention TP inside a group (heads by output group, the vocabulary split), DP attention with
// and without dp_linear, EP-MoE, TP-MoE over 4 ranks, the padding modes of the DP gather, and
// every exchange checked for agreement between ranks.
class DeepseekV4Layouts : public DeepseekV4Serving,
                          public ::testing::WithParamInterface<std::string> {};

TEST_P(DeepseekV4Layouts, EvalMatchesTheFloat64Reference) {
  expect_eval_matches_reference(model(), GetParam() + " --check-collectives");
}

INSTANTIATE_TEST_SUITE_P(
    Parallel, DeepseekV4Layouts,
    ::testing::Values("--tp 2", "--tp 4 --dp 2 --enable-dp-attention",
                      "--tp 4 --dp 2 --enable-dp-attention --enable-dp-linear",
                      "--tp 4 --dp 4 --enable-dp-attention --enable-ep-moe",
                      "--tp 4 --dp 2 --enable-dp-attention --dp-padding max_len",
                      "--tp 4 --dp 4 --enable-dp-attention --dp-padding exact"),
    flags_name);

// 32 concurrent requests, prompts chunked 64 tokens at a time beside the decodes.
TEST_F(DeepseekV4Serving, ConcurrentRequestsEqualTheirAloneOutputs) {
  const json status = expect_batched_equals_alone(
      "--model " + model().string() + " --chunked-prefill-size 64", mixed_jobs(32));
  EXPECT_GT(status["mixed_steps"].get<int64_t>(), 0) << status.dump();
}

// The same with the KV rows in bf16 (a server's default under --dtype bfloat16).
TEST_F(DeepseekV4Serving, ConcurrentRequestsOverABf16CacheEqualTheirAloneOutputs) {
  expect_batched_equals_alone(
      "--model " + model().string() + " --kv-cache-dtype bfloat16 --chunked-prefill-size 64",
      mixed_jobs(16));
}

// 400 tokens of KV against ~24 x 100 of demand: requests are retracted, start over and finish
// unchanged.
TEST_F(DeepseekV4Serving, RetractionKeepsOutputs) {
  std::vector<GenerateJob> jobs = mixed_jobs(24);
  for (GenerateJob& job : jobs) {
    job.prompt.resize(std::min<size_t>(job.prompt.size(), 60));
    job.max_new = 40;
  }
  const json status =
      expect_batched_equals_alone("--model " + model().string() + " --max-total-tokens 400", jobs);
  EXPECT_GT(status["retractions_total"].get<int64_t>(), 0) << status.dump();
}

// Two replicas of one rank each (--tp 1 --dp 2, prompts dealt round robin) give each prompt the
// logits and tokens one rank gives it.
TEST_F(DeepseekV4Serving, ReplicasGiveTheOutputsOfOneRank) {
  const json input = {{"prompts", json::array({{{"ids", {5, 6, 7, 8, 9, 10, 11, 12}}},
                                               {{"ids", {20, 21, 22}}},
                                               {{"ids", {300, 301}}}})}};
  TempDir one, two;
  const json alone = run_eval(model(), input, "--dtype float32", one, 4);
  const json replicas = run_eval(model(), input, "--dtype float32 --tp 1 --dp 2", two, 4);
  ASSERT_FALSE(alone.empty());
  ASSERT_FALSE(replicas.empty());
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(replicas["prompts"][i]["greedy"], alone["prompts"][i]["greedy"]) << "prompt " << i;
    const auto want = alone["prompts"][i]["last_logits"].get<std::vector<float>>();
    EXPECT_LT(relative_l2(replicas["prompts"][i]["last_logits"].get<std::vector<float>>(),
                          want.data(), want.size()),
              1e-5);
  }
}

// Under DP attention with attention TP and dp_linear, 16 concurrent requests (chunked prefills
// beside decodes, the groups' loads uneven) give the tokens each gets alone on the same layout.
TEST_F(DeepseekV4Serving, DpAttentionServesConcurrentRequestsAsAlone) {
  const json status = expect_batched_equals_alone(
      "--model " + model().string() +
          " --tp 4 --dp 2 --enable-dp-attention --enable-dp-linear --chunked-prefill-size 64",
      mixed_jobs(16));
  EXPECT_GT(status["mixed_steps"].get<int64_t>(), 0) << status.dump();
}

// Quantized at load (int8: the FP8 blocks re-quantized per row; the FP4 experts stay as they
// are): the logits stay near the checkpoint's formats', and DP attention with EP gives one
// rank's.
TEST_F(DeepseekV4Serving, Int8AtLoadStaysNearTheCheckpointOnEveryLayout) {
  std::vector<int> ids;
  for (int j = 0; j < 40; ++j) ids.push_back(100 + j * 53 % 3900);
  const json input = {{"prompts", {{{"ids", ids}}}}};
  TempDir a, b, c;
  const json stored = run_eval(model(), input, "--dtype float32", a, 2);
  const json int8 = run_eval(model(), input, "--dtype float32 --quantization int8", b, 2);
  const json int8_dp = run_eval(
      model(), input,
      "--dtype float32 --quantization int8 --tp 4 --dp 4 --enable-dp-attention --enable-ep-moe", c,
      2);
  ASSERT_FALSE(int8_dp.empty());
  const auto logits = [](const json& out) {
    return out["prompts"][0]["last_logits"].get<std::vector<float>>();
  };
  const std::vector<float> want = logits(stored), got = logits(int8);
  const double distance = relative_l2(got, want.data(), want.size());
  EXPECT_GT(distance, 1e-4);  // quantized at all
  EXPECT_LT(distance, 0.05);  // random weights: 5e-3 measured
  EXPECT_LT(relative_l2(logits(int8_dp), got.data(), got.size()), 1e-5);
}

// Each rank's FLOPs as the sharding says (rank reports): under --tp 2 (heads by output group,
// experts and the vocabulary split) both ranks repeat the replicated projections and the router,
// and their shares of the rest add up to one rank's work.
TEST_F(DeepseekV4Serving, EachRankDoesItsShareOfTheWork) {
  std::vector<int> ids;
  for (int j = 0; j < 40; ++j) ids.push_back(100 + j * 37 % 3900);
  const json input = {{"prompts", {{{"ids", ids}}}}};
  TempDir a, b;
  const json one = run_eval(model(), input, "--dtype float32", a, 4);
  const json two = run_eval(model(), input, "--dtype float32 --tp 2", b, 4);
  ASSERT_EQ(two["ranks"].size(), 2u);
  const json& whole = one["ranks"][0]["flops"];
  for (const char* kind : {"projections", "router"}) {
    for (const json& rank : two["ranks"]) EXPECT_EQ(rank["flops"][kind], whole[kind]) << kind;
  }
  for (const char* kind : {"queries", "attention", "output", "experts", "shared_expert", "head"}) {
    EXPECT_GT(whole[kind].get<double>(), 0) << kind;
    EXPECT_DOUBLE_EQ(
        two["ranks"][0]["flops"][kind].get<double>() + two["ranks"][1]["flops"][kind].get<double>(),
        whole[kind].get<double>())
        << kind;
  }
}

// Retraction under DP attention: each group's pool of 300 tokens holds less than its ~12
// requests need, so groups retract and restart requests, each group on its own store.
TEST_F(DeepseekV4Serving, DpAttentionRetractionKeepsOutputs) {
  std::vector<GenerateJob> jobs = mixed_jobs(24);
  for (GenerateJob& job : jobs) {
    job.prompt.resize(std::min<size_t>(job.prompt.size(), 60));
    job.max_new = 40;
  }
  const json status = expect_batched_equals_alone(
      "--model " + model().string() +
          " --tp 2 --dp 2 --enable-dp-attention --enable-ep-moe --max-total-tokens 300",
      jobs);
  EXPECT_GT(status["retractions_total"].get<int64_t>(), 0) << status.dump();
}

// Prefix reuse from snapshots of V4's state: 8 questions after a shared 150-token system prompt,
// asked twice one at a time, then all at once, then a follow-up turn continuing each finished
// request (its prompt, its answer and 10 more tokens). Requests continue from a snapshot where one
// holds their prefix (the second asker of the system prompt stops there for one; a repeat, a
// follow-up) and every request gets the tokens a server without the radix cache gives it.
class DeepseekV4PrefixReuse : public DeepseekV4Serving,
                              public ::testing::WithParamInterface<std::string> {};

TEST_P(DeepseekV4PrefixReuse, SnapshotsKeepOutputs) {
  std::vector<int> system;
  for (int j = 0; j < 150; ++j) system.push_back(100 + (j * 53) % 3900);
  std::vector<GenerateJob> questions;
  for (int i = 0; i < 8; ++i) {
    GenerateJob job{system, 6 + i};
    for (int j = 0; j < 5 + 7 * i; ++j) job.prompt.push_back(200 + (i * 301 + j * 17) % 3800);
    questions.push_back(job);
  }
  const std::string flags = "--model " + model().string() + " " + GetParam();
  // The outputs without the radix cache, and without speculation.
  const std::string plain_flags =
      "--model " + model().string() + " " + GetParam().substr(0, GetParam().find("--speculative"));
  const bool few_snapshots = GetParam().find("--max-running-requests") != std::string::npos;
  auto follow_ups = [&questions](const std::vector<std::vector<int>>& answers) {
    std::vector<GenerateJob> jobs = questions;
    for (size_t i = 0; i < jobs.size(); ++i) {
      jobs[i].prompt.insert(jobs[i].prompt.end(), answers[i].begin(), answers[i].end());
      for (int j = 0; j < 10; ++j) jobs[i].prompt.push_back(300 + j);
    }
    return jobs;
  };
  std::vector<std::vector<int>> want, want_follow_up;
  {
    ServerProcess plain(plain_flags + " --disable-radix-cache");
    ASSERT_GT(plain.port(), 0);
    for (const GenerateJob& job : questions)
      want.push_back(plain.generate(job.prompt, job.max_new));
    for (const GenerateJob& job : follow_ups(want))
      want_follow_up.push_back(plain.generate(job.prompt, job.max_new));
  }
  ServerProcess server(flags);
  ASSERT_GT(server.port(), 0);
  int64_t cached = 0;
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < questions.size(); ++i) {
      const json got = server.generate_json(questions[i].prompt, questions[i].max_new);
      EXPECT_EQ(got.value("output_ids", std::vector<int>{}), want[i])
          << "round " << round << ", " << i;
      cached += got["meta_info"]["cached_tokens"].get<int64_t>();
    }
  }
  EXPECT_GE(cached, 150 * 6) << "the system prompt came from a snapshot";
  EXPECT_EQ(outputs_concurrently(server, questions), want);
  int i = 0;
  for (const json& got : generate_concurrently(server, follow_ups(want))) {
    EXPECT_EQ(got.value("output_ids", std::vector<int>{}), want_follow_up[i]) << "follow-up " << i;
    // The finished request's state: its prompt and all but its last answer token (unless
    // a later snapshot pushed it out).
    if (!few_snapshots) {
      EXPECT_GE(got["meta_info"]["cached_tokens"].get<int64_t>(),
                static_cast<int64_t>(questions[i].prompt.size() + want[i].size()) - 1)
          << "follow-up " << i;
    }
    ++i;
  }
  // (The cache-aware balancer may have sent every request to the group holding the prefix.)
  const json groups = server.call("/get_server_info")["engine"]["load"];
  int64_t snapshots = 0;
  for (const json& group : groups) {
    snapshots += group["prefix_snapshots"].get<int64_t>();
    if (few_snapshots) {
      EXPECT_LE(group["prefix_snapshots"].get<int64_t>(), 2) << group.dump();
    }
  }
  EXPECT_GT(snapshots, 0) << groups.dump();
}

// One rank; the KV rows in bf16; two snapshots per group at most (the requests' own go first, so
// the system prompt's stays, but the follow-ups' states may be gone); DP attention with attention
// TP and dp_linear, each group on its own snapshots; speculating (a released request's state
// holds rejected drafts' rows, which its snapshot must not), alone and under DP attention.
INSTANTIATE_TEST_SUITE_P(
    Layouts, DeepseekV4PrefixReuse,
    ::testing::Values("--chunked-prefill-size 64", "--kv-cache-dtype bfloat16",
                      "--max-running-requests 2",
                      "--tp 4 --dp 2 --enable-dp-attention --enable-dp-linear",
                      "--speculative-algorithm NEXTN --speculative-num-steps 2",
                      "--tp 4 --dp 2 --enable-dp-attention --speculative-algorithm NEXTN "
                      "--speculative-num-steps 3"),
    flags_name);

// The MTP block teacher-forced (eval --mtp) over prompts of 40 and 150 tokens: every row's top-10
// logits within 1e-4 of the float64 reference's (relative to the row's largest), its top token
// the reference's wherever the reference's top two are apart, on one rank and under DP attention
// (dp_linear) and attention TP with EP.
class DeepseekV4Mtp : public DeepseekV4Serving,
                      public ::testing::WithParamInterface<std::string> {};

TEST_P(DeepseekV4Mtp, MatchesTheFloat64Reference) {
  json prompts = json::array();
  for (const int n : {40, 150}) {
    std::vector<int> ids;
    for (int j = 0; j < n; ++j) ids.push_back(100 + (n * 13 + j * 37) % 3900);
    prompts.push_back({{"ids", ids}});
  }
  const json input = {{"prompts", prompts}};
  TempDir tmp;
  write_json(tmp.path() / "in.json", input);
  const CommandResult ours = run_command(
      mlaserve_bin() + " eval --model " + model().string() + " --mtp --max-new-tokens 0 " +
      "--dtype float32 " + GetParam() + " --input " + (tmp.path() / "in.json").string() +
      " --output " + (tmp.path() / "ours.json").string() + " 2>&1");
  ASSERT_EQ(ours.exit_code, 0) << ours.output;
  const CommandResult reference =
      run_command("python3 tests/reference/deepseek_v4_reference.py --mtp --model " +
                  model().string() + " --input " + (tmp.path() / "in.json").string() +
                  " --output " + (tmp.path() / "reference.json").string() + " 2>&1");
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  const json got = read_json(tmp.path() / "ours.json"),
             want = read_json(tmp.path() / "reference.json");
  for (size_t p = 0; p < prompts.size(); ++p) {
    const json& rows = got["prompts"][p]["mtp"];
    const json& reference_rows = want["prompts"][p]["mtp_logits"];
    ASSERT_EQ(rows.size(), prompts[p]["ids"].size() - 1);
    ASSERT_EQ(reference_rows.size(), rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      std::vector<double> r = reference_rows[i].get<std::vector<double>>();
      double largest = 0;
      for (const double v : r) largest = std::max(largest, std::abs(v));
      for (size_t k = 0; k < rows[i]["top_ids"].size(); ++k) {
        const auto id = rows[i]["top_ids"][k].get<size_t>();
        EXPECT_LT(std::abs(rows[i]["top_logits"][k].get<double>() - r[id]), 1e-4 * largest)
            << "prompt " << p << ", row " << i << ", token " << id;
      }
      std::vector<double> sorted = r;
      std::sort(sorted.rbegin(), sorted.rend());
      const auto best = std::max_element(r.begin(), r.end()) - r.begin();
      if (sorted[0] - sorted[1] > 1e-3) {
        EXPECT_EQ(rows[i]["top_ids"][0].get<int64_t>(), best) << "prompt " << p << ", row " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, DeepseekV4Mtp,
                         ::testing::Values("--tp 1",
                                           "--tp 4 --dp 2 --enable-dp-attention --enable-dp-linear",
                                           "--tp 2 --enable-ep-moe"),
                         flags_name);

// Speculating requests batched (chunked prefills beside verify steps) and retracted for want of
// KV (their state after rejected drafts kept or forgotten) give the tokens each gets alone.
TEST_F(DeepseekV4Serving, SpeculatingRequestsBatchedAndRetractedEqualTheirAloneOutputs) {
  const std::string spec = " --speculative-algorithm NEXTN --speculative-num-steps 2";
  expect_batched_equals_alone("--model " + model().string() + " --chunked-prefill-size 64" + spec,
                              mixed_jobs(16));
  std::vector<GenerateJob> jobs = mixed_jobs(24);
  for (GenerateJob& job : jobs) {
    job.prompt.resize(std::min<size_t>(job.prompt.size(), 60));
    job.max_new = 40;
  }
  const json status = expect_batched_equals_alone(
      "--model " + model().string() + " --max-total-tokens 400" + spec, jobs);
  EXPECT_GT(status["retractions_total"].get<int64_t>(), 0) << status.dump();
}

// A constrained request does not speculate, so the prefix snapshot it leaves holds no MTP state;
// speculating requests that continue from it (the MTP block's cache starting at their prefix's
// end) still give the tokens of a server without speculation.
TEST_F(DeepseekV4Serving, SpeculationContinuesFromASnapshotWithoutMtpState) {
  std::vector<int> prompt{0};
  for (int j = 0; j < 150; ++j) prompt.push_back(100 + (j * 53) % 3900);
  std::vector<std::vector<int>> outputs[2];
  for (int spec = 0; spec < 2; ++spec) {
    ServerProcess server("--model " + model().string() + " --dtype float32" +
                         (spec ? " --speculative-algorithm NEXTN --speculative-num-steps 2" : ""));
    ASSERT_GT(server.port(), 0);
    const json constrained = {
        {"input_ids", prompt},
        {"sampling_params", {{"max_new_tokens", 4}, {"temperature", 0}, {"regex", "[a-z ]+"}}}};
    outputs[spec].push_back(server.call("/generate", &constrained)["output_ids"]);
    for (int k = 0; k < 3; ++k) {
      std::vector<int> ids = prompt;
      ids.insert(ids.end(), {300 + k, 301, 302});
      const json got = server.generate_json(ids, 12);
      outputs[spec].push_back(got["output_ids"]);
      EXPECT_GE(got["meta_info"]["cached_tokens"].get<int64_t>(), 150) << "from the snapshot";
    }
  }
  EXPECT_EQ(outputs[1], outputs[0]);
}

// NEXTN speculation on a 16-token vocabulary, where the random MTP block's drafts are sometimes
// right (so verify steps keep 0, some or all of their drafts): greedy outputs equal those of
// the same layout without speculation, for prompts within the window, across CSA entries and
// past HCA's first entry, with 1 and 3 drafts a step; in float32, and in bf16 with the
// batch-invariant kernels (a verify step's rows then round as decoding them one at a time).
class DeepseekV4Speculative : public ::testing::TestWithParam<std::string> {};

TEST_P(DeepseekV4Speculative, GreedyOutputsEqualThoseWithoutSpeculation) {
  TempDir dir;
  const std::string flags = "--model " + make_v4_model(dir.path(), 16).string() + " " + GetParam();
  std::vector<GenerateJob> jobs;
  for (const int n : {1, 5, 20, 45, 150}) {
    GenerateJob job{{0}, 24};
    for (int j = 0; j < n; ++j) job.prompt.push_back(2 + (n * 41 + j * 7) % 14);
    jobs.push_back(job);
  }
  std::vector<std::vector<int>> want;
  {
    ServerProcess plain(flags);
    ASSERT_GT(plain.port(), 0);
    for (const GenerateJob& job : jobs) want.push_back(plain.generate(job.prompt, job.max_new));
  }
  for (const int steps : {1, 3}) {
    ServerProcess server(flags + " --speculative-algorithm NEXTN --speculative-num-steps " +
                         std::to_string(steps));
    ASSERT_GT(server.port(), 0);
    int64_t verify_steps = 0, tokens = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const json got = server.generate_json(jobs[i].prompt, jobs[i].max_new);
      EXPECT_EQ(got.value("output_ids", std::vector<int>{}), want[i]) << steps << " drafts, " << i;
      verify_steps += got["meta_info"]["spec_verify_ct"].get<int64_t>();
      tokens += got["meta_info"]["completion_tokens"].get<int64_t>() - 1;
    }
    EXPECT_LT(verify_steps, tokens) << "some drafts were kept";
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, DeepseekV4Speculative,
                         ::testing::Values("--dtype float32",
                                           "--dtype bfloat16 --enable-deterministic-inference",
                                           "--dtype float32 --tp 4 --dp 2 --enable-dp-attention "
                                           "--enable-dp-linear",
                                           "--dtype float32 --tp 4 --dp 4 --enable-dp-attention "
                                           "--enable-ep-moe"),
                         flags_name);

// A layout that would leave a rank without a share is refused before loading, naming the fix:
// 4 attention ranks for the model's 2 output groups of heads.
TEST_F(DeepseekV4Serving, AttentionSplitsBeyondTheOutputGroupsAreRefused) {
  expect_fails_fast(mlaserve_bin() + " serve --model " + model().string() + " --tp 4", 60,
                    {"o_groups 2 do not spread over 4 attention ranks", "--enable-dp-attention"});
}

}  // namespace
}  // namespace mlaserve::testing
