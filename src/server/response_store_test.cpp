// The Responses store keeps the newest responses within its count and byte limits.
#include "server/response_store.h"

#include <gtest/gtest.h>

#include <string>

namespace mlaserve::server {
namespace {

StoredResponse stored(const std::string& text) {
  return {{{"text", text}}, nlohmann::ordered_json::array(), nlohmann::json::array()};
}

TEST(ResponseStore, DropsTheOldestPastItsCount) {
  ResponseStore store(3);
  for (const char* id : {"a", "b", "c", "d"}) store.put(id, stored(id));
  EXPECT_FALSE(store.get("a").has_value());
  EXPECT_EQ(store.get("d")->response["text"], "d");
  EXPECT_TRUE(store.erase("b"));
  EXPECT_FALSE(store.erase("b"));
  store.put("e", stored("e"));
  EXPECT_TRUE(store.get("c") && store.get("d") && store.get("e"));
}

TEST(ResponseStore, DropsTheOldestPastItsBytesButKeepsTheNewest) {
  ResponseStore store(100, 300);
  store.put("a", stored(std::string(100, 'a')));
  store.put("b", stored(std::string(100, 'b')));
  EXPECT_TRUE(store.get("a").has_value());
  store.put("c", stored(std::string(100, 'c')));  // three of ~120 bytes: over 300
  EXPECT_FALSE(store.get("a").has_value());
  EXPECT_TRUE(store.get("b") && store.get("c"));
  store.put("big", stored(std::string(1000, 'x')));  // alone over the limit: kept, alone
  EXPECT_TRUE(store.get("big").has_value());
  EXPECT_FALSE(store.get("b").has_value() || store.get("c").has_value());
  // Replacing an entry counts its new size once.
  store.put("big", stored("small"));
  store.put("d", stored("d"));
  EXPECT_TRUE(store.get("big") && store.get("d"));
}

}  // namespace
}  // namespace mlaserve::server
