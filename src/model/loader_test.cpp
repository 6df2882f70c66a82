// Bad model files give clear errors naming the file and tensor (crafted from a good model).
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "model/deepseek.h"
#include "model/random_model.h"
#include "model/safetensors.h"

namespace mlaserve::model {
namespace {

using nlohmann::json;

json tiny_config() {
  std::ifstream in("tests/data/configs/odd-v2-lite.json");
  return json::parse(in);
}

class Loader : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("mlaserve-loader-" + std::to_string(::getpid()));
    write_random_model(tiny_config(), dir_, 1, weight_format());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  virtual RandomWeightFormat weight_format() const { return RandomWeightFormat::BF16; }

  // The tensors of model.safetensors, copied out of the file.
  std::vector<TensorToWrite> read_tensors() const {
    SafetensorsFile file(dir_ / "model.safetensors");
    std::vector<TensorToWrite> tensors;
    for (const auto& [name, t] : file.tensors())
      tensors.push_back({name, t.type, t.shape, std::vector<uint8_t>(t.data, t.data + t.nbytes)});
    return tensors;
  }

  // Rewrites model.safetensors after `edit` changes its tensor list.
  template <typename Edit>
  void rewrite(Edit edit) {
    std::vector<TensorToWrite> tensors = read_tensors();
    edit(tensors);
    write_safetensors(dir_ / "model.safetensors", tensors);
  }

  // Splits model.safetensors into two shards with a model.safetensors.index.json; `edit` may
  // change both shards' tensor lists first.
  template <typename Edit>
  void shard(Edit edit) {
    std::vector<TensorToWrite> first, second;
    for (TensorToWrite& t : read_tensors())
      (first.size() <= second.size() ? first : second).push_back(std::move(t));
    json weight_map = json::object();
    for (const auto& t : first) weight_map[t.name] = kShards[0];
    for (const auto& t : second) weight_map[t.name] = kShards[1];
    edit(first, second);
    std::filesystem::remove(dir_ / "model.safetensors");
    write_safetensors(dir_ / kShards[0], first);
    write_safetensors(dir_ / kShards[1], second);
    std::ofstream(dir_ / "model.safetensors.index.json") << json{{"weight_map", weight_map}}.dump();
  }
  static constexpr const char* kShards[2] = {"model-00001-of-00002.safetensors",
                                             "model-00002-of-00002.safetensors"};

