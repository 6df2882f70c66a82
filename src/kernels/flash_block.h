// Blocked online-softmax attention shared by both MLA attention ops: a group of query rows
// (all heads of one token, or a run of tokens of one head) walks kv rows in blocks of
// kFlashBlock. Per block: scores S = Q·Kᵀ by 4×4 register tiles, the running max/sum update,
// then O = O·correction + P·V by 4-row register tiles. Needs cpu_has_avx512().
#pragma once

#include <cstdint>

#include "core/numeric.h"

namespace mlaserve::kernels {

constexpr int64_t kFlashTile = 4;    // query rows and kv rows per register tile
constexpr int64_t kFlashBlock = 32;  // kv rows per block

inline int64_t round_up_to_tile(int64_t rows) {
  return (rows + kFlashTile - 1) / kFlashTile * kFlashTile;
}

// A group of query rows sharing one kv sequence. rows_padded = round_up_to_tile(n_rows).
// q_b16, when set, holds the same rows rounded to bf16: the scores then come from them and the
// blocks' k_b16 rows by vdpbf16ps (needs cpu_has_avx512_bf16()).
struct FlashQueries {
  int64_t n_rows;
  const float* const* q;   // [rows_padded] q rows of d_qk floats; padding repeats a real row
  const int64_t* row_end;  // [n_rows] row r sees kv rows j < row_end[r] (causal limit)
  int64_t d_qk, d_v;
  float scale;
  const bf16* const* q_b16 = nullptr;  // [rows_padded]
};

// Online-softmax state of a query group: running max and sum of exp per row, and the
// unnormalised output rows. Each array holds rows_padded rows.
struct FlashState {
  float* max;  // [rows_padded]
  float* sum;  // [rows_padded]
  float* out;  // [rows_padded, d_v]
};

// Floats a FlashState over rows_padded rows of d_v needs.
inline int64_t flash_state_floats(int64_t rows_padded, int64_t d_v) {
  return rows_padded * (2 + d_v);
}
FlashState flash_state_at(float* storage, int64_t rows_padded);
void flash_state_reset(const FlashState& state, int64_t rows_padded, int64_t d_v);

// Kv rows [begin, begin + count) of a sequence, count <= kFlashBlock: pointers to rows of d_qk
// (k) and d_v (v) floats, padded to round_up_to_tile(count) entries by repeating a real row.
// k_t, when set, holds the block's k rows transposed: k_t[c * kFlashBlock + j] = k[j][c] for
// every c < d_qk and all kFlashBlock j (zero past count); the scores then come from it.
struct FlashKvBlock {
  int64_t begin = 0, count = 0;
  const float* k[kFlashBlock] = {};
  const float* v[kFlashBlock] = {};
  const bf16* k_b16[kFlashBlock] = {};  // the k rows as bf16, for queries with q_b16
  const float* k_t = nullptr;
};

// Floats of one block's k_t.
inline int64_t flash_block_k_t_floats(int64_t d_qk) {
  return d_qk * kFlashBlock;
}

// Folds one kv block into the state. `next` (may be null) is the block that follows: its k
// rows are prefetched into L2 meanwhile, as a KV cache read once per step comes from DRAM.
void flash_add_block(const FlashQueries& queries, const FlashKvBlock& block,
                     const FlashKvBlock* next, const FlashState& state);

// dst[0, d_v) = softmax-weighted output of one query row whose kv rows were split into
// n_states disjoint parts, each folded into its own state (n_states = 1: out row / sum).
void flash_write_row(const FlashState* states, int64_t n_states, int64_t row, int64_t d_v,
                     float* dst);

}  // namespace mlaserve::kernels
