// What DeepSeek-V4's weights take in memory, from its config alone (before a weight is read):
// the planner's figure, equal to what the loader holds (weights_test pins it).
#pragma once

#include <cstdint>

#include "model/weight_loader.h"
#include "models/deepseek_v4/config.h"

namespace mlaserve::models::deepseek_v4 {

// Bytes of the weights' values and scales (packed copies left out) in `format` (resolved), for
// a checkpoint stored as cfg says (FP8 blocks, FP4 experts).
int64_t weight_value_bytes(const V4Config& cfg, const model::WeightFormat& format);
// The bytes one decoded token streams (decode is memory-bound): every weight but the routed
// experts it does not choose, and one row of the embedding table.
int64_t decode_bytes_per_token(const V4Config& cfg, const model::WeightFormat& format);

}  // namespace mlaserve::models::deepseek_v4
