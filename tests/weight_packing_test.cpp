// --weight-packing auto (the default): oneDNN's packed copies are made where the host's
// MemAvailable holds its ranks' weights, copies and KV caches with a tenth to spare, and left
// out where it does not, so a model that fits only once loads instead of failing. MemAvailable
// is stood in for by MLASERVE_TEST_MEM_AVAILABLE_MB.
#include <cstdlib>

#include "support/golden.h"

namespace mlaserve::testing {
namespace {

using nlohmann::json;

struct HostBytes {
  double values = 0, packed = 0;
};

// eval of tiny-v3 in float32 (whose weights keep both copies: bf16 ones can be held once, see
// kernels::packed_copy_serves_all) under tp 2 (both ranks on this host) with MemAvailable at
// `mem_mb`: what its ranks hold.
HostBytes eval_with_memory(const std::string& mem_mb) {
  const GoldenModel golden("tiny-v3");
  TempDir tmp;
  setenv("MLASERVE_TEST_MEM_AVAILABLE_MB", mem_mb.c_str(), 1);
  const json out = run_eval(golden, golden.eval_input({0}), "--tp 2 --dtype float32", tmp, 1);
  unsetenv("MLASERVE_TEST_MEM_AVAILABLE_MB");
  HostBytes bytes;
  EXPECT_EQ(out["ranks"].size(), 2u) << out.dump();
  for (const json& rank : out["ranks"]) {
    bytes.values += rank["weight_value_bytes"].get<double>();
    bytes.packed +=
        rank["resident_weight_bytes"].get<double>() - rank["weight_value_bytes"].get<double>();
  }
  return bytes;
}

TEST(WeightPackingAuto, PacksOnlyWhereTheHostHasTheMemory) {
  const HostBytes ample = eval_with_memory("100000");
  ASSERT_GT(ample.values, 0);
  EXPECT_GT(ample.packed, 0.5 * ample.values) << "with ample memory the copies are made";
  // The weights fit with a tenth to spare, the copies do not.
  const double between_mb = (ample.values + ample.packed / 2) / 0.9 / 1e6;
  const HostBytes tight = eval_with_memory(std::to_string(between_mb));
  EXPECT_EQ(tight.values, ample.values);
  EXPECT_EQ(tight.packed, 0) << "MemAvailable " << between_mb << " MB holds no packed copies";
}

}  // namespace
}  // namespace mlaserve::testing
