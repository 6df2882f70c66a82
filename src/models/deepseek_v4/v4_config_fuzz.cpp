// libFuzzer harness (fuzz/README.md): an arbitrary config.json through V4Config::from_json and the
// values derived from it. Any JSON must give a V4Config or an mlaserve::Error; any other
// exception escapes and is reported as a crash.
#include <cstdint>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "models/deepseek_v4/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  try {
    using mlaserve::models::deepseek_v4::V4Config;
    const V4Config config = V4Config::from_json(j, "config.json");
    for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
      (void)config.layer_kind(layer);
      (void)config.kv_values_per_token(layer);
      (void)config.compressor_state_floats(layer);
      (void)config.hash_routed(layer);
    }
  } catch (const mlaserve::Error&) {
  }
  return 0;
}
