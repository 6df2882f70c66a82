// DeepSeek-V4 (Flash and Pro): the forward of a step's sequences over their caches, read top to
// bottom like DeepSeek's paper and inference code. Each layer:
//   x, post, comb = hc_pre(X)            4 residual streams -> the sublayer's input [T, H]
//   X = hc_post(attention(norm(x)), X)   window + compressed entries (CSA / HCA), MQA with sinks
//   x, post, comb = hc_pre(X)
//   X = hc_post(moe(norm(x)), X)         sqrt-softplus or hash routing, clamped SwiGLU
// then logits = head(norm(hc_head(X))).
// Any rank layout (sharding.h): attention data-parallel over DP groups and tensor-parallel over
// a group's ranks by output groups of heads, the MoE over every rank; what crosses between
// attention and the MoE is the MoE's input and output rows (hidden wide), not the four streams
// (model::StepComm's gather_groups / reduce_to_group). Prefixes are reused from snapshots of
// the caches (kv_store.h). The MTP block (mtp_forward) drafts for speculative decoding from the
// last streams (docs/DESIGN.md, "DeepSeek-V4").
// Activations are float32 between the ops;
// the matmuls round x to bf16 where the weights' format asks it (--dtype).
#pragma once

#include <array>
#include <filesystem>
#include <span>
#include <vector>

#include "model/model.h"
#include "model/sharding.h"
#include "model/weight_loader.h"
#include "models/deepseek_v4/config.h"
#include "models/deepseek_v4/rope.h"
#include "models/deepseek_v4/sequence_cache.h"
#include "models/deepseek_v4/sharding.h"
#include "models/deepseek_v4/step_buffers.h"
#include "models/deepseek_v4/weights.h"

namespace mlaserve::models::deepseek_v4 {

// One sequence's part of a step: its new tokens (the positions after cache->n_tokens).
struct SequenceInput {
  std::span<const int32_t> tokens;
  SequenceCache* cache = nullptr;
};

class DeepseekV4Model : public model::Model {
 public:
  // format.quantization Auto keeps the checkpoint's formats (FP8 blocks, FP4 experts); layout:
  // this rank's place (check_layout refuses one that leaves a rank without a share); with_mtp:
  // the MTP block mtp.0 too (the config must have it).
  DeepseekV4Model(const std::filesystem::path& dir, model::WeightFormat format,
                  const model::RankLayout& layout = model::RankLayout::single(),
                  bool with_mtp = false);

  const V4Config& config() const { return cfg_; }
  SequenceCache new_cache(KvDtype dtype = KvDtype::Float32) const;

  // model::Model: the runtime's steps over a V4KvStore.
  const model::ModelInfo& info() const override { return info_; }
  std::unique_ptr<model::KvStore> new_kv_store(int64_t capacity_tokens,
                                               KvDtype dtype) const override;
  // final_hidden: every row's last streams X [T, hc, H] (before hc_head), what the MTP block
  // reads.
  std::vector<float> forward(const model::StepInput& input, model::KvStore& kv,
                             model::StepComm& comm,
                             std::vector<float>* final_hidden = nullptr) override;
  // The MTP block (DeepSeek's MTPBlock): row i, at position i, reads the token after it t_{i+1}
  // and the streams X_i of the pass before (the main layers', or the previous draft's block
  // output), and gives the logits of t_{i+2}:
  //   X = e_proj(enorm(embed(t_{i+1}))) + h_proj(hnorm(X_i))   on every stream
  //   X = layer mtp_layer()(X)                                 its own KV (kv_store.h)
  //   logits = head(norm(hc_head'(X)))                         its own hc_head and norm
  // head_hidden receives the logit rows' block output X [rows, hc, H] (the next draft's input).
  bool has_mtp() const override { return w_.mtp.has_value(); }
  std::vector<float> mtp_forward(const model::StepInput& input, const float* final_hidden,
                                 model::KvStore& kv, model::StepComm& comm,
                                 std::vector<float>* head_hidden = nullptr) override;
  // Claims the step scratch (step_buffers.h) for steps of up to group_tokens rows, mlp_tokens
  // MoE rows and logit_rows rows of logits; returns the bytes held.
  size_t reserve_step_buffers(int64_t group_tokens, int64_t mlp_tokens,
                              int64_t logit_rows) override;
  size_t weight_value_bytes() const override { return w_.value_bytes; }
  size_t resident_weight_bytes() const override { return w_.resident_bytes; }
  std::string weight_format_description() const override;
  std::vector<std::pair<std::string, double>> flop_counts() const override;

  // One rank alone (tests, tools): runs the sequences' new tokens through the model, adding them
  // to their caches; returns their logits, [all new tokens, vocab] in the order given. The
  // linear layers and the MoE see every sequence's rows at once; attention reads each
  // sequence's own cache.
  std::vector<float> forward(std::span<const SequenceInput> seqs) const;
  std::vector<float> forward(const std::vector<int32_t>& tokens, SequenceCache& cache) const;

