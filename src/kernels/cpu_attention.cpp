// The two MLA attention ops on top of flash_block.h.
//
// Absorbed (decode/extend): every head of a query token reads the same latent kv rows (MQA
// with one kv head), so the work item is "all heads of one token × a range of its kv rows":
// each kv block is loaded once and scored against every head. When there are fewer tokens
// than threads (decode), a token's kv range is split into parts whose softmax states are
// merged at the end, so that both cores stream disjoint halves of the cache (not under
// deterministic_kernels(), see parts_per_token). A pool stored as
// bf16 or fp8 is decoded as it is read, a row at a time into a small per-thread tile of float32
// rows (kv_row_as_f32): the cache streams at its stored size and is never copied whole.
//
// Prefill: per head, runs of kQueryRun consecutive tokens walk their causal kv prefix.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/scratch.h"
#include "kernels/avx512_util.h"
#include "kernels/cpu_isa.h"
#include "kernels/flash_block.h"
#include "kernels/gemv.h"
#include "kernels/ops.h"
#include "kernels/parallel.h"
#include "kernels/q8_decode.h"
#include "kernels/reference.h"

namespace mlaserve::kernels {
namespace {

constexpr int64_t kMinRowsPerPart = 128;  // kv rows below which splitting a token costs more
constexpr int64_t kQueryRun = 32;         // prefill query rows per work item
// Multiply-adds (~15-30 µs on one core) below which waking the other threads (~10 µs per
// OpenMP region on this VM) does not pay.
constexpr int64_t kMinParallelMacs = int64_t{1} << 21;

// How many parts to split each query token's kv range into: enough work items for every
// thread twice over (dynamic scheduling evens out the causal imbalance), but parts of at
// least kMinRowsPerPart rows. One under deterministic_kernels(): the merge of the parts' states
// rounds differently from one pass, and the split depends on n_q and the thread count.
int64_t parts_per_token(int64_t n_q, int64_t shortest_range) {
  if (deterministic_kernels()) return 1;
  const int64_t wanted = (2 * omp_get_max_threads() + n_q - 1) / n_q;
  return std::clamp<int64_t>(std::min(wanted, shortest_range / kMinRowsPerPart), 1, wanted);
}

// One kv row for the flash block: k and v as floats, and k as bf16 for queries with q_b16.
struct FlashKvRow {
  const float* k;
  const float* v;
  const bf16* k_b16 = nullptr;
};

// Feeds kv rows [begin, end) to the state block by block. kv_row(j, tile_row) returns the
// FlashKvRow of kv row j; tile_row < 2 * kFlashBlock is the row's place among the two blocks in
// flight, for a kv_row that decodes into a scratch tile: a place is reused only after its block
// was folded in.
// k_t (may be null): the sequence's k rows transposed block by block from row 0, each block
// flash_block_k_t_floats(d_qk) floats (FlashKvBlock::k_t); then begin must be a block boundary.
template <typename KvRow>
void attend_range(const FlashQueries& queries, int64_t begin, int64_t end, KvRow kv_row,
                  const FlashState& state, const float* k_t = nullptr) {
  FlashKvBlock blocks[2];  // the current block and the next one (prefetched meanwhile)
  const auto fill = [&](int64_t b, int64_t start) {
    FlashKvBlock& block = blocks[b];
    block.begin = start;
    block.count = std::min(kFlashBlock, end - start);
    if (k_t) block.k_t = k_t + start / kFlashBlock * flash_block_k_t_floats(queries.d_qk);
    for (int64_t j = 0; j < block.count; ++j) {
      const FlashKvRow row = kv_row(start + j, b * kFlashBlock + j);
      block.k[j] = row.k;
      block.v[j] = row.v;
      block.k_b16[j] = row.k_b16;
    }
    for (int64_t j = block.count; j < round_up_to_tile(block.count); ++j) {  // padding
      block.k[j] = block.k[block.count - 1];
      block.v[j] = block.v[block.count - 1];
      block.k_b16[j] = block.k_b16[block.count - 1];
    }
  };
  if (begin < end) fill(0, begin);
  for (int64_t start = begin, current = 0; start < end; start += kFlashBlock, current ^= 1) {
    const bool has_next = start + kFlashBlock < end;
    if (has_next) fill(current ^ 1, start + kFlashBlock);
    flash_add_block(queries, blocks[current], has_next ? &blocks[current ^ 1] : nullptr, state);
  }
}

// dst[0, n) = e4m3fn codes src times the row's scale, the same floats as fp8_e4m3_to_f32(code)
// * scale: the weights' exact code decode (q8_decode.h), widened, then scaled.
MLASERVE_AVX512 void decode_fp8_row(const uint8_t* src, int64_t n, float scale, float* dst) {
  const DecodeTable& table = decode_table(WeightType::FP8);
  const __m512 scale_v = _mm512_set1_ps(scale);
  for (int64_t c = 0; c < n; c += 32) {
    const __m512i v = decode_codes(load_codes(src + c, std::min<int64_t>(32, n - c)), table);
    _mm512_mask_storeu_ps(dst + c, first_lanes16(n - c),
                          _mm512_mul_ps(bf16_to_f32x16(_mm512_castsi512_si256(v)), scale_v));
    if (c + 16 < n) {
      _mm512_mask_storeu_ps(
          dst + c + 16, first_lanes16(n - c - 16),
          _mm512_mul_ps(bf16_to_f32x16(_mm512_extracti64x4_epi64(v, 1)), scale_v));
    }
  }
}

// Kv row j of a sequence (pool row kv_slots[j]) as float32 rows for the flash block: a float32
// pool's own row, else the row decoded into `tile_row` (d_qk floats). Decoding reads the row
// at once, so the row a block ahead (j + kFlashBlock < end) is prefetched into L2 meanwhile,
// as the flash block does itself for float32 rows.
const float* kv_row_as_f32(const KvRows& kv, const int32_t* kv_slots, int64_t j, int64_t end,
                           float* tile_row) {
  if (kv.dtype == KvDtype::Float32) return reinterpret_cast<const float*>(kv.row(kv_slots[j]));
  if (j + kFlashBlock < end) {
    const auto* ahead = reinterpret_cast<const char*>(kv.row(kv_slots[j + kFlashBlock]));
    const int64_t bytes = kv.row_dim * kv_value_bytes(kv.dtype);
    for (int64_t b = 0; b < bytes; b += 64) _mm_prefetch(ahead + b, _MM_HINT_T1);
    _mm_prefetch(ahead + bytes - 1, _MM_HINT_T1);  // the last line when rows are not aligned
  }
  const int64_t slot = kv_slots[j];
  if (kv.dtype == KvDtype::BFloat16) {
    widen_bf16_row(reinterpret_cast<const bf16*>(kv.row(slot)), kv.row_dim, tile_row);
  } else {
    decode_fp8_row(kv.row(slot), kv.row_dim, kv.scales[slot], tile_row);
  }
  return tile_row;
}

// Per-thread arrays describing one query group.
struct GroupScratch {
  std::vector<const float*> q;
  std::vector<const bf16*> q_b16;
  std::vector<int64_t> row_end;
  std::vector<float> state;
};

// Absorbed work item: all heads of token i against its kv rows [begin, end). q_b16: q rounded
// to bf16 (same layout), for the bf16 scores, or null.
void absorbed_part(const AbsorbedAttention& s, const float* q, const bf16* q_b16, const KvRows& kv,
                   const int32_t* kv_slots, int64_t i, int64_t begin, int64_t end,
                   const FlashState& state) {
  const int64_t d_qk = s.d_latent + s.d_rope;
  const int64_t rows_padded = round_up_to_tile(s.n_heads);
  thread_local GroupScratch group;
  // Rows of a stored dtype other than float32 decoded for the two blocks in flight:
  // [2 * kFlashBlock, d_qk] floats, 144 KiB at d_qk = 576, so they stay in L2.
  thread_local std::vector<float> tile;
  if (kv.dtype != KvDtype::Float32) tile.resize(static_cast<size_t>(2 * kFlashBlock * d_qk));
  group.q.resize(static_cast<size_t>(rows_padded));
  group.q_b16.resize(static_cast<size_t>(rows_padded));
  group.row_end.assign(static_cast<size_t>(s.n_heads), end);
  for (int64_t h = 0; h < rows_padded; ++h) {
    const int64_t row = (i * s.n_heads + std::min(h, s.n_heads - 1)) * d_qk;
    group.q[static_cast<size_t>(h)] = q + row;
    group.q_b16[static_cast<size_t>(h)] = q_b16 ? q_b16 + row : nullptr;
  }
  const FlashQueries queries{s.n_heads,
                             group.q.data(),
                             group.row_end.data(),
                             d_qk,
                             s.d_latent,
                             s.scale,
                             q_b16 ? group.q_b16.data() : nullptr};
  flash_state_reset(state, rows_padded, s.d_latent);
  attend_range(
      queries, begin, end,
      [&](int64_t j, int64_t tile_row) {
        const float* row = kv_row_as_f32(kv, kv_slots, j, end, tile.data() + tile_row * d_qk);
        // c_kv, the first d_latent values, is also the value
        return FlashKvRow{row, row,
                          q_b16 ? reinterpret_cast<const bf16*>(kv.row(kv_slots[j])) : nullptr};
      },
      state);
}

// The k rows of every head transposed block by block, [n_heads][blocks][d_qk][kFlashBlock], zero
// past n_tokens: the scores' layout (FlashKvBlock::k_t), and each head's k contiguous instead of
// n_heads·d_qk floats apart, so the blocks stream from memory in order.
void transpose_k(const PrefillAttention& s, const float* k, float* k_t) {
  const int64_t blocks = (s.n_tokens + kFlashBlock - 1) / kFlashBlock;
  const int64_t block_floats = flash_block_k_t_floats(s.d_qk);
  // Parallel from 64 K floats: the attention that follows wakes the threads anyway.
  for_each_item(s.n_heads * blocks, s.n_heads * s.n_tokens * s.d_qk >= (1 << 16),
                [&](int64_t item) {
                  const int64_t h = item / blocks, b = item % blocks;
                  float* dst = k_t + item * block_floats;
                  const int64_t count = std::min(kFlashBlock, s.n_tokens - b * kFlashBlock);
                  for (int64_t j = 0; j < count; ++j) {
                    const float* row = k + ((b * kFlashBlock + j) * s.n_heads + h) * s.d_qk;
                    for (int64_t c = 0; c < s.d_qk; ++c) dst[c * kFlashBlock + j] = row[c];
                  }
                  for (int64_t c = 0; c < s.d_qk && count < kFlashBlock; ++c)
                    std::fill(dst + c * kFlashBlock + count, dst + (c + 1) * kFlashBlock, 0.0f);
                });
}

// Prefill work item: tokens [first, first + rows) of head h, over their causal prefixes; k_t is
// head h's part of transpose_k().
void prefill_run(const PrefillAttention& s, const float* q, const float* k, const float* k_t,
                 const float* v, int64_t h, int64_t first, int64_t rows, float* out) {
  const int64_t rows_padded = round_up_to_tile(rows);
  thread_local GroupScratch group;
  group.q.resize(static_cast<size_t>(rows_padded));
  group.row_end.resize(static_cast<size_t>(rows));
  group.state.resize(static_cast<size_t>(flash_state_floats(rows_padded, s.d_v)));
  for (int64_t r = 0; r < rows_padded; ++r) {
    group.q[static_cast<size_t>(r)] =
        q + ((first + std::min(r, rows - 1)) * s.n_heads + h) * s.d_qk;
  }
  for (int64_t r = 0; r < rows; ++r) group.row_end[static_cast<size_t>(r)] = first + r + 1;
  const FlashQueries queries{rows, group.q.data(), group.row_end.data(), s.d_qk, s.d_v, s.scale};
  const FlashState state = flash_state_at(group.state.data(), rows_padded);
  flash_state_reset(state, rows_padded, s.d_v);
  attend_range(
      queries, 0, first + rows,
      [&](int64_t j, int64_t) {
        return FlashKvRow{k + (j * s.n_heads + h) * s.d_qk, v + (j * s.n_heads + h) * s.d_v};
      },
      state, k_t);
  for (int64_t r = 0; r < rows; ++r) {
    flash_write_row(&state, 1, r, s.d_v, out + ((first + r) * s.n_heads + h) * s.d_v);
  }
}

}  // namespace

bool absorbed_scores_in_bf16(const AbsorbedAttention& s, const KvRows& kv) {
  return s.bf16_activations && kv.dtype == KvDtype::BFloat16 && cpu_has_avx512_bf16() &&
         gemm_path(1) == GemmPath::Bf16Dot;
}

void mla_attention_absorbed(const AbsorbedAttention& s, const float* q, const KvRows& kv,
                            const int32_t* kv_slots, float* out) {
  if (!cpu_has_avx512()) return ref::mla_attention_absorbed(s, q, kv, kv_slots, out);
  if (s.n_q == 0 || s.n_heads == 0) return;
  const int64_t first_visible = s.n_kv - s.n_q + 1;  // kv rows seen by the first token
  const bool parallel =
      s.n_q * s.n_kv * s.n_heads * (2 * s.d_latent + s.d_rope) >= kMinParallelMacs;
  const int64_t parts = parallel ? parts_per_token(s.n_q, first_visible) : 1;
  const int64_t rows_padded = round_up_to_tile(s.n_heads);
  const int64_t state_floats = flash_state_floats(rows_padded, s.d_latent);
  // [n_q, parts] states in the calling thread's buffers. The parallel loops below use them
  // through `states` only: inside them a thread_local name would mean each thread's own copy.
  thread_local std::vector<float> storage;
  thread_local std::vector<FlashState> state_list;
  storage.resize(static_cast<size_t>(s.n_q * parts * state_floats));
  state_list.resize(static_cast<size_t>(s.n_q * parts));
  FlashState* states = state_list.data();
  for (int64_t p = 0; p < s.n_q * parts; ++p) {
    states[p] = flash_state_at(storage.data() + p * state_floats, rows_padded);
  }
  // The bf16 scores' q, rounded once for every part of every token.
  thread_local std::vector<bf16> rounded_q;
  const bf16* q_b16 = nullptr;
  if (absorbed_scores_in_bf16(s, kv)) {
    const int64_t d_qk = s.d_latent + s.d_rope;
    bf16* rounded = take(rounded_q, s.n_q * s.n_heads * d_qk);
    round_rows_to_bf16(q, s.n_q * s.n_heads, d_qk, d_qk, rounded);
    q_b16 = rounded;
  }

  for_each_item(s.n_q * parts, parallel, [&](int64_t item) {
    const int64_t i = item / parts, part = item % parts;
    const int64_t visible = first_visible + i;
    absorbed_part(s, q, q_b16, kv, kv_slots, i, visible * part / parts,
                  visible * (part + 1) / parts, states[item]);
  });
  const int64_t rows = s.n_q * s.n_heads;
  for_ranges(rows, rows * s.d_latent >= (1 << 16), [&](int64_t first, int64_t last) {
    for (int64_t row = first; row < last; ++row) {
      const int64_t i = row / s.n_heads, h = row % s.n_heads;
      flash_write_row(states + i * parts, parts, h, s.d_latent, out + row * s.d_latent);
    }
  });
}

void mla_attention_prefill(const PrefillAttention& s, const float* q, const float* k,
                           const float* v, float* out) {
  if (!cpu_has_avx512()) return ref::mla_attention_prefill(s, q, k, v, out);
  const int64_t runs = (s.n_tokens + kQueryRun - 1) / kQueryRun;
  const int64_t macs = s.n_heads * s.n_tokens * (s.n_tokens + 1) / 2 * (s.d_qk + s.d_v);
  const int64_t head_k_t_floats =
      (s.n_tokens + kFlashBlock - 1) / kFlashBlock * flash_block_k_t_floats(s.d_qk);
  thread_local std::vector<float> k_t_storage;
  float* k_t = take(k_t_storage, s.n_heads * head_k_t_floats);
  transpose_k(s, k, k_t);
  // Head by head, so that a head's k_t and v stay in cache while the threads take its runs;
  // within a head the latest runs first: they see the longest prefixes, so the dynamic schedule
  // ends evenly.
  for_each_item(runs * s.n_heads, macs >= kMinParallelMacs, [&](int64_t item) {
    const int64_t run = runs - 1 - item % runs, h = item / runs;
    const int64_t first = run * kQueryRun;
    prefill_run(s, q, k, k_t + h * head_k_t_floats, v, h, first,
                std::min(kQueryRun, s.n_tokens - first), out);
  });
}

}  // namespace mlaserve::kernels
