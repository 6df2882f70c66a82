// How every weight of the model is split across ranks: declared here, in one table, and
// consumed by the loader. The forward pass never decides sharding itself.
#pragma once

#include <cstdint>
#include <string>

namespace mlaserve::model {

// This rank's place in the parallel layout (research A): tp ranks in all, attention
// data-parallel over dp groups of attn_tp = tp / dp ranks, DP-major contiguous.
struct RankLayout {
  int tp_size = 1, tp_rank = 0;
  int dp_size = 1, dp_rank = 0;            // attention DP group of this rank
  int attn_tp_size = 1, attn_tp_rank = 0;  // rank inside its attention group
  bool ep_moe = false;                     // whole experts per rank instead of sliced experts

  static RankLayout single() { return {}; }
};

// Which dimension of a [rows, cols] weight is split, and over which group.
enum class SplitDim { None, Rows, Cols };
enum class SplitGroup { Replicated, AttnTp, Tp };

struct ShardRule {
  SplitDim dim = SplitDim::None;
  SplitGroup group = SplitGroup::Replicated;
};

// The weight kinds of a DeepSeek layer (HF names without the layer prefix).
enum class WeightKind {
  Embedding,  // model.embed_tokens         [V, H]      vocab-parallel over attn_tp
  LmHead,     // lm_head                    [V, H]      vocab-parallel over attn_tp (dp-lm-head)
  QkvA,  // q_a_proj + kv_a_proj_with_mqa fused [q_lora + kv_lora + rope, H]   replicated (dp_linear
         // shards tokens, not weights)
  QB,    // q_b_proj / q_proj          [heads*qk_head, *] column-parallel over attn_tp (by head)
  KvB,   // kv_b_proj                  [heads*(nope+v), kv_lora] column-parallel over attn_tp (by
         // head)
  O,     // o_proj                     [H, heads*v] row-parallel over attn_tp (by head)
  MlpGateUp,  // dense/shared/expert gate+up [2*I, H]    column-parallel over tp (TP-MoE)
  MlpDown,    // dense/shared/expert down   [H, I]      row-parallel over tp
  Router,     // mlp.gate                   [E, H]      replicated, float32
};

ShardRule shard_rule(WeightKind kind);

// The half-open range [begin, end) of `units` equal units (heads, vocab rows, intermediate
// columns) that `rank` of `size` owns: contiguous blocks, the first units % size ranks one more.
struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};
Range shard_range(int64_t units, int rank, int size);

// This rank's index and count in the group a rule splits over.
struct GroupPosition {
  int rank = 0, size = 1;
};
GroupPosition group_position(const RankLayout& layout, SplitGroup group);

}  // namespace mlaserve::model
