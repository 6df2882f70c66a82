// mlaserve make-model: an HF model directory with random weights, for tests and benchmarks.
#include <spdlog/spdlog.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/random_model.h"
#include "models/deepseek_v4/random_model.h"
#include "tools/commands.h"

namespace mlaserve::tools {

namespace {

struct MakeModelOptions {
  std::string config, out, dtype = "bf16", tokenizer;
  uint64_t seed = 0;
};

void copy_tokenizer(const std::filesystem::path& from, const std::filesystem::path& to) {
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
    if (!std::filesystem::exists(from / name)) fail("--tokenizer {}: no {}", from.string(), name);
    std::filesystem::copy_file(from / name, to / name,
                               std::filesystem::copy_options::overwrite_existing);
  }
}

// DeepSeek-V4 as released: --dtype fp8 writes FP8 linear weights with E8M0 block scales and
// FP4 experts (its config says so: quantization_config, expert_dtype); bf16 writes BF16 only.
void make_deepseek_v4(nlohmann::json config, const MakeModelOptions& o) {
  if (o.dtype == "int4") fail("make-model: --dtype int4 is not a deepseek_v4 format (bf16, fp8)");
  config.erase("quantization_config");
  config.erase("expert_dtype");
  if (o.dtype == "fp8") {
    config["quantization_config"] = {{"quant_method", "fp8"},
                                     {"fmt", "e4m3"},
                                     {"scale_fmt", "ue8m0"},
                                     {"activation_scheme", "dynamic"},
                                     {"weight_block_size", {128, 128}}};
    config["expert_dtype"] = "fp4";
  }
  models::deepseek_v4::write_random_model(config, o.out, o.seed);
  if (!o.tokenizer.empty()) copy_tokenizer(o.tokenizer, o.out);
  spdlog::info("make-model: wrote {} (deepseek_v4, {} weights{}, seed {})", o.out, o.dtype,
               o.dtype == "fp8" ? ", FP4 experts" : "", o.seed);
}

void run(const MakeModelOptions& o) {
  std::ifstream in(o.config);
  if (!in) fail("cannot open --config {}", o.config);
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: invalid JSON: {}", o.config, e.what());
  }
  if (config.is_object() && config.value("model_type", "") == "deepseek_v4")
    return make_deepseek_v4(std::move(config), o);
  const auto format = o.dtype == "fp8"    ? model::RandomWeightFormat::FP8
                      : o.dtype == "int4" ? model::RandomWeightFormat::Int4
                                          : model::RandomWeightFormat::BF16;
  model::write_random_model(config, o.out, o.seed, format);
  if (!o.tokenizer.empty()) copy_tokenizer(o.tokenizer, o.out);
  spdlog::info("make-model: wrote {} ({} weights, seed {})", o.out, o.dtype, o.seed);
}

}  // namespace

void add_make_model(CLI::App& app) {
  auto opts = std::make_shared<MakeModelOptions>();
  CLI::App* cmd =
      app.add_subcommand("make-model", "Write an HF model directory with random weights");
  cmd->add_option("--config", opts->config,
                  "HF config.json (deepseek_v2, deepseek_v3, deepseek_v32, kimi_k2 or deepseek_v4)")
      ->required();
  cmd->add_option("--out", opts->out, "Output directory (created if missing)")->required();
  cmd->add_option("--seed", opts->seed, "Random seed; the same seed gives the same weights")
      ->capture_default_str();
  cmd->add_option("--dtype", opts->dtype,
                  "bf16: BF16 weights; fp8: F8_E4M3 + 128x128 block scales like DeepSeek-V3 "
                  "(deepseek_v4: E8M0 scales and FP4 experts, as DeepSeek-V4 ships); "
                  "int4: routed experts in compressed-tensors pack-quantized int4 (group 32, "
                  "bf16 scales) like Kimi-K2-Thinking, the rest BF16")
      ->check(CLI::IsMember({"bf16", "fp8", "int4"}))
      ->capture_default_str();
  cmd->add_option("--tokenizer", opts->tokenizer,
                  "Copy tokenizer.json + tokenizer_config.json from this directory");
  cmd->callback([opts] { run(*opts); });
}

}  // namespace mlaserve::tools
