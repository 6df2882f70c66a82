// The collective-sequence check (--check-collectives, on in Debug builds) turns ranks that
// disagree about a collective into an error naming the layer, instead of a hang or wrong sums.
#include "support/golden.h"

namespace mlaserve::testing {
namespace {

// MLASERVE_TEST_SKEW_COLLECTIVE=1:1 (a test-only hook in parallel/collectives.cpp) makes rank 1
// declare one value too many to the check at layer 1.
TEST(CollectiveCheck, SkewedCountEndsTheJobNamingTheLayer) {
  TempDir tmp;
  write_json(tmp / "in.json", GoldenModel("tiny-v3").eval_input({0}));
  expect_fails_fast("env MLASERVE_TEST_SKEW_COLLECTIVE=1:1 " + mlaserve_bin() +
                        " eval --model tests/data/models/tiny-v3 --input " +
                        (tmp / "in.json").string() + " --output " + (tmp / "out.json").string() +
                        " --tp 2 --check-collectives",
                    20, {"collective mismatch", "at layer 1:"});
}

}  // namespace
}  // namespace mlaserve::testing
