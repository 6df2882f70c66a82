// libFuzzer harness (fuzz/README.md): an arbitrary config.json through ModelConfig::from_json and
// the values derived from it. Input that is not JSON stops at the parse (ModelConfig::load turns
// that into an error naming the file); any JSON must give a ModelConfig or an mlaserve::Error,
// and any other exception escapes and is reported as a crash.
#include <cstdint>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  try {
    auto config = mlaserve::model::ModelConfig::from_json(j, "config.json");
    config.add_generation_config(j, "generation_config.json");  // the same bytes as that file
    (void)config.softmax_scale();
    (void)config.kv_cache_dim();
    (void)config.index_key_dim();
    for (int64_t layer = 0; layer < 4; ++layer) (void)config.is_moe_layer(layer);
    // compressed-tensors' `ignore` patterns against the module names a load asks about.
    for (const char* module : {"lm_head", "model.layers.3.self_attn.q_a_proj",
                               "model.layers.1.mlp.experts.17.down_proj", "model.embed_tokens"}) {
      (void)config.stores_int4(module);
    }
  } catch (const mlaserve::Error&) {
  }
  return 0;
}
