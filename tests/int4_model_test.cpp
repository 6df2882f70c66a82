// 4-bit weights end to end. A Kimi-K2 model made with its routed experts in compressed-tensors'
// pack-quantized int4 (as Kimi-K2-Thinking is released; tests/data/configs/odd-k2.json) against
// the independent float64 forward of tests/reference/deepseek_reference.py, which unpacks the
// codes itself: greedy tokens equal and every step's logits within 1e-4 relative L2 (float32),
// at tp 1, tp 2, under DP attention and with EP. Weights quantized at load (--quantization
// int4 / mxfp4) give the same logits on every layout and stay near the unquantized model's.
// Then the load errors of malformed int4 checkpoints.
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>

#include "support/command.h"
#include "support/files.h"
#include "support/golden.h"

namespace mlaserve::testing {
namespace {

using nlohmann::json;

json prompts() {
  json out = json::array();
  for (int n : {23, 9}) {
    std::vector<int> ids = {0};
    for (int j = 1; j < n; ++j) ids.push_back((n * 37 + j * 13) % 297 + 2);
    out.push_back({{"ids", ids}});
  }
  return out;
}

constexpr int kNewTokens = 8;

std::string make_model(const std::filesystem::path& out, const std::string& dtype) {
  const auto made =
      run_command(mlaserve_bin() + " make-model --config tests/data/configs/odd-k2.json --out " +
                  out.string() + " --seed 21 --dtype " + dtype);
  EXPECT_EQ(made.exit_code, 0) << made.output;
  return out.string();
}

// The made int4 model and its float64 reference, shared by the layouts.
struct MadeInt4Model {
  TempDir tmp;
  json reference;
  MadeInt4Model() {
    make_model(tmp / "model", "int4");
    reference = run_float64_reference(tmp / "model", {{"prompts", prompts()}}, kNewTokens, tmp);
  }
};

const MadeInt4Model& made_int4() {
  static const auto model = std::make_unique<MadeInt4Model>();
  return *model;
}

void expect_steps_near(const json& got, const json& want, double tolerance) {
  ASSERT_EQ(got["greedy_logits"].size(), want["greedy_logits"].size());
  for (size_t s = 0; s < want["greedy_logits"].size(); ++s) {
    const auto g = got["greedy_logits"][s].get<std::vector<float>>();
    const auto w = want["greedy_logits"][s].get<std::vector<float>>();
    ASSERT_EQ(g.size(), w.size());
    EXPECT_LT(relative_l2(g, w.data(), g.size()), tolerance) << "greedy step " << s;
  }
}

class Int4Checkpoint : public ::testing::TestWithParam<std::string> {};

TEST_P(Int4Checkpoint, LogitsAndGreedyTokensEqualTheFloat64Reference) {
  const MadeInt4Model& model = made_int4();
  ASSERT_TRUE(model.reference.contains("prompts")) << "the reference did not run";
  TempDir tmp;
  const json out = run_eval(model.tmp / "model", {{"prompts", prompts()}},
                            "--dtype float32 --step-logits " + GetParam(), tmp, kNewTokens);
  for (size_t i = 0; i < prompts().size(); ++i) {
    SCOPED_TRACE("prompt " + std::to_string(i));
    const json& want = model.reference["prompts"][i];
    for (const json& margin : want["greedy_margins"]) ASSERT_GE(margin.get<double>(), 1e-4);
    EXPECT_EQ(out["prompts"][i]["greedy"], want["greedy"]);
    expect_steps_near(out["prompts"][i], want, 1e-4);
  }
}

std::string layout_name(const std::string& flags) {
  std::string name = flags.empty() ? "tp1" : flags;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Layouts, Int4Checkpoint,
                         ::testing::Values("", "--tp 2",
                                           "--tp 2 --dp 2 --enable-dp-attention --enable-dp-linear",
                                           "--tp 4 --dp 4 --enable-dp-attention --enable-ep-moe"),
                         [](const auto& info) { return layout_name(info.param); });

// --quantization int4 (groups of 32 and 128) and mxfp4 on a bf16 checkpoint: every layout holds
// the same values (groups counted from each tensor's column 0), so the logits agree across
// layouts to float32 rounding; and 4-bit weights move them only a little from the bf16 model's.
TEST(QuantizedAtLoad, FourBitLogitsAgreeAcrossLayoutsAndStayNearTheUnquantizedModel) {
  TempDir tmp;
  const std::string dir = make_model(tmp / "model", "bf16");
  const json input = {{"prompts", prompts()}};
  const json plain = run_eval(dir, input, "--dtype float32 --step-logits", tmp, kNewTokens);
  // Groups of 128 fit no split of this model's 64-column K dimensions: tp 1 only.
  const std::vector<std::string> layouts = {"--tp 2", "--tp 2 --dp 2 --enable-dp-attention"};
  const std::pair<std::string, std::vector<std::string>> cases[] = {
      {"int4", layouts},
      {"int4 --quantization-group-size 128", {}},
      {"mxfp4", layouts},
      {"int4 --quantize-lm-head", {"--tp 2"}}};
  for (const auto& [quantization, others] : cases) {
    SCOPED_TRACE(quantization);
    const std::string flags = "--dtype float32 --step-logits --quantization " + quantization;
    const json alone = run_eval(dir, input, flags, tmp, kNewTokens);
    for (const std::string& layout : others) {
      SCOPED_TRACE(layout);
      const json other = run_eval(dir, input, flags + " " + layout, tmp, kNewTokens);
      for (size_t i = 0; i < prompts().size(); ++i) {
        EXPECT_EQ(other["prompts"][i]["greedy"], alone["prompts"][i]["greedy"]);
        expect_steps_near(other["prompts"][i], alone["prompts"][i], 1e-5);
      }
    }
    // The first step's logits (same prefix for both): near, but not equal (quantized at all).
    const auto q = alone["prompts"][0]["greedy_logits"][0].get<std::vector<float>>();
    const auto p = plain["prompts"][0]["greedy_logits"][0].get<std::vector<float>>();
    const double distance = relative_l2(q, p.data(), p.size());
    EXPECT_GT(distance, 1e-4);
    EXPECT_LT(distance, 0.5);  // random weights: ~0.1-0.35 measured; unrelated logits ~1.4
  }
}

// Kimi-K2.5's layout of the same weights: config.json nests Kimi-K2's config as text_config
// (the quantization config at the top, its ignore list naming modules under "language_model."),
// every tensor is renamed language_model.<name>, and a vision tower's tensors sit beside them.
void write_as_kimi_k25(const std::filesystem::path& k2, const std::filesystem::path& out) {
  std::filesystem::create_directories(out);
  json text = read_json(k2 / "config.json");
  json quantization = text["quantization_config"];
  text.erase("quantization_config");
  for (json& name : quantization["ignore"]) {  // names get the prefix; "re:" patterns match it
    if (!name.get<std::string>().starts_with("re:"))
      name = "language_model." + name.get<std::string>();
  }
  write_json(out / "config.json", {{"architectures", {"KimiK25ForConditionalGeneration"}},
                                   {"model_type", "kimi_k25"},
                                   {"text_config", text},
                                   {"vision_config", {{"hidden_size", 8}}},
                                   {"quantization_config", quantization}});
  std::ifstream in(k2 / "model.safetensors", std::ios::binary);
  uint64_t header_bytes = 0;
  in.read(reinterpret_cast<char*>(&header_bytes), 8);
  std::string header_text(header_bytes, '\0');
  in.read(header_text.data(), static_cast<std::streamsize>(header_bytes));
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const json stored = json::parse(header_text);
  json header = json::object();
  for (auto it = stored.begin(); it != stored.end(); ++it)
    header[it.key() == "__metadata__" ? it.key() : "language_model." + it.key()] = it.value();
  const std::string tower(16, '\x3f');  // 8 bf16 values of a vision tower weight, not read
  header["vision_tower.encoder.blocks.0.wqkv.weight"] = {
      {"dtype", "BF16"}, {"shape", {2, 4}}, {"data_offsets", {data.size(), data.size() + 16}}};
  const std::string out_header = header.dump();
  std::ofstream file(out / "model.safetensors", std::ios::binary);
  const uint64_t out_bytes = out_header.size();
  file.write(reinterpret_cast<const char*>(&out_bytes), 8);
  file << out_header << data << tower;
  for (const char* f : {"tiktoken.model", "tokenizer_config.json", "generation_config.json"}) {
    if (std::filesystem::exists(k2 / f)) std::filesystem::copy_file(k2 / f, out / f);
  }
}

// A Kimi-K2.5 checkpoint serves its language model: the logits and tokens of the same weights
// as Kimi-K2, at tp 1 and under DP attention with EP.
TEST(KimiK25, ItsLanguageModelGivesKimiK2sOutputs) {
  const MadeInt4Model& k2 = made_int4();
  TempDir tmp;
  write_as_kimi_k25(k2.tmp / "model", tmp / "k25");
  const json input = {{"prompts", prompts()}};
  for (const std::string layout : {"", "--tp 4 --dp 2 --enable-dp-attention --enable-ep-moe"}) {
    SCOPED_TRACE(layout);
    TempDir a, b;
    const json want =
        run_eval(k2.tmp / "model", input, "--dtype float32 --step-logits " + layout, a, 4);
    const json got = run_eval(tmp / "k25", input, "--dtype float32 --step-logits " + layout, b, 4);
    ASSERT_FALSE(got.empty());
    for (size_t i = 0; i < prompts().size(); ++i) {
      EXPECT_EQ(got["prompts"][i]["greedy"], want["prompts"][i]["greedy"]);
      expect_steps_near(got["prompts"][i], want["prompts"][i], 1e-6);
    }
  }
}

// Edits a made int4 model, then expects the load to fail naming the field, tensor or layout.
class Int4LoadErrors : public ::testing::Test {
 protected:
  void SetUp() override { make_model(tmp_ / "model", "int4"); }
  void expect_load_error(const std::string& flags, const std::string& message) {
    write_json(tmp_ / "in.json", {{"prompts", {{{"ids", {1, 2, 3}}}}}});
    expect_fails_fast(mlaserve_bin() + " eval --model " + (tmp_ / "model").string() + " --input " +
                          (tmp_ / "in.json").string() + " --output " +
                          (tmp_ / "out.json").string() + " " + flags,
                      60, {message});
  }
  void edit_quantization(const std::function<void(json&)>& edit) {
    json config = read_json(tmp_ / "model/config.json");
    edit(config["quantization_config"]);
    write_json(tmp_ / "model/config.json", config);
  }
  // Overwrites the first 8 bytes of tensor `name`'s data in model.safetensors with `value`.
  void overwrite_int64(const std::string& name, int64_t value) {
    const std::filesystem::path path = tmp_ / "model/model.safetensors";
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    uint64_t header_bytes = 0;
    f.read(reinterpret_cast<char*>(&header_bytes), 8);
    std::string header(header_bytes, '\0');
    f.read(header.data(), static_cast<std::streamsize>(header_bytes));
    const auto begin = json::parse(header)[name]["data_offsets"][0].get<int64_t>();
    f.seekp(8 + static_cast<std::streamoff>(header_bytes) + begin);
    f.write(reinterpret_cast<const char*>(&value), 8);
  }
  TempDir tmp_;
};

TEST_F(Int4LoadErrors, WeightShapeDisagreeingWithTheConfig) {
  overwrite_int64("model.layers.1.mlp.experts.2.up_proj.weight_shape", 65);
  expect_load_error("", "model.layers.1.mlp.experts.2.up_proj.weight_shape' is [65, 96]");
}

TEST_F(Int4LoadErrors, GroupSizeDisagreeingWithTheScales) {
  edit_quantization([](json& q) { q["config_groups"]["group_0"]["weights"]["group_size"] = 64; });
  expect_load_error("", "weight_scale' must be BF16/F32 [64, 2] (group size 64)");
}

TEST_F(Int4LoadErrors, UnsupportedSchemes) {
  edit_quantization([](json& q) { q["quant_method"] = "awq"; });
  expect_load_error("", "quant_method 'awq' is not supported (fp8, compressed-tensors)");
  edit_quantization([](json& q) {
    q["quant_method"] = "compressed-tensors";
    q["format"] = "float-quantized";
  });
  expect_load_error("", "format 'float-quantized' is not supported (pack-quantized)");
  edit_quantization([](json& q) {
    q["format"] = "pack-quantized";
    q["config_groups"]["group_0"]["weights"]["symmetric"] = false;
  });
  expect_load_error("", "are not supported (num_bits 4, type int, symmetric, strategy group)");
}

TEST_F(Int4LoadErrors, ALayoutSplittingAGroup) {
  expect_load_error("--tp 4", "inside a 32-column quantization group: choose a layout");
}

}  // namespace
}  // namespace mlaserve::testing
