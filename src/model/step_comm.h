// The points where one forward step exchanges data between ranks. The model calls these in the
// same order on every rank; the single-rank implementation moves nothing. parallel/ provides the
// MPI one (DP-attention gather/scatter, vocab-parallel reductions, dp_linear all-gather).
#pragma once

#include <cstdint>
#include <vector>

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

  // lm_head: this rank's logits for its vocab range, [rows, shard] -> logits [rows, vocab].
  virtual void gather_vocab(const float* logits_shard, int64_t rows, int64_t vocab,
                            float* logits) = 0;
};

class SingleRankComm final : public StepComm {
 public:
  void sum_over_attn_tp(float*, int64_t) override {}
  void gather_token_rows(const float* shard, int64_t n_tokens, int64_t width, float* rows) override;
  void attention_to_mlp(const float* attn_partial, float* residual, int64_t n_local, int64_t hidden,
                        std::vector<float>& mlp_input) override;
  void mlp_to_attention(const float* mlp_partial, float* residual, int64_t n_local,
                        int64_t hidden) override;
  void gather_vocab(const float* logits_shard, int64_t rows, int64_t vocab, float* logits) override;
};

}  // namespace mlaserve::model
