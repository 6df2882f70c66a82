// DeepSeek-V2/V3/V3.2: Multi-head Latent Attention (with V3.2's DeepSeek Sparse Attention) +
// DeepSeekMoE. The weights of one rank (its shards, per sharding.h) and the forward step over a
// batch of sequences.
#pragma once

#include <array>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/latent_kv_pool.h"
#include "kernels/ops.h"
#include "model/config.h"
#include "model/model.h"
#include "model/rope.h"
#include "model/sharding.h"
#include "model/step_comm.h"
#include "model/weight_loader.h"

namespace mlaserve::model {

// DeepSeek-V3.2's lightning indexer: Hi heads of Di dims score every earlier token for a query;
// MLA then attends to the index_topk best. Whole on every rank (WeightKind::Indexer).
struct IndexerWeights {
  kernels::Weight wq_b;                           // [Hi * Di, q_lora]: queries from the q latent
  kernels::Weight wk;                             // [Di, H]: a token's key, shared by the heads
  std::vector<float> k_norm_weight, k_norm_bias;  // [Di]: the key's LayerNorm
  kernels::Weight weights_proj;                   // [Hi, H]: each head's weight for the query
};

struct AttentionWeights {
  kernels::Weight qkv_a;         // [q_lora + kv_lora + rope, H] fused q_a_proj + kv_a_proj_with_mqa
  std::vector<float> q_a_norm;   // [q_lora]
  kernels::Weight q_b;           // [heads_local * qk_head, q_lora] (q_proj: [.., H] without q LoRA)
  std::vector<float> kv_a_norm;  // [kv_lora]
  kernels::Weight kv_b;          // [heads_local * (nope + v), kv_lora]   normal (prefill) path
  std::vector<kernels::Weight>
      uk;  // per local head [kv_lora, nope]: q_nope -> latent space (absorbed path)
  std::vector<kernels::Weight>
      uv;             // per local head [v, kv_lora]: latent -> value space (absorbed path)
  kernels::Weight o;  // [H, heads_local * v]
  std::optional<IndexerWeights> indexer;  // V3.2 only
};

struct MlpWeights {
  kernels::Weight gate_up;  // [2 * inter_local, H]: gate rows, then up rows
  kernels::Weight down;     // [H, inter_local]
};

struct MoeWeights {
  kernels::Weight router;              // [E, H], float32 always (selection is sensitive)
  std::vector<float> correction_bias;  // [E], noaux_tc only
  int64_t first_local_expert = 0;      // EP-MoE: experts [first, first + experts.size())
  std::vector<MlpWeights> experts;     // this rank's experts (all of them, sliced, under TP-MoE)
  std::optional<MlpWeights> shared;    // n_shared_experts fused into one MLP
};

struct LayerWeights {
  std::vector<float> attn_norm, mlp_norm;  // [H]
  AttentionWeights attn;
  std::optional<MlpWeights> dense;
  std::optional<MoeWeights> moe;
};

// DeepSeek-V3's multi-token-prediction ("next-n") module, stored as layer L = num_hidden_layers:
// from the main model's final-normed hidden state h_i and the next token t_{i+1}, it predicts
// t_{i+2}. Its embedding and head are stored in the checkpoint as copies of the main model's,
// sharded alike (vocabulary rows over the attention group); a copy equal to the main tensor
// byte for byte is not loaded again (DeepSeek-V3: 2 x 1.85 GB in bf16).
struct MtpWeights {
  std::vector<float> enorm, hnorm;      // [H] each: RMSNorm of embed(t_{i+1}) and of h_i
  kernels::Weight eh_proj;              // [H, 2H]: [enorm(embed) ; hnorm(h)] -> the layer's input
  LayerWeights layer;                   // one full decoder layer (its own latent KV cache)
  std::vector<float> head_norm;         // shared_head.norm [H]
  std::optional<kernels::Weight> head;  // shared_head.head [V_local, H]; none: lm_head's
  std::optional<kernels::Weight> embedding;  // embed_tokens [V_local, H]; none: the main one
};

// fn(w) for every kernels::Weight of the layer.
void for_each_weight(LayerWeights& layer, const std::function<void(kernels::Weight&)>& fn);

// A sequence on the absorbed attention path and the row of its first new token in the step.
// sparse: its queries attend to their selections (StepBuffers::selected), not to every key.
struct AbsorbedSequence {
  const SequenceStep* step = nullptr;
  int64_t row = 0;
  bool sparse = false;
};

// Buffers of the forward step, kept from step to step: allocating them per step cost a page
// fault per 4 KB touched, a memset and an munmap per buffer (a fifth of a 512-token prefill's
// CPU time). Each is scratch of the function named beside it; gate_up and act serve both mlp and
// moe, which a layer never runs together.
struct StepBuffers {
  std::vector<float> x, h, attn_out, ffn_in, ffn_h, ffn_out;      // forward
  std::vector<float> qkv_a, token_shard, q, q_latent, latent, o;  // attention
  std::vector<float> c_kv, kv_b, k, v;                            // attend_normal
  std::vector<float> q_absorbed, head_in, head_out, o_latent;     // attend_absorbed
  std::vector<float> index_q, index_k, index_w;                   // select_keys
  std::vector<int32_t> selected, selected_counts;                 // select_keys
  std::vector<int32_t> selected_slots;                            // attend_selected
  std::vector<float> gate_up, act;                                // mlp, moe
  std::vector<float> mtp_in;                                      // mtp_forward
  std::vector<float> router_logits, gates, expert_x, expert_y;    // moe
  std::vector<float> logits_h, logits_shard;                      // logits
  std::vector<int32_t> expert_ids;                                // moe
  std::vector<int64_t> picks, expert_begin, expert_fill;          // moe
  std::vector<kernels::MatmulJob> jobs;
  std::vector<AbsorbedSequence> decodes;  // attention

