// What DeepSeek-V4's weights take in memory, from its config alone (before a weight is read):
// the planner's figure, equal to what the loader holds (deepseek_v4_test pins it).
#pragma once

#include <cstdint>

#include "core/kv_dtype.h"
#include "model/sharding.h"
#include "model/sizing.h"
#include "model/weight_loader.h"
#include "models/deepseek_v4/config.h"

namespace mlaserve::models::deepseek_v4 {

// Bytes of the weights' values and scales (packed copies left out) that the rank at `layout`
// holds in `format` (resolved), for a checkpoint stored as cfg says (FP8 blocks, FP4 experts);
// with_mtp: the MTP block's too.
int64_t weight_value_bytes(const V4Config& cfg, const model::WeightFormat& format,
                           const model::RankLayout& layout = model::RankLayout::single(),
                           bool with_mtp = false);
// The planner's view of V4 (model/sizing.h): each rank's share under a layout (sharding.h), what
// a decode step streams of it, and the KV per token and per running request in kv_dtype (with_mtp:
// the MTP block's weights and KV layer counted).
model::ModelSizing sizing(const V4Config& cfg, const model::WeightFormat& format, KvDtype kv_dtype,
                          bool with_mtp = false);

}  // namespace mlaserve::models::deepseek_v4
