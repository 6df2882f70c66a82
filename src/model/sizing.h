// What `mlaserve plan` needs to know of a model family to size a rank layout, from config.json
// alone: what each rank holds and what a decode step streams of it, and what the KV costs. Each
// family makes one (model/footprint.h for DeepSeek-V2/V3, models/deepseek_v4/footprint.h; the
// registry picks); parallel/layout_planner.h ranks layouts with it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "model/sharding.h"

namespace mlaserve::model {

struct RankSizing {
  int64_t value_bytes = 0;     // weights' values and scales
  int64_t resident_bytes = 0;  // with the kernels' packed copies
  // What a decode step reads once whatever its batch: every weight but the routed experts (and
  // the embedding, of which a step reads a row per token).
  int64_t step_bytes = 0;
  // The routed experts (or expert slices) held: a step reads those its tokens pick.
  int64_t routed_expert_bytes = 0;
};

struct ModelSizing {
  std::string model_type;
  int64_t layers = 0, hidden_size = 0, vocab_size = 0;
  int64_t routed_experts = 0, experts_per_token = 0;
  // KV per token of context, and per running request whatever its length (V4's windows and
  // compressor state, for the request and a prefix snapshot; 0 for MLA's latent rows).
  int64_t kv_bytes_per_token = 0, kv_bytes_per_request = 0;
  // Throws, saying why, when the layout leaves a rank without a share of the model.
  std::function<void(const RankLayout&)> check_layout;
  std::function<RankSizing(const RankLayout&)> rank;
};

}  // namespace mlaserve::model