  size_t bytes() const;  // what the buffers hold (their capacities)
};

// FLOPs this rank spent per layer kind (2 per multiply-add), for tests and benchmarks.
enum class FlopKind {
  QkvA,
  QB,
  KvB,
  Absorb,
  Attention,
  Indexer,  // the indexer's projections and its scores
  O,
  Router,
  Mlp,
  Experts,
  LmHead,
  MtpProjection,  // the MTP module's eh_proj (its decoder layer counts as the kinds above)
  Count
};
const char* flop_kind_name(FlopKind kind);

// DeepSeek-V2/V3's KV store: the latent row (and V3.2's index key) of every token slot.
class LatentKvStore : public KvStore {
 public:
  LatentKvStore(int64_t layers, int64_t row_dim, int64_t capacity, KvDtype dtype,
                int64_t index_key_dim)
      : pool(layers, row_dim, capacity, dtype, index_key_dim) {}
  int64_t capacity_tokens() const override { return pool.capacity(); }
  KvDtype dtype() const override { return pool.dtype(); }
  cache::LatentKvPool pool;
};

class DeepseekModel : public Model {
 public:
  // format.quantization Auto becomes the checkpoint's: fp8 for an FP8 checkpoint, else none.
  // with_mtp: also load the checkpoint's MTP module (an error if its config has none).
  DeepseekModel(const std::filesystem::path& dir, WeightFormat format,
                const RankLayout& layout = RankLayout::single(), bool with_mtp = false);

  const ModelConfig& config() const { return cfg_; }
  const ModelInfo& info() const override { return info_; }
  std::unique_ptr<KvStore> new_kv_store(int64_t capacity_tokens, KvDtype dtype) const override;
  const RankLayout& layout() const { return layout_; }
  int64_t local_heads() const { return heads_.size(); }
  // Weights in memory: their values (scales included), and with the kernels' packed copies.
  size_t weight_value_bytes() const override { return value_bytes_; }
  size_t resident_weight_bytes() const override { return resident_bytes_; }
  const WeightFormat& weight_format() const { return format_; }  // quantization resolved
  // E.g. "fp8 linear layers (128x128 blocks), bfloat16 activations and other weights".
  std::string weight_format_description() const override;
  const std::array<double, static_cast<size_t>(FlopKind::Count)>& flops() const { return flops_; }
  bool has_mtp() const override { return mtp_.has_value(); }
  std::vector<std::pair<std::string, double>> flop_counts() const override;
  // Layers of latent KV cache a pool needs: the decoder layers, and the MTP layer's own.
  int64_t kv_layers() const { return cfg_.num_hidden_layers + (has_mtp() ? 1 : 0); }

  // Runs every layer over the step's tokens, writes their latents into kv, and returns the
  // logits [input.logit_rows.size(), vocab]. Every rank of the layout calls it with its group's
  // input; comm carries the exchanges.
  // final_hidden, if given, receives every row's last hidden state after the final norm
  // ([T, H]: what lm_head reads, and the MTP module's h).
  std::vector<float> forward(const StepInput& input, cache::LatentKvPool& kv, StepComm& comm,
                             std::vector<float>* final_hidden = nullptr);
  std::vector<float> forward(const StepInput& input, KvStore& kv, StepComm& comm,
                             std::vector<float>* final_hidden = nullptr) override;

