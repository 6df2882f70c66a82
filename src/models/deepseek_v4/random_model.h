// Writes a DeepSeek-V4 model directory with random weights in the layout DeepSeek releases
// (tensor names without `model.`, FP8 linear weights with E8M0 block scales when the config
// has quantization_config fp8, FP4 experts when expert_dtype is fp4): for tests and benchmarks.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>

namespace mlaserve::models::deepseek_v4 {

// config: a deepseek_v4 config.json object (validated).
void write_random_model(const nlohmann::json& config, const std::filesystem::path& out_dir,
                        uint64_t seed);

}  // namespace mlaserve::models::deepseek_v4
