// Writes an HF-format DeepSeek model directory with random weights: for tests and benchmarks.
#pragma once

#include <cstdint>
#include <filesystem>

#include <nlohmann/json.hpp>

namespace mlaserve::model {

enum class RandomWeightFormat { BF16, FP8, Int4 };

// config: an HF config.json object (validated). Weights are scaled so activations stay O(1)
// through every layer (fan-in scaling, residual branches scaled by 1/sqrt(2 * layers)).
// FP8 stores every Linear inside the layers as F8_E4M3 + 128x128 block scales, as DeepSeek-V3
// checkpoints do; embedding, lm_head, norms and the router stay BF16. Int4 stores the routed
// experts as Kimi-K2-Thinking does: compressed-tensors pack-quantized int4 (group 32, symmetric,
// bf16 scales), everything else BF16 and named in the config's `ignore` list.
void write_random_model(const nlohmann::json& config, const std::filesystem::path& out_dir,
                        uint64_t seed, RandomWeightFormat format);

}  // namespace mlaserve::model
