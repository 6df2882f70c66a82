#include "cache/latent_kv_pool.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/kv_dtype.h"

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

// Each (layer, slot) row reads back as written (rounded to the pool's dtype), whatever was
// written to the other rows; fp8_e4m3 rows keep their own scales.
TEST(LatentKvPool, RowsOfEveryLayerAndSlotKeepTheirValues) {
  const int64_t n_layers = 3, row_dim = 5, capacity = 4;
  const auto value = [](int64_t l, int64_t slot, int64_t i) {
    return static_cast<float>((l + 1) * (slot + 2)) * (i % 2 ? -1.0f : 1.0f) / (i + 1);
  };
  for (KvDtype dtype : {KvDtype::Float32, KvDtype::BFloat16, KvDtype::Fp8E4m3}) {
    SCOPED_TRACE(kv_dtype_name(dtype));
    LatentKvPool pool(n_layers, row_dim, capacity, dtype);
    std::vector<float> row(row_dim), expected(row_dim), got(row_dim);
    for (int64_t l = 0; l < n_layers; ++l) {
      for (int64_t slot = 0; slot < capacity; ++slot) {
        for (int64_t i = 0; i < row_dim; ++i) row[static_cast<size_t>(i)] = value(l, slot, i);
        pool.write_row(l, slot, row.data());
      }
    }
    for (int64_t l = 0; l < n_layers; ++l) {
      for (int64_t slot = 0; slot < capacity; ++slot) {
        for (int64_t i = 0; i < row_dim; ++i) row[static_cast<size_t>(i)] = value(l, slot, i);
        std::vector<uint8_t> encoded(static_cast<size_t>(row_dim * kv_value_bytes(dtype)));
        float scale = 0.0f;
        encode_kv_row(dtype, row.data(), row_dim, encoded.data(), &scale);
        decode_kv_row({dtype, row_dim, encoded.data(), &scale}, 0, expected.data());
        decode_kv_row(pool.layer(l), slot, got.data());
        EXPECT_EQ(got, expected) << "layer " << l << " slot " << slot;
      }
    }
  }
}

TEST(LatentKvPool, BytesPerTokenFollowTheDtype) {
  EXPECT_EQ(LatentKvPool::bytes_per_token(61, 576, KvDtype::Float32), 61 * 576 * 4);
  EXPECT_EQ(LatentKvPool::bytes_per_token(61, 576, KvDtype::BFloat16), 61 * 576 * 2);
  EXPECT_EQ(LatentKvPool::bytes_per_token(61, 576, KvDtype::Fp8E4m3), 61 * (576 + 4));
}

}  // namespace
}  // namespace mlaserve::cache
