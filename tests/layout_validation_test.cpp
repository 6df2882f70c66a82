// A layout that cannot run ends the job quickly with a message naming the problem, on every
// path: our own relaunch and an external mpirun.
#include "support/golden.h"

namespace mlaserve::testing {
namespace {

struct BadLayout {
  std::string name;
  std::string launcher;  // prepended to the mlaserve command line
  std::string model;
  std::string flags;
  std::string message;
};

class LayoutValidation : public ::testing::TestWithParam<BadLayout> {};

TEST_P(LayoutValidation, FailsFastNamingTheProblem) {
  const BadLayout& bad = GetParam();
  TempDir tmp;
  write_json(tmp / "in.json", {{"prompts", {{{"ids", {1, 2, 3}}}}}});
  expect_fails_fast(bad.launcher + mlaserve_bin() + " eval --model tests/data/models/" + bad.model +
                        " --input " + (tmp / "in.json").string() + " --output " +
                        (tmp / "out.json").string() + " " + bad.flags,
                    20, {bad.message});
}

INSTANTIATE_TEST_SUITE_P(
    BadLayouts, LayoutValidation,
    ::testing::Values(
        BadLayout{"TpNotDivisibleByDp", "", "tiny-v3", "--tp 6 --dp 4 --enable-dp-attention",
                  "--enable-dp-attention needs --tp divisible by --dp (got tp=6 dp=4)"},
        // attn_tp = 8 divides the 8 heads, so the expert count is the only problem.
        BadLayout{"EpMoreRanksThanExperts", "", "tiny-v3-fp8",
                  "--tp 16 --dp 2 --enable-dp-attention --enable-ep-moe",
                  "--enable-ep-moe needs --tp (16) <= n_routed_experts (8)"},
        BadLayout{"HeadsNotDivisibleByAttnTp", "", "tiny-v3", "--tp 6 --dp 2 --enable-dp-attention",
                  "num_attention_heads 8 is not divisible by the attention TP size 3"},
        BadLayout{"ExternalWorldSizeMismatch", "mpirun --oversubscribe --allow-run-as-root -np 3 ",
                  "tiny-v3", "--tp 4", "tp=4 dp=1 needs 4 ranks but the job has 3"}),
    [](const auto& info) { return info.param.name; });

// A model that will not fit stops after its first layer with the memory it needs and the memory
// there is, on every rank of a multi-rank job (MemAvailable faked at 10 kB).
TEST(LoadMemoryCheck, ModelTooLargeForMemAvailableEndsTheJobWithBothFigures) {
  TempDir tmp;
  write_json(tmp / "in.json", {{"prompts", {{{"ids", {1, 2, 3}}}}}});
  expect_fails_fast("env MLASERVE_TEST_MEM_AVAILABLE_MB=0.01 " + mlaserve_bin() +
                        " eval --model tests/data/models/tiny-v3 --tp 2 --input " +
                        (tmp / "in.json").string() + " --output " + (tmp / "out.json").string(),
                    20, {"out of memory: after 1 of 3 layers", "MemAvailable is 0 MB"});
}

// oneDNN's packed copies count: brown-tiny in float32 needs ~9 MB more after its first layer as
// one copy and ~18 MB with the packed copies, so at a MemAvailable of 15 MB --weight-packing on
// fails naming --weight-packing off; with off the model loads and runs (and holds less), and so
// it does by default (auto), which leaves the copies out and says so.
TEST(LoadMemoryCheck, PackedCopiesCountAndWeightPackingOffHoldsOneCopy) {
  TempDir tmp;
  write_json(tmp / "in.json", {{"prompts", {{{"ids", {1, 2, 3}}}}}});
  const std::string eval = "env MLASERVE_TEST_MEM_AVAILABLE_MB=15 " + mlaserve_bin() +
                           " eval --model models/brown-tiny --dtype float32 --input " +
                           (tmp / "in.json").string() + " --output " + (tmp / "out.json").string();
  expect_fails_fast(eval + " --weight-packing on", 20,
                    {"out of memory: after 1 of 4 layers", "oneDNN's packed copies",
                     "--weight-packing off holds one copy", "MemAvailable is 15 MB"});
  const CommandResult off = run_command(eval + " --weight-packing off 2>&1");
  EXPECT_EQ(off.exit_code, 0) << off.output;
  const CommandResult automatic = run_command(eval + " 2>&1");
  EXPECT_EQ(automatic.exit_code, 0) << automatic.output;
  EXPECT_NE(automatic.output.find("weight packing: off for host "), std::string::npos)
      << automatic.output;
}

}  // namespace
}  // namespace mlaserve::testing
