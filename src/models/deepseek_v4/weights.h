// DeepSeek-V4's weights as one rank holds them (its share under the layout: sharding.h; the shapes
// below are whole tensors'). Shapes use
// H = hidden, hc = hc_mult, nh = heads, d = head_dim, D = a compressor's entry width.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/ops.h"

namespace mlaserve::models::deepseek_v4 {

// One hyper-connection mixing point (hc_attn_*, hc_ffn_*, or the head's).
struct HcWeights {
  kernels::Weight fn;        // [mixes, hc * H] float32: mixes = 2 hc + hc² (hc for the head)
  std::vector<float> base;   // [mixes]
  std::vector<float> scale;  // [3] (pre, post, comb); [1] for the head
};

// A compressor: one entry of width D per `ratio` tokens, a softmax-gated sum over its window
// (and, with overlap, the previous window's tokens too).
struct CompressorWeights {
  int64_t ratio = 0, dim = 0;  // ratio 4 or 128; D
  bool overlap = false;        // ratio 4: each entry also reads the previous window
  kernels::Weight wkv, wgate;  // [c * D, H], c = 2 with overlap, else 1
  std::vector<float> ape;      // [ratio, c * D]: the gate's bias by position in the window
  std::vector<float> norm;     // [D]
  int64_t width() const { return (overlap ? 2 : 1) * dim; }
};

// CSA's lightning indexer: scores each compressed entry for a query; attention reads the top-k.
struct IndexerWeights {
  kernels::Weight wq_b;          // [ih * id, q_lora]
  kernels::Weight weights_proj;  // [ih, H]
  CompressorWeights compressor;  // its own keys, D = index_head_dim
};

struct AttentionWeights {
  kernels::Weight wq_a;               // [q_lora, H]
  std::vector<float> q_norm;          // [q_lora]
  kernels::Weight wq_b;               // [nh * d, q_lora]
  kernels::Weight wkv;                // [d, H]: the token's row, key and value of every head
  std::vector<float> kv_norm;         // [d]
  std::vector<float> sink;            // [nh]: each head's sink logit
  std::vector<kernels::Weight> wo_a;  // per group [o_lora, nh * d / o_groups]
  kernels::Weight wo_b;               // [H, o_groups * o_lora]
  std::optional<CompressorWeights> compressor;  // CSA and HCA layers
  std::optional<IndexerWeights> indexer;        // CSA layers
};

struct ExpertWeights {
  kernels::Weight w1, w3;  // gate, up [I, H]
  kernels::Weight w2;      // down [H, I]
};

struct MoeWeights {
  kernels::Weight gate;          // [E, H] float32
  std::vector<float> bias;       // [E]: score layers' selection bias
  std::vector<int32_t> tid2eid;  // [V, top_k]: hash layers' experts per token id
  std::vector<ExpertWeights> experts;
  std::optional<ExpertWeights> shared;
};

struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;  // [H]
  HcWeights hc_attn, hc_ffn;
  AttentionWeights attn;
  MoeWeights ffn;
};

// The multi-token-prediction block mtp.0: the next token's embedding (enorm, e_proj) added to
// every stream of the main model's last streams (hnorm, h_proj), one layer (layer mtp_layer()),
// and its own hc_head and norm before the shared head.
struct MtpWeights {
  std::vector<float> enorm, hnorm, norm;  // [H]
  kernels::Weight e_proj, h_proj;         // [H, H]
  LayerWeights block;
  HcWeights hc_head;
};

struct V4Weights {
  kernels::Weight embed;  // [V, H]
  std::vector<LayerWeights> layers;
  HcWeights hc_head;
  std::vector<float> norm;        // [H]
  kernels::Weight head;           // [V, H]
  std::optional<MtpWeights> mtp;  // loaded for speculative decoding
  // Everything above: values and scales (and with the kernels' packed copies).
  size_t value_bytes = 0, resident_bytes = 0;
};

}  // namespace mlaserve::models::deepseek_v4
