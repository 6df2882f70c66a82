// DeepSeek-V4 over a rank layout: which rule of the shared table (model/sharding.h) each tensor
// follows, and in which units. The loader takes every block through here and the forward its
// ranges, so this is the one place that says how V4 is split:
//   every rank whole: wq_a, wkv, the norms, the compressors, the indexer, the hyper-connections,
//     the router (QkvA's, Indexer's, Router's rules: the single KV row of MQA cannot be split,
//     so each rank of an attention group computes the rows, entries and selection itself;
//     dp_linear splits the tokens of the projections of x instead);
//   attention TP inside a DP group: the heads in units of output groups (QB, O): wq_b's rows,
//     attn_sink, wo_a's groups and wo_b's columns (partial sums, completed over the group);
//   the vocabulary over the group (Embedding, LmHead): embed's rows (partial lookups summed),
//     head's rows (logits gathered);
//   the MoE over all tp ranks: each routed expert's intermediate sliced in blocks of 32 columns
//     (TP-MoE; an FP4 expert's scale group, so every format splits alike) or whole experts dealt
//     out (EP-MoE); the shared expert sliced the same way.
#pragma once

#include <string>

#include "model/sharding.h"
#include "models/deepseek_v4/config.h"

namespace mlaserve::models::deepseek_v4 {

// The ranges of units this rank computes.
struct V4Shards {
  model::Range o_groups;  // attention output groups, with their nh / o_groups heads each
  model::Range vocab;     // rows of embed and head
  model::Range experts;   // routed experts held (all of them under TP-MoE)
  int64_t heads_per_group = 0;
  model::Range heads() const {
    return {o_groups.begin * heads_per_group, o_groups.end * heads_per_group};
  }
};

V4Shards shards(const V4Config& c, const model::RankLayout& layout);

// Refuses a layout that leaves a rank without a share (an output group, a vocabulary row, a
// 32-column block of each expert, an expert), naming the flag that helps.
void check_layout(const V4Config& c, const model::RankLayout& layout);

// The tensors a rule splits, with their units (a name's shape from the config).
model::SplitTensor query_up(const V4Config& c, const std::string& name);     // wq_b
model::SplitTensor output_down(const V4Config& c, const std::string& name);  // wo_b
model::SplitTensor vocab_rows(const V4Config& c, const std::string& name,    // embed, head
                              model::WeightKind kind);
model::SplitTensor expert_up(const V4Config& c, const std::string& name, bool routed);    // w1, w3
model::SplitTensor expert_down(const V4Config& c, const std::string& name, bool routed);  // w2

}  // namespace mlaserve::models::deepseek_v4
