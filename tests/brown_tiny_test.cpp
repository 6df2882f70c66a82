// brown-tiny (models/brown-tiny, a trained DeepSeek-V3-architecture model) against the
// reference.json of an independent float64 implementation: the prompts' last-position top-10
// logits and 32-token greedy continuations through `eval`, and the validation mean NLL through
// `perplexity` at tp 1, under DP attention, on plain replicas and with dp_linear + EP-MoE; then
// the perplexity command's input errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <numeric>
#include <regex>

#include "support/command.h"
#include "support/demo_reference.h"
#include "support/files.h"

namespace mlaserve::testing {
namespace {

using nlohmann::json;

const std::string kModel = "models/brown-tiny";

const json& reference() {
  static const json ref = read_json(kModel + "/reference.json");
  return ref;
}

class BrownTinyReference : public ::testing::TestWithParam<std::string> {};  // layout flags

TEST_P(BrownTinyReference, PromptsTop10LogitsAndGreedyContinuations) {
  expect_demo_reference_prompts(kModel, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Layouts, BrownTinyReference,
                         ::testing::Values("", "--tp 2 --dp 2 --enable-dp-attention"),
                         [](const auto& info) {
                           return info.param.empty() ? std::string("tp1")
                                                     : std::string("tp2_dp2_dp_attention");
                         });

// The 20,000 validation tokens in the reference's windows (255 tokens: --context 256), float32
// weights.
void check_validation_nll(const std::string& flags) {
  const json& validation = reference()["validation"];
  const int context = validation["window"].get<int>() + 1;
  TempDir tmp;
  write_json(tmp / "tokens.json", validation["tokens"]);
  const auto start = std::chrono::steady_clock::now();
  const PerplexityResult r =
      run_perplexity("--model " + kModel + " --ids-file " + (tmp / "tokens.json").string() +
                         " --context " + std::to_string(context) + " --dtype float32 " + flags,
                     tmp);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(r.command.exit_code, 0) << r.command.output;
  const double want = validation["mean_nll"].get<double>();
  EXPECT_NEAR(r.mean_nll, want, 1e-3) << r.command.output;
  EXPECT_NEAR(r.perplexity, std::exp(r.mean_nll), 1e-3 * r.perplexity);
  std::printf("perplexity %s: mean_nll %.6f (reference %.6f), %.1f s\n", flags.c_str(), r.mean_nll,
              want, seconds);
}

TEST(BrownTinyPerplexity, ValidationMeanNllAtTp1) {
  check_validation_nll("");
}

TEST(BrownTinyPerplexity, ValidationMeanNllUnderDpAttention) {
  check_validation_nll("--tp 2 --dp 2 --enable-dp-attention --check-collectives");
}

TEST(BrownTinyPerplexity, ValidationMeanNllOnPlainReplicas) {
  check_validation_nll("--tp 2 --dp 2 --check-collectives");
}

TEST(BrownTinyPerplexity, ValidationMeanNllWithDpLinearAndExpertParallelMoe) {
  check_validation_nll(
      "--tp 4 --dp 2 --enable-dp-attention --enable-dp-linear --enable-ep-moe --check-collectives");
}

// Quantized at load (the model is stored in bf16/f32): FP8 128x128 blocks or per-row int8, on
// the default bf16 fast path, lm_head as well with --quantize-lm-head. The validation mean NLL
// stays within 1 % of the float64 reference's, and at least 28 of each prompt's 32 reference greedy
// tokens are reproduced.
class BrownTinyQuantized : public ::testing::TestWithParam<std::string> {};

// Then the KL divergence of bf16 from itself (zero, the same top token everywhere) and of int4 from
// bf16 (above zero, and the same top token nearly everywhere), over the validation tokens.
TEST(BrownTinyPerplexity, KlDivergenceOfAFormatFromABaseRun) {
  const json& validation = reference()["validation"];
  TempDir tmp;
  write_json(tmp / "tokens.json", validation["tokens"]);
  const std::string common = "--model " + kModel + " --ids-file " + (tmp / "tokens.json").string() +
                             " --context " + std::to_string(validation["window"].get<int>() + 1);
  const std::string base = (tmp / "base.kld").string();
  const PerplexityResult written = run_perplexity(common + " --kl-divergence-base " + base, tmp);
  ASSERT_EQ(written.command.exit_code, 0) << written.command.output;
  const PerplexityResult same = run_perplexity(common + " --kl-divergence " + base, tmp);
  ASSERT_EQ(same.command.exit_code, 0) << same.command.output;
  EXPECT_LT(same.mean_kld, 1e-9) << same.stdout_last_line;
  EXPECT_EQ(same.top1_agreement, 1.0) << same.stdout_last_line;
  const PerplexityResult int4 =
      run_perplexity(common + " --quantization int4 --kl-divergence " + base, tmp);
  ASSERT_EQ(int4.command.exit_code, 0) << int4.command.output;
  EXPECT_GT(int4.mean_kld, 1e-5) << int4.stdout_last_line;
  EXPECT_LT(int4.mean_kld, 0.05) << int4.stdout_last_line;
  EXPECT_GT(int4.top1_agreement, 0.9) << int4.stdout_last_line;
  // Another --context scores the same tokens in other windows: refused, naming the mismatch.
  const PerplexityResult other =
      run_perplexity("--model " + kModel + " --ids-file " + (tmp / "tokens.json").string() +
                         " --context 9 --kl-divergence " + base,
                     tmp);
  EXPECT_NE(other.command.exit_code, 0);
  EXPECT_NE(other.command.output.find("with --context 9"), std::string::npos)
      << other.command.output;
  const std::string truncated = (tmp / "truncated.kld").string();
  std::filesystem::copy_file(base, truncated);
  std::filesystem::resize_file(truncated, std::filesystem::file_size(truncated) - 4);
  const PerplexityResult cut = run_perplexity(common + " --kl-divergence " + truncated, tmp);
  EXPECT_NE(cut.command.exit_code, 0);
  EXPECT_NE(cut.command.output.find("(truncated?)"), std::string::npos) << cut.command.output;
}

TEST_P(BrownTinyQuantized, NllWithinOnePercentAndGreedyTokensMostlyEqual) {
  const std::string flags = "--dtype bfloat16 --quantization " + GetParam();
  const json& validation = reference()["validation"];
  TempDir tmp;
  write_json(tmp / "tokens.json", validation["tokens"]);
  const PerplexityResult r = run_perplexity(
      "--model " + kModel + " --ids-file " + (tmp / "tokens.json").string() + " --context " +
          std::to_string(validation["window"].get<int>() + 1) + " " + flags,
      tmp);
  ASSERT_EQ(r.command.exit_code, 0) << r.command.output;
  const double want = validation["mean_nll"].get<double>();
  EXPECT_NEAR(r.mean_nll, want, 0.01 * want) << r.command.output;

  // Each prompt followed by its reference greedy tokens, scored in one pass (--all-logits): the
  // argmax at each position must be the next reference token. Teacher-forced, so one flipped
  // near-tie costs one token rather than the whole rest of a free-running continuation.
  const json& prompts = reference()["prompts"];
  json input = {{"prompts", json::array()}};
  for (const json& p : prompts) {
    json ids = p["ids"];
    for (const json& id : p["greedy_ids"]) ids.push_back(id);
    input["prompts"].push_back({{"ids", ids}});
  }
  const json out = run_eval(kModel, input, flags + " --all-logits", tmp, 1);
  ASSERT_TRUE(out.contains("prompts"));
  int fewest_equal = 32;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto want_ids = prompts[i]["greedy_ids"].get<std::vector<int>>();
    const json& all_logits = out["prompts"][i]["all_logits"];
    const size_t first = prompts[i]["ids"].size() - 1;  // the position that predicts token 0
    int equal = 0;
    for (size_t t = 0; t < want_ids.size(); ++t) {
      const auto logits = all_logits[first + t].get<std::vector<float>>();
      equal += top_ids(logits, 1)[0] == want_ids[t];
    }
    // 4-bit weights flip more near-ties (brown-tiny's top-1 agreement with bf16: ~90-93 %
    // against ~98-99 % at 8 bits; bench/RESULTS.md).
    const bool four_bit = GetParam().starts_with("int4") || GetParam().starts_with("mxfp4");
    EXPECT_GE(equal, four_bit ? 24 : 28) << prompts[i]["prompt"].get<std::string>();
    fewest_equal = std::min(fewest_equal, equal);
  }
  std::printf(
      "--quantization %s: mean_nll %.4f (reference %.4f, %+.2f %%), fewest greedy tokens "
      "reproduced %d / 32\n",
      GetParam().c_str(), r.mean_nll, want, 100.0 * (r.mean_nll / want - 1.0), fewest_equal);
}

INSTANTIATE_TEST_SUITE_P(Formats, BrownTinyQuantized,
                         ::testing::Values("fp8", "int8", "fp8 --quantize-lm-head",
                                           "int8 --quantize-lm-head", "int4",
                                           "int4 --quantization-group-size 128", "mxfp4"));

// A text file scores exactly as its ids from `mlaserve tokenize` (no special tokens), including a
// last window shorter than the others.
TEST(BrownTinyPerplexity, TextFileScoresAsItsTokenIds) {
  TempDir tmp;
  const std::string text =
      "The jury said that the city of New York was the first of the United States.\n\n\"Yes\".";
  std::ofstream(tmp / "text.txt") << text;
  write_json(tmp / "strings.json", json::array({text}));
  const auto tokenized =
      run_mlaserve("tokenize --tokenizer " + kModel + " --input " + (tmp / "strings.json").string(),
                   tmp / "tokenized.json");
  ASSERT_EQ(tokenized.exit_code, 0) << tokenized.output;
  write_json(tmp / "ids.json", read_json(tmp / "tokenized.json")["ids"][0]);
  const std::string common = "--model " + kModel + " --context 8 --dtype float32 ";
  const PerplexityResult from_text =
      run_perplexity(common + "--text-file " + (tmp / "text.txt").string(), tmp);
  const PerplexityResult from_ids =
      run_perplexity(common + "--ids-file " + (tmp / "ids.json").string(), tmp);
  ASSERT_EQ(from_text.command.exit_code, 0) << from_text.command.output;
  ASSERT_EQ(from_ids.command.exit_code, 0) << from_ids.command.output;
  EXPECT_FALSE(std::isnan(from_text.mean_nll)) << from_text.command.output;
  EXPECT_EQ(from_text.stdout_last_line, from_ids.stdout_last_line);
}

struct ErrorCase {
  std::string name;
  std::string args;     // after --model; $TMP is the test's directory
  std::string message;  // expected in the output, $TMP likewise
};

class BrownTinyPerplexityErrors : public ::testing::TestWithParam<ErrorCase> {};

std::string with_tmp(std::string s, const TempDir& tmp) {
  for (size_t at; (at = s.find("$TMP")) != std::string::npos;)
    s.replace(at, 4, tmp.path().string());
  return s;
}

TEST_P(BrownTinyPerplexityErrors, ExplainsTheProblem) {
  TempDir tmp;
  write_json(tmp / "empty.json", json::array());
  write_json(tmp / "out_of_vocab.json", json::array({5, 4114, 7}));
  write_json(tmp / "negative.json", json::array({-1}));
  write_json(tmp / "not_ids.json", json::array({5, "six"}));
  write_json(tmp / "ids.json", json::array({5, 6, 7}));
  std::ofstream(tmp / "empty.txt");
  std::filesystem::create_directory(tmp / "no_tokenizer");
  std::filesystem::copy_file(kModel + "/config.json", tmp / "no_tokenizer" / "config.json");
  const auto r =
      run_command(mlaserve_bin() + " perplexity --model " + with_tmp(GetParam().args, tmp));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(with_tmp(GetParam().message, tmp)), std::string::npos) << r.output;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BrownTinyPerplexityErrors,
    ::testing::Values(
        ErrorCase{"EmptyIds", kModel + " --ids-file $TMP/empty.json",
                  "$TMP/empty.json: no tokens to score"},
        ErrorCase{"EmptyText", kModel + " --text-file $TMP/empty.txt",
                  "empty.txt: no tokens to score"},
        ErrorCase{"IdOutsideVocabulary", kModel + " --ids-file $TMP/out_of_vocab.json",
                  "token 1 is id 4114, outside the model's vocabulary (0..4113)"},
        ErrorCase{"NegativeId", kModel + " --ids-file $TMP/negative.json",
                  "token 0 is id -1, outside the model's vocabulary"},
        ErrorCase{"NotAnId", kModel + " --ids-file $TMP/not_ids.json",
                  "holds \"six\", which is not a token id"},
        ErrorCase{"ContextTooSmall", kModel + " --ids-file $TMP/ids.json --context 1",
                  "--context 1 is too small"},
        ErrorCase{"ContextOverMaxPositions", kModel + " --ids-file $TMP/ids.json --context 2049",
                  "--context 2049 exceeds the model's max_position_embeddings (2048)"},
        ErrorCase{"ContextOverMaxPositionsOnTwoRanks",
                  kModel + " --ids-file $TMP/ids.json --context 4096 --tp 2",
                  "--context 4096 exceeds the model's max_position_embeddings (2048)"},
        ErrorCase{"NoTokenizerForText", "$TMP/no_tokenizer --text-file $TMP/empty.txt",
                  "--text-file needs the model's tokenizer, but $TMP/no_tokenizer/tokenizer.json "
                  "does not exist"},
        ErrorCase{"NoInput", kModel, "give the tokens to score with --text-file or --ids-file"},
        ErrorCase{"MissingIdsFile", kModel + " --ids-file $TMP/missing.json",
                  "cannot open $TMP/missing.json"},
        ErrorCase{"MissingTextFile", kModel + " --text-file $TMP/missing.txt",
                  "cannot open --text-file $TMP/missing.txt"}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace mlaserve::testing
