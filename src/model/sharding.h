// How every weight of the model is split across ranks. This table is the only place that says
// it: the loader (deepseek_load.cpp) takes each tensor's slice from owned_range(), and the
// forward pass takes its head and vocabulary ranges from the same rules. The exchanges in
// parallel/ complete what these splits leave partial (sharding_test.cpp pins the groups they
// assume).
#pragma once

#include <cstdint>
#include <string>

namespace mlaserve::model {

// This rank's place in the parallel layout: tp ranks in all; attention data-parallel over dp
// groups of attn_tp = tp / dp ranks each, numbered DP-major (group = rank / attn_tp), so a
// group's ranks are contiguous.
struct RankLayout {
  int tp_size = 1, tp_rank = 0;
  int dp_size = 1, dp_rank = 0;            // attention DP group of this rank
  int attn_tp_size = 1, attn_tp_rank = 0;  // rank inside its attention group
  bool ep_moe = false;                     // whole experts per rank instead of sliced experts

  static RankLayout single() { return {}; }
};

// Which dimension of a stored tensor is split. Tensors keep the checkpoint's layout: a linear
// layer is [out_features, in_features] (y = x W^T), the embedding and lm_head [vocab, H].
enum class SplitDim {
  None,     // not split: the rank holds the whole tensor
  Rows,     // a block of rows: the rank computes a slice of the outputs, each one complete
  Cols,     // a block of columns: the rank sees a slice of the inputs, so its outputs are
            // partial sums that a reduction over the group completes
  Experts,  // a block of the routed-expert list, each expert whole (EP-MoE)
};

// The ranks a split is spread over.
enum class SplitGroup {
  None,    // not split
  AttnTp,  // the attn_tp ranks of this rank's DP group
  Tp,      // all tp ranks of the model instance
};

struct ShardRule {
  SplitDim dim = SplitDim::None;
  SplitGroup group = SplitGroup::None;
};

// The tensors of a DeepSeek model, by what the table needs to know. Units are what a split
// counts: heads for the attention projections, vocabulary rows, intermediate columns, experts.
enum class WeightKind {
  Embedding,      // model.embed_tokens          [V, H]                    units: vocab rows
  LmHead,         // lm_head                     [V, H]                    units: vocab rows
  QkvA,           // q_a_proj + kv_a_proj_with_mqa, fused [q_lora + kv_lora + rope, H]
                  // (dp_linear splits this GEMM's tokens, never its weight)
  QB,             // q_b_proj (q_proj without q LoRA) [heads * qk_head, q_lora] units: heads
  KvB,            // kv_b_proj                   [heads * (nope + v), kv_lora] units: heads
  O,              // o_proj                      [H, heads * v]            units: heads
  MlpGateUp,      // dense or shared-expert gate_proj, up_proj [I, H] each units: inter columns
  MlpDown,        // dense or shared-expert down_proj [H, I]               units: inter columns
  RoutedExperts,  // which routed experts a rank holds                     units: experts
  ExpertGateUp,   // one routed expert's gate_proj, up_proj [I, H] each    units: inter columns
  ExpertDown,     // one routed expert's down_proj [H, I]                  units: inter columns
  Router,         // mlp.gate [E, H] and its correction bias, kept float32
  MtpProjection,  // the MTP module's eh_proj [H, 2H]
  Indexer,        // V3.2's lightning indexer: wq_b [Hi * Di, q_lora], wk [Di, H],
                  // weights_proj [Hi, H] (dp_linear splits wk's and weights_proj's tokens)
};

// The rule for `kind` under `layout`: routed experts are sliced (TP-MoE) or dealt out whole
// (EP-MoE, layout.ep_moe) over tp.
ShardRule shard_rule(WeightKind kind, const RankLayout& layout);

// The half-open range [begin, end) of `units` equal units that `rank` of `size` owns:
// contiguous blocks, the first units % size ranks one more.
struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};
Range shard_range(int64_t units, int rank, int size);

// The units of a `kind` tensor with `units` units that this rank holds: all of them when the
// rule does not split it, else its block within the rule's group.
Range owned_range(const RankLayout& layout, WeightKind kind, int64_t units);

// A rectangular block of a [rows, cols] tensor.
struct Block {
  int64_t row_begin, rows, col_begin, cols;
};

// One checkpoint tensor as the table sees it: [rows, cols] split in units of unit_size rows or
// columns (a head's rows, one vocabulary row, one intermediate column).
struct SplitTensor {
  std::string name;
  WeightKind kind;
  int64_t rows, cols, unit_size = 1;
};

// The block of t that this rank holds under t.kind's rule (the whole tensor when the rule
// splits the expert list or nothing).
Block owned_block(const RankLayout& layout, const SplitTensor& t);

}  // namespace mlaserve::model
