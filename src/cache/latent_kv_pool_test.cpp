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
  // DeepSeek-V3.2: a 128-value index key per token per layer beside the latent row.
  EXPECT_EQ(LatentKvPool::bytes_per_token(61, 576, KvDtype::BFloat16, 128), 61 * (576 + 128) * 2);
  EXPECT_EQ(LatentKvPool::bytes_per_token(61, 576, KvDtype::Fp8E4m3, 128),
            61 * (576 + 4 + 128 + 4));
}

// Index keys live beside the latent rows: same layers and slots, their own rows, so writing one
// kind leaves the other as it was.
TEST(LatentKvPool, IndexKeysAndLatentRowsKeepTheirOwnValues) {
  const int64_t n_layers = 2, row_dim = 6, index_dim = 4, capacity = 3;
  for (KvDtype dtype : {KvDtype::Float32, KvDtype::BFloat16, KvDtype::Fp8E4m3}) {
    SCOPED_TRACE(kv_dtype_name(dtype));
    LatentKvPool pool(n_layers, row_dim, capacity, dtype, index_dim);
    EXPECT_EQ(pool.index_dim(), index_dim);
    for (int64_t l = 0; l < n_layers; ++l) {
      for (int64_t slot = 0; slot < capacity; ++slot) {
        const std::vector<float> row(row_dim, static_cast<float>(l + 1));
        const std::vector<float> key(index_dim, -static_cast<float>(slot + 1) * 0.5f);
        pool.write_row(l, slot, row.data());
        pool.write_index_key(l, slot, key.data());
      }
    }
    std::vector<float> row(row_dim), key(index_dim);
    for (int64_t l = 0; l < n_layers; ++l) {
      for (int64_t slot = 0; slot < capacity; ++slot) {
        decode_kv_row(pool.layer(l), slot, row.data());
        decode_kv_row(pool.index_keys(l), slot, key.data());
        EXPECT_EQ(row, std::vector<float>(row_dim, static_cast<float>(l + 1)));
        EXPECT_EQ(key, std::vector<float>(index_dim, -static_cast<float>(slot + 1) * 0.5f));
      }
    }
  }
  LatentKvPool without(n_layers, row_dim, capacity, KvDtype::Float32);
  EXPECT_EQ(without.index_dim(), 0);
  EXPECT_THROW(without.index_keys(0), Error);
}

}  // namespace
}  // namespace mlaserve::cache
