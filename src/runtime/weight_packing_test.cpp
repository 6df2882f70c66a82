// The rule behind --weight-packing auto: the copies stay while a host's weights, KV caches and
// copies take at most 90 % of MemAvailable, and when MemAvailable cannot be read.
#include "runtime/weight_packing.h"

#include <gtest/gtest.h>

namespace mlaserve::runtime {
namespace {

TEST(WeightPacking, CopiesStayWithinTheShareOfMemAvailable) {
  // 40 + 10 + 40 = 90 of 100: exactly the share.
  EXPECT_TRUE(packing_fits(40, 10, 40, 100));
  EXPECT_FALSE(packing_fits(40, 10, 41, 100));
  EXPECT_FALSE(packing_fits(40, 30, 40, 100)) << "the KV cache counts";
  EXPECT_TRUE(packing_fits(1e12, 0, 1e12, -1)) << "unknown memory packs";
}

}  // namespace
}  // namespace mlaserve::runtime
