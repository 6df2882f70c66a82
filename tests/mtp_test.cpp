// DeepSeek-V3's multi-token-prediction layer against an independent float64 implementation:
// models/brown-tiny-mtp/reference.json holds, for 16 prompts and their 48-token greedy
// continuations, the MTP layer's top-10 logits for t(i+2) at every position from the prompt's
// last token on. `eval --mtp` runs the MTP layer teacher-forced over prompt + continuation.
#include <gtest/gtest.h>

#include "support/command.h"
#include "support/files.h"

namespace mlaserve::testing {
namespace {

using nlohmann::json;

const std::string kModel = "models/brown-tiny-mtp";

const json& reference() {
  static const json ref = read_json(kModel + "/reference.json")["mtp"];
  return ref;
}

// Every case's prompt followed by its greedy continuation.
json teacher_forced_input() {
  json prompts = json::array();
  for (const json& c : reference()["cases"]) {
    std::vector<int32_t> ids = c["ids"].get<std::vector<int32_t>>();
    for (const json& t : c["greedy"]) ids.push_back(t.get<int32_t>());
    prompts.push_back({{"ids", ids}});
  }
  return {{"prompts", prompts}};
}

struct MtpCheck {
  int rows = 0, drafts_equal = 0, accepted = 0, accept_total = 0;
  double max_logit_error = 0;
};

// Our MTP rows against the reference rows; the draft acceptance counts a draft at i that equals
// the main model's greedy t(i+2), over the positions whose t(i+2) is in the continuation.
MtpCheck check(const json& out) {
  MtpCheck r;
  const json& cases = reference()["cases"];
  for (size_t p = 0; p < cases.size(); ++p) {
    const json& ours = out["prompts"][p]["mtp"];
    const json& ids = out["prompts"][p]["ids"];
    for (const json& row : cases[p]["mtp_rows"]) {
      const auto i = row["position"].get<size_t>();
      const json& got = ours.at(i);
      r.rows += 1;
      r.drafts_equal += got["top_ids"][0] == row["draft"];
      for (size_t k = 0; k < 10; ++k) {
        r.max_logit_error = std::max(
            r.max_logit_error,
            std::abs(got["top_logits"][k].get<double>() - row["top10_logits"][k].get<double>()));
      }
      if (i + 2 < ids.size()) {
        r.accept_total += 1;
        r.accepted += got["top_ids"][0] == ids[i + 2];
      }
    }
  }
  return r;
}

json run_mtp(const std::string& flags) {
  TempDir tmp;
  write_json(tmp.path() / "in.json", teacher_forced_input());
  const CommandResult r =
      run_command(mlaserve_bin() + " eval --model " + kModel + " --mtp --max-new-tokens 0 " +
                  flags + " --input " + (tmp.path() / "in.json").string() + " --output " +
                  (tmp.path() / "out.json").string() + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return read_json(tmp.path() / "out.json");
}

class MtpReference : public ::testing::TestWithParam<std::string> {};  // layout flags

// float32: the reference's float64 logits within 1e-4, every draft the same, and so its
// acceptance on the greedy continuations (447 of 752).
TEST_P(MtpReference, MatchesTheFloat64LogitsAndDrafts) {
  const MtpCheck r = check(run_mtp("--dtype float32 " + GetParam()));
  EXPECT_EQ(r.rows, 768);
  EXPECT_LT(r.max_logit_error, 1e-4);
  EXPECT_EQ(r.drafts_equal, r.rows);
  EXPECT_EQ(r.accept_total, 752);
  EXPECT_NEAR(static_cast<double>(r.accepted) / r.accept_total,
              reference()["greedy_draft_acceptance"].get<double>(), 1e-9);
}

INSTANTIATE_TEST_SUITE_P(Layouts, MtpReference,
                         ::testing::Values("", "--tp 4 --dp 2 --enable-dp-attention",
                                           "--tp 2 --enable-ep-moe --enable-dp-linear "
                                           "--dp-linear-min-tokens 1"));

// The default bf16 weights: logits within bf16's rounding, drafts nearly all the same.
TEST(Mtp, Bfloat16StaysCloseToTheReference) {
  const MtpCheck r = check(run_mtp(""));
  EXPECT_LT(r.max_logit_error, 0.05);
  EXPECT_GE(r.drafts_equal, r.rows - 8);
}

// brown-tiny-mtp stores the MTP layer's embed_tokens and shared_head.head as copies of the main
// embedding and lm_head: they are not held twice. With them the layer would add two
// [vocab, hidden] float32 tensors (8.4 MB) to its decoder layer and projection (4.3 MB).
TEST(Mtp, CopiesOfTheMainEmbeddingAndHeadAreNotHeldTwice) {
  TempDir tmp;
  const json input = {{"prompts", {{{"ids", {0, 5, 6}}}}}};
  const auto weight_bytes = [&](const std::string& flags) {
    return run_eval(kModel, input, "--dtype float32 " + flags, tmp, 0)["ranks"][0]
        .at("weight_value_bytes")
        .get<int64_t>();
  };
  const int64_t mtp_bytes = weight_bytes("--mtp") - weight_bytes("");
  const int64_t vocab_matrix = 4114 * 256 * 4;
  EXPECT_GT(mtp_bytes, 0);
  EXPECT_LT(mtp_bytes, 2 * vocab_matrix);
}

TEST(Mtp, AModelWithoutTheLayerIsAClearError) {
  TempDir tmp;
  write_json(tmp.path() / "in.json", {{"prompts", {{{"ids", {0, 5, 6}}}}}});
  expect_fails_fast(mlaserve_bin() + " eval --model models/brown-tiny --mtp --input " +
                        (tmp.path() / "in.json").string() + " --output " +
                        (tmp.path() / "out.json").string(),
                    20, {"no multi-token-prediction layer", "num_nextn_predict_layers is 0"});
}

}  // namespace
}  // namespace mlaserve::testing
