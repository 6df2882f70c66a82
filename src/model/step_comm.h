// The points where one forward step exchanges data between ranks. The model calls these in the
// same order on every rank; the single-rank implementation moves nothing. parallel/ provides the
// MPI one (DP-attention gather/scatter, vocab-parallel reductions, dp_linear all-gather).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/scratch.h"
#include "kernels/ops.h"
#include "model/sharding.h"

namespace mlaserve::model {

class StepComm {
 public:
  virtual ~StepComm() = default;

  // Called at the start of every layer (collective checks name the layer).
  virtual void begin_layer(int64_t /*layer*/) {}

  // dp_linear: whether this step computes the replicated q_a/kv_a GEMM on a token shard, which
  // rows of the group's T tokens this rank computes, and the all-gather of the shards.
  virtual bool shard_tokens(int64_t /*n_tokens*/) const { return false; }
  virtual Range token_shard(int64_t n_tokens) const { return {0, n_tokens}; }
  virtual void gather_token_rows(const float* shard, int64_t n_tokens, int64_t width,
                                 float* rows) = 0;

  // Sum a buffer over the attention TP group (vocab-parallel embedding lookup).
  virtual void sum_over_attn_tp(float* data, int64_t count) = 0;

  // Attention -> MLP. attn_partial: this rank's o_proj partial sums [n_local, hidden].
  // Adds the complete attention output into residual [n_local, hidden] and fills mlp_input
  // with the residual rows of every DP group, [n_global, hidden].
  virtual void attention_to_mlp(const float* attn_partial, float* residual, int64_t n_local,
                                int64_t hidden, std::vector<float>& mlp_input) = 0;

  // MLP -> attention. mlp_partial: this rank's partial MLP/MoE output [n_global, hidden].
  // Adds the reduced rows that belong to this rank's group into residual [n_local, hidden].
  virtual void mlp_to_attention(const float* mlp_partial, float* residual, int64_t n_local,
                                int64_t hidden) = 0;

  // The same two exchanges for a residual that is not updated by addition (DeepSeek-V4's
  // hyper-connections mix their streams around each sublayer, so what crosses is the sublayer's
  // input and output, not a residual). gather_groups: this group's complete rows [n_local, width]
  // (the same on each of its ranks) -> every group's rows in the MLP's order, [n_global, width].
  // reduce_to_group: this rank's partial sums of those rows, [n_global, width] -> the complete
  // rows of this rank's group, written to out [n_local, width].
  virtual void gather_groups(const float* local, int64_t n_local, int64_t width,
                             std::vector<float>& all) = 0;
  virtual void reduce_to_group(const float* partial, int64_t n_local, int64_t width,
                               float* out) = 0;

  // lm_head: this rank's logits for its vocab range, [rows, shard] -> logits [rows, vocab].
  virtual void gather_vocab(const float* logits_shard, int64_t rows, int64_t vocab,
                            float* logits) = 0;
};

// dp_linear's rule for a replicated linear layer y [T, out] = x [T, width] · Wᵀ: every rank of
// the group holds W, so when comm shards the step each computes its token shard (`linear(x, rows,
// y)` on rows of x, into the scratch `shard`) and the shards are all-gathered; else every row.
template <typename Linear>
void replicated_linear(StepComm& comm, const float* x, int64_t T, int64_t width, int64_t out,
                       float* y, std::vector<float>& shard, Linear linear) {
  if (!comm.shard_tokens(T)) return linear(x, T, y);
  const Range rows = comm.token_shard(T);
  float* part = take(shard, rows.size() * out);
  linear(x + rows.begin * width, rows.size(), part);
  comm.gather_token_rows(part, T, out, y);
}

// Vocab-parallel embedding lookup x [tokens, H]: each rank of the attention group fills the rows
// of the tokens in its block `rows` of the vocabulary (table holds those rows), zeros for the
// others, and the group sum completes every row. A token outside the vocabulary is an error.
void embed_vocab_parallel(const kernels::Weight& table, Range rows, int64_t vocab,
                          std::span<const int32_t> tokens, float* x, StepComm& comm);

class SingleRankComm final : public StepComm {
 public:
  void sum_over_attn_tp(float*, int64_t) override {}
  void gather_token_rows(const float* shard, int64_t n_tokens, int64_t width, float* rows) override;
  void attention_to_mlp(const float* attn_partial, float* residual, int64_t n_local, int64_t hidden,
                        std::vector<float>& mlp_input) override;
  void mlp_to_attention(const float* mlp_partial, float* residual, int64_t n_local,
                        int64_t hidden) override;
  void gather_groups(const float* local, int64_t n_local, int64_t width,
                     std::vector<float>& all) override;
  void reduce_to_group(const float* partial, int64_t n_local, int64_t width, float* out) override;
  void gather_vocab(const float* logits_shard, int64_t rows, int64_t vocab, float* logits) override;
};

}  // namespace mlaserve::model
