// The scratch of DeepSeek-V4's forward, kept across steps (core/scratch.h) and claimed for the
// largest step at start-up (DeepseekV4Model::reserve_step_buffers), so that a step allocates and
// page-faults nothing and an out-of-memory shows before serving. Sizes are in rows of the step:
// T (this group's new tokens), N (the MoE's rows, every group's), R (rows of logits). What grows
// with a sequence's context instead (its decoded window and entries, the indexer's candidates)
// stays with the attention code.
#pragma once

#include <cstdint>
#include <vector>

namespace mlaserve::models::deepseek_v4 {

struct StepBuffers {
  // The residual streams [T, hc, H], the sublayers' input and output [T, H], the embedding's
  // lookups [T, H].
  std::vector<float> streams, x, y, embedded;
  // Each row's RoPE angles at its position, in the window-only layers' base and the compressing
  // layers' (every layer of a kind reads the same).
  std::vector<float> window_angles, compress_angles;
  // Attention: q latents [T, q_lora], q [T, heads, d], rows [T, d], the compressors' and the
  // indexer's projections, index queries and weights, outputs [T, heads, d], the grouped output
  // projection's pieces, a dp_linear token shard.
  std::vector<float> qr, q, kv, compressor_kv, compressor_score, index_kv, index_score, index_q,
      index_w, o, group_in, group_out, z, token_shard;
  // MoE over N rows: the gathered input and partial output [N, H], router logits [N, E], the
  // picks (ids and weights [N, top_k]) grouped by expert, an expert's rows in and out [N, H],
  // its gate and up [N, I_local].
  std::vector<float> moe_in, moe_out, router_logits, pick_weights, expert_x, expert_y, gate, up;
  std::vector<int32_t> pick_ids;
  std::vector<int64_t> expert_begin, expert_next, pick_order;
  // lm_head: the rows of logits [R, H] and this rank's vocabulary block [R, V_local].
  std::vector<float> head_in, head_out;
  // The MTP block's normalised input streams [T, hc, H].
  std::vector<float> mtp_streams;

  size_t bytes() const;
};

}  // namespace mlaserve::models::deepseek_v4
