// Starting the ranks (runtime/launch.cpp): the threads each rank gets, from a plain shell and
// under an external mpirun, and an external mpirun job giving the golden logits.
#include <optional>
#include <thread>

#include "support/golden.h"

namespace mlaserve::testing {
namespace {

using nlohmann::json;

// Sets (or, given nullptr, removes) an environment variable of this process and the jobs it
// starts, for the life of the object.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  ~ScopedEnv() { old_ ? setenv(name_.c_str(), old_->c_str(), 1) : unsetenv(name_.c_str()); }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// Two ranks on this host share its cores.
int threads_for_two_ranks() {
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / 2);
}

TEST(ThreadsPerRank, CoresOverTheRanksOnTheHost) {
  const GoldenModel golden("tiny-v3");
  TempDir tmp;
  const ScopedEnv unset("OMP_NUM_THREADS", nullptr);
  const json out = run_eval(golden, golden.eval_input({0}), "--tp 2", tmp, 1);
  ASSERT_EQ(out["ranks"].size(), 2u);
  for (const auto& rank : out["ranks"])
    EXPECT_EQ(rank["threads"], threads_for_two_ranks()) << rank.dump();
}

TEST(ThreadsPerRank, OmpNumThreadsIsRespected) {
  const GoldenModel golden("tiny-v3");
  TempDir tmp;
  const ScopedEnv three("OMP_NUM_THREADS", "3");
  const json out = run_eval(golden, golden.eval_input({0}), "--tp 2", tmp, 1);
  ASSERT_EQ(out["ranks"].size(), 2u);
  for (const auto& rank : out["ranks"]) EXPECT_EQ(rank["threads"], 3) << rank.dump();
}

// Under a world the user started, mlaserve neither relaunches nor sets OMP_NUM_THREADS for the
// ranks, yet they split the cores the same way and give the golden logits.
// --kernels auto: the first start on a machine measures the GEMM paths and caches the probe
// (one host-wide measurement, here under tp 2); the next start reads it; both log the choice.
TEST(GemmChoice, FirstStartMeasuresAndCachesTheNextReads) {
  const GoldenModel golden("tiny-v3");
  TempDir tmp;
  const std::string cache = (tmp / "kernels" / "gemm-paths.json").string();
  const ScopedEnv env("MLASERVE_KERNEL_CACHE", cache.c_str());
  const std::string eval = mlaserve_bin() + " eval --model " + golden.dir().string() + " --input " +
                           (tmp / "in.json").string() + " --output " + (tmp / "out.json").string() +
                           " --max-new-tokens 1 --tp 2";
  write_json(tmp / "in.json", golden.eval_input({0}));
  const auto first = run_command(eval);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  if (first.output.find("kernels on ") == std::string::npos)
    GTEST_SKIP() << "no probe: this CPU has one GEMM path (no AVX512_BF16)";
  EXPECT_NE(first.output.find("probe measured now, cached in " + cache), std::string::npos)
      << first.output;
  const std::string log_line = "GEMM of under 64 rows: ";
  EXPECT_EQ(first.output.find(log_line), first.output.rfind(log_line))
      << "each host's first rank measures and logs, not every rank\n"
      << first.output;
  EXPECT_TRUE(std::filesystem::exists(cache));
  const auto second = run_command(eval);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("probe cached in " + cache), std::string::npos) << second.output;
  const auto forced = run_command(eval + " --kernels f32");
  ASSERT_EQ(forced.exit_code, 0) << forced.output;
  EXPECT_EQ(forced.output.find("kernels on "), std::string::npos)
      << "--kernels f32 fixes the paths: no probe\n"
      << forced.output;
}

TEST(ExternalMpirun, MatchesGoldenAndSplitsTheCores) {
  const GoldenModel golden("tiny-v3");
  TempDir tmp;
  write_json(tmp / "in.json", golden.eval_input());
  const ScopedEnv unset("OMP_NUM_THREADS", nullptr);
  const auto r = run_command(
      "mpirun --oversubscribe --allow-run-as-root -np 2 " + mlaserve_bin() + " eval --model " +
      golden.dir().string() + " --input " + (tmp / "in.json").string() + " --output " +
      (tmp / "out.json").string() + " --max-new-tokens " + std::to_string(golden.n_greedy()) +
      " --tp 2 --dtype float32 --all-logits --step-logits --check-collectives");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json out = read_json(tmp / "out.json");
  for (size_t i = 0; i < golden.prompts(); ++i) golden.check(out["prompts"][i], i, {});
  ASSERT_EQ(out["ranks"].size(), 2u);
  for (const auto& rank : out["ranks"])
    EXPECT_EQ(rank["threads"], threads_for_two_ranks()) << rank.dump();
}

}  // namespace
}  // namespace mlaserve::testing