  // The MTP module over input's rows: row r has the main model's final_hidden h_i of position
  // input.positions[r] = i and input.tokens[r] = t_{i+1}; its latent goes to the MTP layer's KV
  // cache at the row's slot. Returns the logits (for t_{i+2}) of input.logit_rows. Every rank
  // of the layout calls it, as forward(). Needs has_mtp().
  // head_hidden, if given, receives the logit rows' states after the module's final norm
  // ([rows, H]): the h of the next draft step when drafts are chained.
  std::vector<float> mtp_forward(const StepInput& input, const float* final_hidden,
                                 cache::LatentKvPool& kv, StepComm& comm,
                                 std::vector<float>* head_hidden = nullptr);
  std::vector<float> mtp_forward(const StepInput& input, const float* final_hidden, KvStore& kv,
                                 StepComm& comm,
                                 std::vector<float>* head_hidden = nullptr) override;

  // Allocates the step buffers, and the calling thread's matmul scratch, for the largest step
  // the scheduler can plan: up to group_tokens new tokens in this rank's attention group,
  // mlp_tokens in the MLP batch (all groups of the model instance) and logit_rows rows of
  // logits. A server calls it at start-up, so that its memory is claimed before the first
  // request (an out-of-memory shows then, not under load) and stays flat whatever mix of steps
  // follows. Returns step_buffer_bytes(): what they hold.
  size_t reserve_step_buffers(int64_t group_tokens, int64_t mlp_tokens,
                              int64_t logit_rows) override;
  size_t step_buffer_bytes() const;

 private:
  void load(const std::filesystem::path& dir, bool with_mtp);
  void decoder_layer(const LayerWeights& w, int64_t kv_layer, const StepInput& in, float* x,
                     cache::LatentKvPool& kv, StepComm& comm);
  void attention(const AttentionWeights& w, int64_t kv_layer, const StepInput& in, const float* x,
                 cache::LatentKvPool& kv, StepComm& comm, float* out);
  // The indexer's keys of the step's tokens into the cache, and index queries and weights
  // (buf_.index_q, index_w) for every row when `queries`; x is the attention's input.
  void index_projections(const IndexerWeights& w, int64_t layer, const StepInput& in,
                         const float* x, const float* q_latent, bool queries,
                         cache::LatentKvPool& kv, StepComm& comm);
  // Each new query's index_topk cache slots for sequence s (rows [row, row + s.n_new) of the
  // step) into buf_.selected and buf_.selected_counts.
  void select_keys(int64_t layer, const SequenceStep& s, int64_t row,
                   const cache::LatentKvPool& kv);
  // A replicated linear layer on the group's tokens: with dp_linear each rank computes a token
  // shard and the shards are all-gathered (the same rows as every rank computing all of them).
  void replicated_linear(FlopKind kind, const float* x, int64_t T, const kernels::Weight& w,
                         float* y, StepComm& comm);
  void attend_normal(const AttentionWeights& w, const SequenceStep& seq, int64_t selection_row,
                     const float* q, const float* latent, float* o);
  void attend_absorbed(const AttentionWeights& w, std::span<const AbsorbedSequence> seqs,
                       int64_t job_rows, const float* q, const KvRows& kv_layer, float* o);
  void attend_selected(const kernels::AbsorbedAttention& shape, const SequenceStep& s, int64_t row,
                       const float* q_abs, const KvRows& kv_layer, float* o_lat);
  void mlp(const MlpWeights& w, const float* x, int64_t rows, float* out, FlopKind kind);
  void moe(const MoeWeights& w, const float* x, int64_t rows, float* out);
  // Normalises x's rows with norm, then head's vocabulary block, gathered over the group.
  // normed_rows, if given, receives those normalised rows.
  std::vector<float> logits(const float* x, const std::vector<int64_t>& rows,
                            const std::vector<float>& norm, const kernels::Weight& head,
                            StepComm& comm, std::vector<float>* normed_rows = nullptr);
  void linear(FlopKind kind, const float* x, int64_t m, const kernels::Weight& w, float* y);
  void linear_batch(FlopKind kind, std::span<const kernels::MatmulJob> jobs);
  void count_flops(FlopKind kind, int64_t m, const kernels::Weight& w);

  ModelConfig cfg_;
  ModelInfo info_;
  WeightFormat format_;
  RankLayout layout_;
  Range heads_;           // this rank's attention heads (QB, KvB and O split alike)
  Range embedding_rows_;  // this rank's vocabulary rows of the embedding
  RopeTable rope_;
  kernels::Weight embedding_;  // [vocab_local, H]
  std::vector<LayerWeights> layers_;
  std::vector<float> final_norm_;  // [H]
  kernels::Weight lm_head_;        // [vocab_local, H]
  std::optional<MtpWeights> mtp_;
  size_t value_bytes_ = 0, resident_bytes_ = 0;
  std::array<double, static_cast<size_t>(FlopKind::Count)> flops_{};
  StepBuffers buf_;
};

}  // namespace mlaserve::model
