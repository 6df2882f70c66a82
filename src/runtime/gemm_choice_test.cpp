// The per-machine cache of the GEMM probe: entries round-trip, other machines' entries survive a
// store, and a missing, damaged or foreign entry reads as none (so the probe runs again).
#include "runtime/gemm_choice.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace mlaserve::runtime {
namespace {

namespace fs = std::filesystem;

class GemmCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mlaserve-gemm-cache-" + std::to_string(getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path file() const { return dir_ / "sub" / "gemm-paths.json"; }
  fs::path dir_;
};

TEST_F(GemmCache, StoredProbeReadsBackForItsKeyOnly) {
  EXPECT_FALSE(cached_probe(file(), "cpu A"));
  store_probe(file(), "cpu A", {{100, 50}, {400, 200}});
  store_probe(file(), "cpu B", {{10, 20}, {30, 40}});
  const auto a = cached_probe(file(), "cpu A");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->mid.bf16_gflops, 100);
  EXPECT_EQ(a->mid.f32_gflops, 50);
  EXPECT_EQ(a->large.bf16_gflops, 400);
  EXPECT_EQ(a->large.f32_gflops, 200);
  const auto b = cached_probe(file(), "cpu B");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->large.f32_gflops, 40);
  EXPECT_FALSE(cached_probe(file(), "cpu C"));
  EXPECT_EQ(std::distance(fs::directory_iterator(file().parent_path()), fs::directory_iterator()),
            1)
      << "a temporary file was left behind";
}

TEST_F(GemmCache, DamagedFileOrEntryReadsAsNone) {
  fs::create_directories(file().parent_path());
  std::ofstream(file()) << "{\"cpu A\": {\"mid\": ";
  EXPECT_FALSE(cached_probe(file(), "cpu A"));
  store_probe(file(), "cpu B", {{1, 2}, {3, 4}});  // a damaged file is replaced, not fatal
  EXPECT_TRUE(cached_probe(file(), "cpu B"));
  std::ofstream(file()) << R"({"cpu A": {"mid": {"bf16_gflops": 1, "f32_gflops": -1},
                              "large": {"bf16_gflops": 1, "f32_gflops": 1}}})";
  EXPECT_FALSE(cached_probe(file(), "cpu A"));
}

TEST(GemmChoice, MachineKeyNamesTheCpuThreadsAndLibrary) {
  const std::string key = machine_key();
  EXPECT_NE(key.find("avx512_bf16="), std::string::npos) << key;
  EXPECT_NE(key.find(" threads"), std::string::npos) << key;
  EXPECT_NE(key.find("oneDNN "), std::string::npos) << key;
}

TEST(GemmChoice, CacheFileFollowsTheEnvironment) {
  ::setenv("MLASERVE_KERNEL_CACHE", "/x/y.json", 1);
  EXPECT_EQ(gemm_cache_file(), fs::path("/x/y.json"));
  ::unsetenv("MLASERVE_KERNEL_CACHE");
  ::setenv("XDG_CACHE_HOME", "/cache", 1);
  EXPECT_EQ(gemm_cache_file(), fs::path("/cache/mlaserve/gemm-paths.json"));
  ::unsetenv("XDG_CACHE_HOME");
}

}  // namespace
}  // namespace mlaserve::runtime
