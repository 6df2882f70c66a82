// Reads DeepSeek-V4's weights from its HF directory, named and stored as DeepSeek releases them
// (no `model.` prefix; FP8 linear weights with E8M0 block scales, FP4 experts), checking every
// shape against the config.
#pragma once

#include <filesystem>

#include "model/weight_loader.h"
#include "models/deepseek_v4/config.h"
#include "models/deepseek_v4/weights.h"

namespace mlaserve::models::deepseek_v4 {

// This rank's part of the weights under layout (sharding.h). format must be resolved
// (model::resolve_weight_format with the config's FP8 flag). with_mtp: the MTP block mtp.0 too.
V4Weights load_weights(const std::filesystem::path& dir, const V4Config& cfg,
                       const model::WeightFormat& format, const model::RankLayout& layout,
                       bool with_mtp = false);

}  // namespace mlaserve::models::deepseek_v4
