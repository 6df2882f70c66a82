// What one rank holds of a model, computed from config.json alone (no weights read): the bytes
// of every weight under a layout and a weight format, exactly as the loader will hold them, and
// the parts a decode step streams. The layout planner (`mlaserve plan`) sizes layouts with it;
// footprint_test and the e2e planner test hold it to the loaded model's own count.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "core/kv_dtype.h"
#include "model/config.h"
#include "model/sharding.h"
#include "model/sizing.h"
#include "model/weight_loader.h"

namespace mlaserve::model {

// Whether the checkpoint stores tensor `name` as FP8 (only asked of an FP8 checkpoint).
using StoredFp8 = std::function<bool(const std::string& name)>;

// DeepSeek-V3's FP8 release: every linear layer inside the layers is FP8; the embedding, lm_head
// and the router are BF16, and so is V3.2's indexer weights_proj. For planning without the
// checkpoint's headers.
bool stored_fp8_by_convention(const std::string& name);

// What the checkpoint in `dir` stores as FP8: its safetensors headers (no weight is read) when
// its files are there, else stored_fp8_by_convention (a config.json downloaded alone).
StoredFp8 stored_fp8_of(const std::filesystem::path& dir);

// Bytes of the values of this rank's weights (FP8/INT8 scales included), by part.
struct RankWeights {
  int64_t embedding = 0;
  int64_t lm_head = 0;
  int64_t attention = 0;  // q_a|kv_a, q_b, kv_b, the per-head W_UK / W_UV, o_proj
  int64_t kv_b = 0;       // of which kv_b: only the prefill path reads it
  int64_t absorbed = 0;   // and W_UK / W_UV: kv_b again, split per head in the compute dtype
                          // for the decode path
  int64_t dense_mlp = 0;  // the first_k_dense_replace layers' MLPs
  int64_t shared_experts = 0;
  int64_t router = 0;  // float32 [E, H] per MoE layer
  int64_t moe_layers = 0;
  int64_t experts_held = 0;  // routed experts per MoE layer on this rank (slices under TP-MoE)
  int64_t expert_bytes = 0;  // one held routed expert (or slice) of one layer
  // oneDNN's blocked copy of every matrix left in float32/bf16 but the embedding (prepare():
  // prefill GEMMs read it, decode GEMVs the row-major values). An estimate: the values' size,
  // without the block padding, which is < 1 % for shapes that are multiples of 64.
  int64_t packed = 0;
  // The multi-token-prediction layer, when loaded (NEXTN speculation): its projection and
  // decoder layer. Its embedding and head are taken to be copies of the main ones, which the
  // loader does not hold twice (DeepSeek-V3's are; a checkpoint whose copies differ holds 2 x
  // [V_local, H] more).
  int64_t mtp = 0;

  int64_t routed_experts() const { return moe_layers * experts_held * expert_bytes; }
  int64_t values() const {
    return embedding + lm_head + attention + dense_mlp + shared_experts + router +
           routed_experts() + mtp;
  }
  int64_t resident() const { return values() + packed; }
};

// `format` must be resolved (resolve_weight_format); stored_fp8 is consulted for an FP8
// checkpoint only. with_mtp: the MTP layer too (RankWeights::mtp).
RankWeights rank_weights(const ModelConfig& cfg, const RankLayout& layout,
                         const WeightFormat& format, const StoredFp8& stored_fp8,
                         bool with_mtp = false);

// Throws when `layout` leaves a rank without a share of the model: heads that do not divide over
// the attention ranks, an MLP or experts narrower than tp, fewer experts than EP ranks.
void check_layout(const ModelConfig& cfg, const RankLayout& layout);

// The planner's view of a DeepSeek-V2/V3 model (sizing.h): rank_weights per layout, and the
// latent KV rows (with V3.2's index keys; the MTP layer's when with_mtp).
ModelSizing deepseek_sizing(const ModelConfig& cfg, const WeightFormat& format, KvDtype kv_dtype,
                            const StoredFp8& stored_fp8, bool with_mtp);

}  // namespace mlaserve::model
