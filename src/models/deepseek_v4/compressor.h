// DeepSeek-V4's KV compressor: entry e of a layer summarises the window of positions
// [e·r, e·r + r) by a softmax-gated sum per dim (with overlap, the previous window's tokens are
// candidates too, through the first half of the projections), then RMSNorm and RoPE at e·r.
#pragma once

#include <cstdint>
#include <vector>

#include "models/deepseek_v4/rope.h"
#include "models/deepseek_v4/sequence_cache.h"
#include "models/deepseek_v4/weights.h"

namespace mlaserve::models::deepseek_v4 {

// What a provisional step logs of a compressor (sequence_cache.h's UndoLayer): its state and its
// entries' count after each row (none: not logged).
struct CompressorLog {
  std::vector<CompressorState>* states = nullptr;
  std::vector<int64_t>* counts = nullptr;
};

// Feeds the tokens of positions [first, first + n), those after the ones `state` has seen, and
// appends every entry they complete to `entries` (rows of D). kv and score [n, c·D] are their
// rows' projections by w.wkv and w.wgate (the caller computes them for a whole step); score is
// consumed (the gate's position bias is added in place). With a log, logs every row.
void compress(const CompressorWeights& w, const Rope& rope, float eps, const float* kv,
              float* score, int64_t n, int64_t first, CompressorState& state, PooledRows& entries,
              CompressorLog log = {});

}  // namespace mlaserve::models::deepseek_v4
