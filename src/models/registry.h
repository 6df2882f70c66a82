// The model families and how a model directory finds its own: config.json's model_type names
// the family (DeepSeek-V2, V3, V3.2 and Kimi-K2 are one, MLA + DeepSeekMoE, in src/model/;
// DeepSeek-V4 is another, in src/models/deepseek_v4/). The runtime then drives the model
// through model::Model only.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>

#include "model/config.h"
#include "model/model.h"
#include "model/sharding.h"
#include "model/sizing.h"
#include "model/weight_loader.h"
#include "models/deepseek_v4/config.h"

namespace mlaserve::models {

enum class Family {
  DeepseekV3,  // deepseek_v2, deepseek_v3, deepseek_v32, kimi_k2
  DeepseekV4,  // deepseek_v4
};

// What a model directory is, from its config files alone (before any weight is read): its family,
// what the scheduler and server need, and the family's own config.
struct ModelCard {
  Family family = Family::DeepseekV3;
  model::ModelInfo info;
  std::optional<model::ModelConfig> deepseek;  // Family::DeepseekV3
  std::optional<deepseek_v4::V4Config> deepseek_v4;
  bool fp8_checkpoint() const;
};

ModelCard read_model_card(const std::filesystem::path& model_dir);

// Loads this rank's part of the model. with_mtp: also its multi-token-prediction module.
std::unique_ptr<model::Model> load_model(const ModelCard& card,
                                         const std::filesystem::path& model_dir,
                                         const model::WeightFormat& format,
                                         const model::RankLayout& layout, bool with_mtp);

// What `plan` needs of the model to size a layout (model/sizing.h), in `format` (resolved here by
// the family's rule) with KV rows in kv_dtype; with_mtp: the MTP layer too (speculation).
model::ModelSizing model_sizing(const ModelCard& card, const std::filesystem::path& model_dir,
                                const model::WeightFormat& format, KvDtype kv_dtype, bool with_mtp);

}  // namespace mlaserve::models