 private:
  // The step's rows in order, each sequence's span of them, the RoPE angles of every row (in
  // buf_) and every group's token ids in the MoE's row order.
  struct StepRows;
  StepRows step_rows(std::span<const SequenceInput> seqs, model::StepComm& comm) const;
  // One layer over the step's streams X [n, hc, H], in place: attention, then the MoE, each
  // between hc_pre and hc_post.
  void layer(const LayerWeights& w, int64_t l, const StepRows& step, float* X,
             model::StepComm& comm) const;
  // Every new row's final hidden state (hc_head, then the final norm): [all new tokens, H];
  // streams, if given, receives the last streams X [all new tokens, hc, H].
  std::vector<float> hidden(std::span<const SequenceInput> seqs, model::StepComm& comm,
                            std::vector<float>* streams = nullptr) const;
  // The head's input rows [n, H] of streams X: norm(hc_head(X)).
  std::vector<float> head_input(const HcWeights& hc_head, const std::vector<float>& norm,
                                const float* X, int64_t n) const;
  // head · rows of h ([rows.size(), vocab]; each rank its vocabulary rows, gathered).
  std::vector<float> logits(const std::vector<float>& h, std::span<const int64_t> rows,
                            model::StepComm& comm) const;
  // The embedding rows of tokens, copied into each of the hc streams: X [n, hc, H] (each rank
  // looks up its vocabulary rows, the lookups summed over the attention group).
  void embed_streams(const std::vector<int32_t>& tokens, model::StepComm& comm, float* X) const;
  // The MoE of this group's rows x [n, H] into out [n, H]: every group's rows are gathered, each
  // rank runs its experts' share of all of them, the sums come back to the groups.
  void moe_exchange(const MoeWeights& w, int64_t layer, const float* x,
                    const std::vector<int32_t>& step_tokens, int64_t n, model::StepComm& comm,
                    float* out) const;
  // A sequence's rows of the step: [row, row + n) at positions [first, first + n).
  struct SequenceRows {
    int64_t row, n, first;
    SequenceCache* cache;
  };
  void attention(const LayerWeights& w, int64_t layer, const float* x,
                 std::span<const SequenceRows> seqs, int64_t n, model::StepComm& comm,
                 float* out) const;
  // What a layer's attention computes for all the step's rows before the sequences' parts.
  struct StepProjections {
    float* qr = nullptr;                                          // q latents [n, q_lora]
    float* kv = nullptr;                                          // roped rows [n, d]
    const float* angles = nullptr;                                // RoPE angles per row
    float *compressor_kv = nullptr, *compressor_score = nullptr;  // [n, c·d]
    float *index_kv = nullptr, *index_score = nullptr;            // [n, c·index_head_dim]
    float *index_q = nullptr, *index_w = nullptr;                 // [n, ih, id], [n, ih]
  };
  // One sequence's part of a layer's attention before the queries run: its compressors take
  // its new tokens, its stored rows are decoded into `decoded`, and each of its queries lists
  // the rows it reads (there or in step.kv) into rows[its step row].
  void gather_rows(const AttentionWeights& w, int64_t layer, const SequenceRows& s,
                   const StepProjections& step, std::vector<float>& decoded,
                   std::vector<std::vector<const float*>>& rows) const;
  // The MoE of this rank's experts (or expert slices) over rows x [n, H] with their token ids.
  void moe(const MoeWeights& w, int64_t layer, const float* x, const int32_t* tokens, int64_t n,
           float* out) const;

  // FLOPs by kind of work (2 per multiply-add), for rank reports and tests of the sharding.
  enum class FlopKind {
    Projections,  // the replicated projections (wq_a, wkv, the compressors', the indexer's)
    Queries,      // this rank's heads' queries (wq_b)
    Attention,    // scores and values over the rows each query reads
    Output,       // this rank's output groups (wo_a, wo_b)
    Router,
    Experts,       // the routed experts (or slices) this rank holds
    SharedExpert,  // its slice of the shared expert
    Head,          // its block of the vocabulary
    Mtp,           // the MTP block's e_proj and h_proj
    Count
  };
  // y = x · Wᵀ for m rows, counted as `kind`.
  void linear(FlopKind kind, const float* x, int64_t m, const kernels::Weight& w, float* y) const;
  // One expert (or slice) over rows x [m, H] into out [m, H] (moe.cpp), counted as `kind`.
  void expert_forward(const ExpertWeights& w, const float* x, int64_t m, FlopKind kind,
                      float* out) const;

  const Rope& layer_rope(int64_t layer) const {
    return cfg_.compress_ratio(layer) == 0 ? window_rope_ : compress_rope_;
  }
  // The step's RoPE angles in layer_rope(layer)'s base, a row's angle_floats() apart.
  const float* layer_angles(int64_t layer) const {
    return (cfg_.compress_ratio(layer) == 0 ? buf_.window_angles : buf_.compress_angles).data();
  }

  V4Config cfg_;
  V4Shards shards_;
  int attn_tp_size_;  // ranks of this rank's attention group (dp_linear's token shards)
  model::ModelInfo info_;
  model::WeightFormat format_;
  V4Weights w_;
  Rope window_rope_, compress_rope_;
  mutable StepBuffers buf_;  // the forward's scratch (one forward at a time)
  mutable std::array<double, static_cast<size_t>(FlopKind::Count)> flops_{};
};

}  // namespace mlaserve::models::deepseek_v4