  std::string load_error() {
    try {
      DeepseekModel model(dir_, kernels::WeightType::F32);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  std::filesystem::path dir_;
};

TEST_F(Loader, GoodModelLoads) {
  EXPECT_EQ(load_error(), "");
}

TEST_F(Loader, TruncatedFileNamesFileAndTensor) {
  const auto path = dir_ / "model.safetensors";
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 100);
  const std::string e = load_error();
  EXPECT_NE(e.find("model.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  EXPECT_NE(e.find("tensor '"), std::string::npos) << e;
}

TEST_F(Loader, HeaderLongerThanFile) {
  std::ofstream(dir_ / "model.safetensors", std::ios::binary)
      << std::string("\xff\xff\x00\x00\x00\x00\x00\x00{}", 10);
  EXPECT_NE(load_error().find("model.safetensors: header length"), std::string::npos)
      << load_error();
}

TEST_F(Loader, HeaderNotJson) {
  std::string bytes(8, '\0');
  bytes[0] = 5;
  bytes += "{nope";
  std::ofstream(dir_ / "model.safetensors", std::ios::binary) << bytes;
  EXPECT_NE(load_error().find("model.safetensors: header is not valid JSON"), std::string::npos)
      << load_error();
}

TEST_F(Loader, MissingTensorIsNamed) {
  rewrite([](auto& tensors) {
    std::erase_if(tensors, [](const TensorToWrite& t) {
      return t.name == "model.layers.1.self_attn.kv_b_proj.weight";
    });
  });
  const std::string e = load_error();
  EXPECT_NE(e.find("missing tensor 'model.layers.1.self_attn.kv_b_proj.weight'"), std::string::npos)
      << e;
}

TEST_F(Loader, MissingTensorNamesTheFile) {
  rewrite([](auto& tensors) {
    std::erase_if(tensors, [](const TensorToWrite& t) { return t.name == "model.norm.weight"; });
  });
  const std::string e = load_error();
  EXPECT_NE(e.find("model.safetensors: missing tensor 'model.norm.weight'"), std::string::npos)
      << e;
}

TEST_F(Loader, ShardedModelLoads) {
  shard([](auto&, auto&) {});
  EXPECT_EQ(load_error(), "");
}

TEST_F(Loader, MissingShardIsNamed) {
  shard([](auto&, auto&) {});
  std::filesystem::remove(dir_ / kShards[1]);
  const std::string e = load_error();
  EXPECT_NE(e.find(std::string("cannot open ") + (dir_ / kShards[1]).string()), std::string::npos)
      << e;
}

TEST_F(Loader, ShardIndexNotJsonIsNamed) {
  shard([](auto&, auto&) {});
  std::ofstream(dir_ / "model.safetensors.index.json") << "{\"weight_map\": ";
  const std::string e = load_error();
  EXPECT_NE(e.find("model.safetensors.index.json: invalid JSON"), std::string::npos) << e;
}

TEST_F(Loader, TensorMissingFromItsShardNamesTheShard) {
  std::string removed;
  shard([&](auto&, auto& second) {
    removed = second.back().name;
    second.pop_back();
  });
  const std::string e = load_error();
  EXPECT_NE(e.find(std::string(kShards[1]) + ": missing tensor '" + removed + "'"),
            std::string::npos)
      << e;
}

TEST_F(Loader, TensorInTwoShardsNamesBoth) {
  shard([](auto& first, auto& second) { second.push_back(first.front()); });
  const std::string e = load_error();
  EXPECT_NE(e.find("appears in both"), std::string::npos) << e;
  EXPECT_NE(e.find(kShards[0]), std::string::npos) << e;
  EXPECT_NE(e.find(kShards[1]), std::string::npos) << e;
}

// FP8 weights need their 128x128 block scales (`<weight>_scale_inv`) of the right shape.
class Fp8Loader : public Loader {
 protected:
  RandomWeightFormat weight_format() const override { return RandomWeightFormat::FP8; }
  static constexpr const char* kScale = "model.layers.1.self_attn.o_proj.weight_scale_inv";
};

TEST_F(Fp8Loader, GoodModelLoads) {
  EXPECT_EQ(load_error(), "");
}

TEST_F(Fp8Loader, MissingBlockScaleIsNamed) {
  rewrite([](auto& tensors) {
    std::erase_if(tensors, [](const TensorToWrite& t) { return t.name == kScale; });
  });
  const std::string e = load_error();
  EXPECT_NE(e.find(std::string("missing tensor '") + kScale + "'"), std::string::npos) << e;
}

TEST_F(Fp8Loader, BlockScaleOfTheWrongShapeIsNamed) {
  rewrite([](auto& tensors) {
    for (auto& t : tensors) {
      if (t.name != kScale) continue;
      t.bytes.insert(t.bytes.end(), t.bytes.begin(), t.bytes.end());  // twice the blocks
      t.shape = {t.shape[0] * 2, t.shape[1]};
    }
  });
  const std::string e = load_error();
  EXPECT_NE(e.find(std::string("block scale '") + kScale + "' must be"), std::string::npos) << e;
}

TEST_F(Loader, ShapeDisagreeingWithConfigIsNamed) {
  rewrite([](auto& tensors) {
    for (auto& t : tensors) {
      if (t.name == "model.layers.2.mlp.experts.3.up_proj.weight")
        t.shape = {t.shape[1], t.shape[0]};
    }
  });
  const std::string e = load_error();
  EXPECT_NE(e.find("'model.layers.2.mlp.experts.3.up_proj.weight' has shape [64, 20]"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("config implies [20, 64]"), std::string::npos) << e;
  EXPECT_NE(e.find("model.safetensors: tensor"), std::string::npos) << e;
}

TEST_F(Loader, UnsupportedDtypeIsNamed) {
  auto path = dir_ / "model.safetensors";
  std::string header = "{\"x\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}";
  std::string bytes(8, '\0');
  bytes[0] = static_cast<char>(header.size());
  std::ofstream(path, std::ios::binary) << bytes << header << "abcd";
  const std::string e = load_error();
  EXPECT_NE(e.find("tensor 'x' has dtype F16"), std::string::npos) << e;
}

// Found reading safetensors_fuzz's harness: a shape whose element count wraps around 2^64
// (here to 0, matching the 0 data bytes) must be refused, not give a tensor whose shape promises
// 2^64 values that are not there.
TEST_F(Loader, ShapeWhoseSizeOverflowsIsNamed) {
  for (const std::string shape : {"[4611686018427387904,4]", "[9223372036854775808]"}) {
    const std::string header =
        "{\"x\":{\"dtype\":\"F32\",\"shape\":" + shape + ",\"data_offsets\":[0,0]}}";
    std::string bytes(8, '\0');
    bytes[0] = static_cast<char>(header.size());
    std::ofstream(dir_ / "model.safetensors", std::ios::binary) << bytes << header;
    const std::string e = load_error();
    EXPECT_NE(e.find("tensor 'x' has a bad shape " + shape), std::string::npos) << e;
  }
}

// Found by safetensors_fuzz: a number beyond double (1e400) in a header is the JSON library's
// out_of_range, which escaped where only its parse_error was caught; the index and config.json
// had the same gap.
TEST_F(Loader, NumberBeyondDoubleIsInvalidJson) {
  const std::string header = "{\"x\":{\"dtype\":\"F32\",\"shape\":[1e400],\"data_offsets\":[0,4]}}";
  std::string bytes(8, '\0');
  bytes[0] = static_cast<char>(header.size());
  std::ofstream(dir_ / "model.safetensors", std::ios::binary) << bytes << header << "abcd";
  EXPECT_NE(load_error().find("model.safetensors: header is not valid JSON"), std::string::npos)
      << load_error();
  std::ofstream(dir_ / "model.safetensors.index.json") << "{\"weight_map\": {\"x\": 1e400}}";
  EXPECT_NE(load_error().find("model.safetensors.index.json: invalid JSON"), std::string::npos)
      << load_error();
  std::ofstream(dir_ / "config.json") << "{\"vocab_size\": 1e400}";
  EXPECT_NE(load_error().find("config.json: invalid JSON"), std::string::npos) << load_error();
}

TEST_F(Loader, UnsupportedConfigKeysAreNamed) {
  auto expect_error = [](json cfg, const std::string& needle) {
    try {
      ModelConfig::from_json(cfg, "config.json");
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const json c = tiny_config();
  auto with = [&](const json& patch) {
    json changed = c;
    for (const auto& [key, value] : patch.items()) changed[key] = value;
    return changed;
  };
  expect_error(with(json({{"model_type", "llama"}})), "model_type 'llama'");
  expect_error(with(json({{"topk_method", "sinkhorn"}})), "topk_method 'sinkhorn'");
  expect_error(with(json({{"scoring_func", "relu"}})), "scoring_func 'relu'");
  expect_error(with(json({{"hidden_act", "gelu"}})), "hidden_act 'gelu'");
  expect_error(with(json({{"hidden_size", "big"}})), "'hidden_size' has the wrong type");
  expect_error(with(json({{"kv_lora_rank", nullptr}})), "missing required key 'kv_lora_rank'");
  expect_error(with(json({{"rope_scaling", {{"type", "linear"}, {"factor", 2.0}}}})),
               "rope_scaling type 'linear'");
  expect_error(with(json({{"quantization_config", {{"quant_method", "awq"}}}})),
               "quant_method 'awq'");
  expect_error(with(json({{"n_group", 3}})), "not divisible by n_group 3");
  expect_error(with(json({{"mlp_bias", true}})), "mlp_bias true");
  expect_error(with(json({{"quantization_config",
                           {{"quant_method", "fp8"}, {"activation_scheme", "static"}}}})),
               "activation_scheme 'static'");
  // Found by config_fuzz: a non-integer eos id threw the JSON library's type_error; an id count
  // beyond int wrapped into a small one.
  expect_error(with(json({{"eos_token_id", {1, "two"}}})), "'eos_token_id' lists \"two\"");
  expect_error(with(json({{"eos_token_id", {1.5}}})), "'eos_token_id' lists 1.5");
  expect_error(with(json({{"num_experts_per_tok", int64_t{1} << 32}})),
               "'num_experts_per_tok' 4294967296 is out of range");
  // Kimi-K2.5 nests its language model's config; its errors name where.
  expect_error(json({{"model_type", "kimi_k25"}}), "kimi_k25 needs a text_config object");
  expect_error(
      json({{"model_type", "kimi_k25"}, {"text_config", with(json({{"model_type", "llama"}}))}}),
      "text_config: model_type 'llama'");
  expect_error(json({{"model_type", "kimi_k25"},
                     {"text_config", with(json({{"model_type", "deepseek_v2"}}))}}),
               "text_config.model_type 'deepseek_v2' is not kimi_k2");
}

// Kimi-K2.5's text_config is read as Kimi-K2's, its tensors found under "language_model.".
TEST_F(Loader, KimiK25ReadsItsLanguageModel) {
  json text = tiny_config();
  text["model_type"] = "kimi_k2";
  const ModelConfig k25 = ModelConfig::from_json(
      {{"model_type", "kimi_k25"}, {"text_config", text}, {"bos_token_id", 0}}, "config.json");
  EXPECT_EQ(k25.model_type, "kimi_k25");
  EXPECT_EQ(k25.tensor_prefix, "language_model.");
  EXPECT_EQ(k25.hidden_size, text["hidden_size"].get<int64_t>());
}

// generation_config.json's eos_token_id (an id or a list) joins config.json's, without repeats;
// a malformed one is an error naming the file.
TEST_F(Loader, GenerationConfigEndTokensJoinTheConfigs) {
  std::ofstream(dir_ / "generation_config.json") << R"({"eos_token_id": [1, 7, 9]})";
  EXPECT_EQ(ModelConfig::load(dir_).eos_token_ids, (std::vector<int64_t>{1, 7, 9}));
  std::ofstream(dir_ / "generation_config.json") << R"({"eos_token_id": 5, "top_p": 0.9})";
  EXPECT_EQ(ModelConfig::load(dir_).eos_token_ids, (std::vector<int64_t>{1, 5}));
  std::ofstream(dir_ / "generation_config.json") << R"({"eos_token_id": "x"})";
  try {
    ModelConfig::load(dir_);
    ADD_FAILURE() << "a string eos_token_id loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("generation_config.json"), std::string::npos) << e.what();
  }
}

// --quantize-lm-head needs a quantization to apply: refused on a dense checkpoint without
// --quantization (its auto is none), taken on an FP8 one (its auto is fp8).
TEST(WeightFormat, QuantizedLmHeadNeedsAQuantization) {
  const WeightFormat lm_head{kernels::WeightType::BF16, Quantization::Auto, true};
  try {
    resolve_weight_format(lm_head, false);
    ADD_FAILURE() << "a dense checkpoint without --quantization took --quantize-lm-head";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--quantization fp8, int8, int4 or mxfp4"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(resolve_weight_format(lm_head, true).quantization, Quantization::Fp8);
  EXPECT_EQ(held_type(resolve_weight_format(lm_head, true), WeightKind::LmHead, true, false),
            kernels::WeightType::FP8);
  EXPECT_EQ(held_type(resolve_weight_format({kernels::WeightType::BF16}, true), WeightKind::LmHead,
                      true, false),
            kernels::WeightType::BF16);
}

}  // namespace
}  // namespace mlaserve::model
