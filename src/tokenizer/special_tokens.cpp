#include "tokenizer/special_tokens.h"

#include "core/error.h"

namespace mlaserve::tokenizer {
namespace {

using nlohmann::json;

int32_t required_id(const TokenLookup& lookup, std::string_view token, std::string_view why) {
  const std::optional<int32_t> id = lookup(token);
  if (!id) fail("{}: token '{}' is not in the vocabulary", why, token);
  return *id;
}

SpecialTokenIds from_config_flags(const json& config, const TokenLookup& lookup) {
  SpecialTokenIds ids;
  for (const auto& [flag, key, side] : {std::tuple{"add_bos_token", "bos_token", &ids.prefix},
                                        std::tuple{"add_eos_token", "eos_token", &ids.suffix}}) {
    if (!config.value(flag, false)) continue;
    const std::optional<std::string> token = config_token(config, key);
    if (!token) fail("tokenizer_config.json sets {} but has no {}", flag, key);
    side->push_back(required_id(lookup, *token, fmt::format("tokenizer_config.json {}", key)));
  }
  return ids;
}

// TemplateProcessing's "single" template: special tokens around the sequence "A".
void append_template_ids(const json& processor, SpecialTokenIds& ids) {
  const json& special_tokens = processor.at("special_tokens");
  bool after_sequence = false;
  for (const json& item : processor.at("single")) {
    if (item.contains("Sequence")) {
      after_sequence = true;
      continue;
    }
    const std::string name = item.at("SpecialToken").at("id").get<std::string>();
    if (!special_tokens.contains(name)) {
      fail("post_processor TemplateProcessing: special token '{}' is not defined", name);
    }
    auto& side = after_sequence ? ids.suffix : ids.prefix;
    for (const json& id : special_tokens[name].at("ids")) side.push_back(id.get<int32_t>());
  }
}

void append_processor_ids(const json& processor, SpecialTokenIds& ids) {
  if (processor.is_null()) return;
  const std::string type = processor.at("type").get<std::string>();
  if (type == "ByteLevel") return;  // only adjusts offsets
  if (type == "Sequence") {
    for (const json& child : processor.at("processors")) append_processor_ids(child, ids);
  } else if (type == "TemplateProcessing") {
    append_template_ids(processor, ids);
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    ids.prefix.push_back(processor.at("cls").at(1).get<int32_t>());
    ids.suffix.push_back(processor.at("sep").at(1).get<int32_t>());
  } else {
    fail("post_processor type '{}' is not supported", type);
  }
}

}  // namespace

std::optional<std::string> config_token(const json& config, const char* key) {
  if (!config.contains(key) || config[key].is_null()) return std::nullopt;
  const json& value = config[key];
  if (value.is_string()) return value.get<std::string>();
  return value.at("content").get<std::string>();
}

SpecialTokenIds special_token_ids(const json& post_processor, const json& config,
                                  const TokenLookup& lookup) {
  if (config.contains("add_bos_token") || config.contains("add_eos_token")) {
    return from_config_flags(config, lookup);
  }
  SpecialTokenIds ids;
  append_processor_ids(post_processor, ids);
  return ids;
}

}  // namespace mlaserve::tokenizer
