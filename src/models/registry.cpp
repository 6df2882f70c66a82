#include "models/registry.h"

#include "core/error.h"
#include "model/config_reader.h"
#include "model/deepseek.h"
#include "model/footprint.h"
#include "models/deepseek_v4/footprint.h"
#include "models/deepseek_v4/model.h"

namespace mlaserve::models {

namespace {

void require_mtp_layer(int64_t num_nextn_predict_layers, const std::filesystem::path& model_dir) {
  if (num_nextn_predict_layers == 0) {
    fail("{} has no multi-token-prediction layer (num_nextn_predict_layers is 0)",
         model_dir.string());
  }
}

}  // namespace

bool ModelCard::fp8_checkpoint() const {
  return deepseek ? deepseek->fp8_block_quantized : deepseek_v4->fp8_block_quantized;
}

ModelCard read_model_card(const std::filesystem::path& model_dir) {
  const auto path = model_dir / "config.json";
  const nlohmann::json j = model::read_json_file(path);
  ModelCard card;
  if (j.is_object() && j.value("model_type", nlohmann::json()) == "deepseek_v4") {
    card.family = Family::DeepseekV4;
    auto& c = card.deepseek_v4.emplace(deepseek_v4::V4Config::from_json(j, path.string()));
    model::add_generation_eos_ids(model_dir, c.eos_token_ids);
    card.info = model::model_info("deepseek_v4", c);
    return card;
  }
  auto& c = card.deepseek.emplace(model::ModelConfig::from_json(j, path.string()));
  model::add_generation_eos_ids(model_dir, c.eos_token_ids);
  card.info = model::model_info(c.model_type, c);
  return card;
}

std::unique_ptr<model::Model> load_model(const ModelCard& card,
                                         const std::filesystem::path& model_dir,
                                         const model::WeightFormat& format,
                                         const model::RankLayout& layout, bool with_mtp) {
  if (card.family == Family::DeepseekV4) {
    if (with_mtp) require_mtp_layer(card.deepseek_v4->num_nextn_predict_layers, model_dir);
    return std::make_unique<deepseek_v4::DeepseekV4Model>(model_dir, format, layout, with_mtp);
  }
  return std::make_unique<model::DeepseekModel>(model_dir, format, layout, with_mtp);
}

model::ModelSizing model_sizing(const ModelCard& card, const std::filesystem::path& model_dir,
                                const model::WeightFormat& format, KvDtype kv_dtype,
                                bool with_mtp) {
  if (card.family == Family::DeepseekV4) {
    const deepseek_v4::V4Config& c = *card.deepseek_v4;
    if (with_mtp) require_mtp_layer(c.num_nextn_predict_layers, model_dir);
    return deepseek_v4::sizing(c, model::resolve_weight_format(format, c.fp8_block_quantized),
                               kv_dtype, with_mtp);
  }
  const model::ModelConfig& c = *card.deepseek;
  if (with_mtp) require_mtp_layer(c.num_nextn_predict_layers, model_dir);
  return model::deepseek_sizing(c, model::resolve_weight_format(format, c), kv_dtype,
                                model::stored_fp8_of(model_dir), with_mtp);
}

}  // namespace mlaserve::models
