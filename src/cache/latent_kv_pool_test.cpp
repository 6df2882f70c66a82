#include "cache/latent_kv_pool.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace mlaserve::cache {
namespace {

TEST(SlotAllocator, HandsOutLowestFirstAndReusesReleased) {
  SlotAllocator a(8);
  EXPECT_EQ(a.allocate(3), (std::vector<int32_t>{0, 1, 2}));
  const auto b = a.allocate(2);
  EXPECT_EQ(b, (std::vector<int32_t>{3, 4}));
  a.release(b);
  EXPECT_EQ(a.free_slots(), 5);
  EXPECT_EQ(a.allocate(2), (std::vector<int32_t>{3, 4}));
}

TEST(SlotAllocator, FullPoolIsAClearError) {
  SlotAllocator a(4);
  a.allocate(3);
  EXPECT_THROW(a.allocate(2), Error);
  EXPECT_EQ(a.free_slots(), 1);  // a failed allocation takes nothing
}

TEST(LatentKvPool, LayersDoNotOverlap) {
  LatentKvPool pool(3, 5, 4);
  EXPECT_EQ(pool.layer(1) - pool.layer(0), 20);
  pool.layer(2)[19] = 1.0f;
  EXPECT_EQ(pool.layer(2)[19], 1.0f);
}

}  // namespace
}  // namespace mlaserve::cache
