// The compute interface the model calls. Every op has a plain scalar twin in reference.h
// (namespace kernels::ref) with the same signature; ops_test.cpp compares the two on random data.
// A GPU backend would implement this header again. Activations are always float32, row-major.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/kv_dtype.h"
#include "core/numeric.h"
#include "kernels/weight_buffer.h"

namespace mlaserve::kernels {

// F32 and BF16 hold the values themselves. The quantized types hold a code per value and a
// float32 scale per block of values (Weight::at() is code value × scale). 8-bit codes, one
// byte per value:
//  - FP8: e4m3fn codes (core/numeric.h) with the 128×128 block scales of DeepSeek-V3
//    checkpoints;
//  - INT8: symmetric per-output-row int8 in [-127, 127], stored sign-magnitude (bit 7 the sign,
//    bits 0-6 |q|) so that both decode as sign | table[code & 0x7f] in the same kernels.
// 4-bit codes, two per byte (the even column in the low nibble), a scale per group of
// col_block (32, 64 or 128) columns of a row:
//  - INT4: symmetric int4 in [-8, 7] stored offset by 8 (nibble q + 8), as compressed-tensors'
//    pack-quantized checkpoints (Kimi-K2) store them;
//  - MXFP4: OCP e2m1 (sign, 2 exponent bits, 1 mantissa bit: ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}) with
//    a power-of-two scale per 32 values, as DeepSeek-V4 ships its experts.
enum class WeightType { F32, BF16, FP8, INT8, INT4, MXFP4 };

// Whether a weight type holds two 4-bit codes per byte (INT4, MXFP4).
constexpr bool four_bit(WeightType type) {
  return type == WeightType::INT4 || type == WeightType::MXFP4;
}
// Code c of a row of 4-bit codes.
inline uint8_t nibble(const uint8_t* row, int64_t c) {
  return static_cast<uint8_t>(row[c / 2] >> (4 * (c % 2)) & 0xf);
}
constexpr bool quantized_type(WeightType type) {
  return type != WeightType::F32 && type != WeightType::BF16;
}

const char* weight_type_name(WeightType type);

// How the scales of an FP8/INT8 weight cover it. Blocks are col_block columns wide; a shard
// may start inside a checkpoint block, so the first block covers local columns
// [0, col_block - col_phase) and the others follow every col_block columns. Rows map to block
// rows through row_block (fused weights stack tensors whose blocks restart at each one).
struct BlockScales {
  int64_t col_block = 0;      // 128 for FP8, the row length for INT8, the group for 4-bit
  int64_t col_phase = 0;      // in [0, col_block)
  int64_t col_blocks = 0;     // blocks per row: ceil((cols + col_phase) / col_block)
  std::vector<float> scales;  // [block rows, col_blocks]: FP8, INT8, INT4
  // MXFP4's instead: each group's power-of-two scale as its E8M0 byte e, 2^(e - 127), a quarter
  // of a float's bytes (e = 0 reads as 0: a group of 2^-127 is zero to float32 anyway).
  std::vector<uint8_t> exponents;
  bool by_exponent = false;        // MXFP4: the scales are `exponents`
  std::vector<int32_t> row_block;  // [rows]: each row's block row

  size_t blocks() const { return by_exponent ? exponents.size() : scales.size(); }
  void resize(size_t blocks);
  // Block `slot` (a row block's first slot plus j) holds `scale` (for exponents: a power of two).
  void set(size_t slot, float scale);
  // Column block j of row `row`, whatever the storage (inline: the dequantizing GEMM asks per 32
  // columns of every row).
  float scale(int64_t row, int64_t j) const {
    if (!by_exponent) return row_scales(row)[j];
    return std::bit_cast<float>(uint32_t{row_exponents(row)[j]} << 23);
  }
  // A row's scales as floats: row_scales(row), or its exponents decoded into scratch.
  const float* row_values(int64_t row, std::vector<float>& scratch) const;
  const uint8_t* row_exponents(int64_t row) const {
    return exponents.data() + static_cast<size_t>(row_block[static_cast<size_t>(row)] * col_blocks);
  }

  // Local columns [begin, end) of column block j of a row of `cols` values.
  int64_t block_begin(int64_t j) const { return j == 0 ? 0 : j * col_block - col_phase; }
  int64_t block_end(int64_t j, int64_t cols) const {
    return std::min(cols, (j + 1) * col_block - col_phase);
  }
  const float* row_scales(int64_t row) const {
    return scales.data() + static_cast<size_t>(row_block[static_cast<size_t>(row)] * col_blocks);
  }
};

// The value of a code without its scale: an 8-bit code's sign-magnitude decode, a 4-bit
// code's (0-15) value.
float code_value(WeightType type, uint8_t code);

// A linear layer's weight W[rows, cols] (rows = outputs N, cols = inputs K), row-major as in
// HF checkpoints. Fill data via f32()/b16() (or codes() and scales() for FP8/INT8), then call
// prepare() once: the backend may then keep a private copy in its preferred layout (e.g.
// oneDNN blocked) in `packed`.
class Weight {
 public:
  Weight() = default;
  // activations: for FP8/INT8, the precision x is used in (F32: exact products; BF16: x
  // rounded to bf16 as for BF16 weights). F32/BF16 weights ignore it.
  Weight(WeightType type, int64_t rows, int64_t cols, WeightType activations = WeightType::BF16);

  WeightType type() const { return type_; }
  bool quantized() const { return quantized_type(type_); }
  // The precision products are formed in: x rounded to bf16 (BF16) or exact (F32). A F32/BF16
  // weight's own type; an FP8/INT8 weight's `activations`.
  WeightType activations() const { return activations_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  bool empty() const { return rows_ == 0; }
  size_t bytes() const;  // bytes of the values (scales included), without packed_bytes

  float* f32() { return f32_.data(); }
  const float* f32() const { return f32_.data(); }
  bf16* b16() { return b16_.data(); }
  const bf16* b16() const { return b16_.data(); }
  uint8_t* codes() { return codes_.data(); }
  const uint8_t* codes() const { return codes_.data(); }
  // Bytes of codes per row: cols for 8-bit types, cols / 2 for 4-bit ones.
  int64_t code_row_bytes() const { return four_bit(type_) ? cols_ / 2 : cols_; }
  BlockScales& scales() { return scales_; }
  const BlockScales& scales() const { return scales_; }

  // Value of W[r, c] as float, whatever the storage (tests and slow paths); not after
  // drop_row_major().
  float at(int64_t r, int64_t c) const;

  // Frees the row-major values of a BF16 weight whose packed copy serves every product
  // (drop_row_major_if_unneeded); bytes() then counts none, rows() and cols() stay.
  void drop_row_major();
  bool row_major_dropped() const { return row_major_dropped_; }

  std::shared_ptr<void> packed;  // backend-private; null until prepare()
  size_t packed_bytes = 0;       // memory `packed` holds (besides bytes())

 private:
  WeightType type_ = WeightType::F32;
  WeightType activations_ = WeightType::F32;
  int64_t rows_ = 0, cols_ = 0;
  WeightBuffer<float> f32_;
  WeightBuffer<bf16> b16_;
  WeightBuffer<uint8_t> codes_;
  BlockScales scales_;
  bool row_major_dropped_ = false;
};

// Every op runs its scalar reference (reference.h) instead of the fast path, for checking the
// fast path end to end (`--kernels reference`). Set once at start-up, before weights are prepared.
void use_reference_kernels(bool on);

// Every kernel as on a CPU without AVX512_BF16 (AVX-512 F/BW only: Skylake-SP to Ice Lake
// Xeons): bf16 weights widened to f32 in the GEMV and the GEMM, FP8/INT8 ones through f32 panels.
// For testing those paths on any CPU. Set before weights are prepared.
void hide_avx512_bf16(bool on);
// Every kernel as on a CPU with AVX2 but no AVX-512 (AMD Zen 2/3, Intel before Skylake-SP): the
// AVX2 GEMV for float32/bf16 weights, oneDNN for the rest of the matmuls, the scalar reference
// for the other ops. For testing on any CPU. Set before weights are prepared.
void hide_avx512(bool on);

// Batch-invariant kernels (`--enable-deterministic-inference`): every op computes each row of its
// output with one reduction order, whatever the other rows of the call (how many, so which path
// serves the shape), the chunking of a prompt and the thread count. Matmuls of every m go to
// the GEMV kernels (one fp32 accumulator set per x row over the whole of K, never oneDNN, whose
// blocking depends on m) or, without AVX-512 (BF16), to the reference; absorbed attention folds
// a token's kv rows in one pass from row 0 instead of splitting them over threads. The model
// then sends every sequence through the absorbed path (see DeepseekModel::attention), so a
// token's output is the same bits whether it is prefilled, extended or decoded, alone or in a
// batch. Set once at start-up, before weights are prepared (no oneDNN packing is made).
void use_deterministic_kernels(bool on);
bool deterministic_kernels();

// oneDNN's packed copy of each f32 weight, and of bf16 ones on the Bf16Dot path, for the GEMM
// (`--weight-packing`, on by default): the row-major GEMV reads the row-major values, oneDNN and
// (for bf16, up to 128 rows) the packed-copy kernel its blocked layout, so a weight is held
// twice (see packs()) unless its copy serves every product (packed_copy_serves_all), when the
// loader drops the row-major values. Off, oneDNN reads the row-major values
// (as fast at m = 512, slower for the experts' m ≈ 100 of a lone prompt) and the GEMV serves bf16
// weights up to m = 32, where it keeps up with packed oneDNN: half the weight memory. Set once at
// start-up, before weights are prepared.
void use_weight_packing(bool on);
bool weight_packing();

// Bytes of the packed copy prepare() makes of a weight of this type and shape (0: none).
int64_t packed_copy_bytes(WeightType type, int64_t rows, int64_t cols);

// Whether a prepared weight of this type and shape needs no row-major values on this machine:
// every product of it then runs on its packed copy (bf16 weights where the bf16 GEMM path serves
// both shape classes and the copy is in the layout the few-rows kernel reads; never in the
// deterministic or reference modes, whose kernels read the row-major values). The loader then
// drops them, so packing holds a bf16 weight once instead of twice.
bool packed_copy_serves_all(WeightType type, int64_t rows, int64_t cols);

// After prepare(): drops w's row-major values when packed_copy_serves_all() and the copy is
// there. Returns whether it did.
bool drop_row_major_if_unneeded(Weight& w);

// How a GEMM (more rows of x than the GEMV kernels take) multiplies weights whose activations
// are bf16 (BF16 weights; FP8/INT8 with bf16 activations). Which is faster depends on the CPU:
// Zen 4/5 and Intel cores with AMX run vdpbf16ps / AMX tiles at about twice their f32 FMA rate,
// while an Intel core without AMX runs vdpbf16ps at about the rate of two f32 FMAs, so there
// the bf16 path has no compute edge and oneDNN's bf16 kernels measure slower than its f32 ones.
enum class GemmPath {
  Bf16Dot,     // x rounded to bf16, oneDNN bf16 × bf16 → f32 (packed copy of BF16 weights)
  F32Widened,  // panels of weight rows widened to f32 in cache, oneDNN f32 with x as it is
};
const char* gemm_path_name(GemmPath path);

// The path for each class of GEMM shape, by rows of x: a mid-sized GEMM (the experts of a
// decode batch or a short prompt: m < kLargeGemmRows) streams its weight nearly once per call,
// so widening it costs relatively more than in a large one (prefill), which is FMA-bound.
constexpr int64_t kLargeGemmRows = 64;
struct GemmChoice {
  GemmPath mid = GemmPath::Bf16Dot;
  GemmPath large = GemmPath::Bf16Dot;
};
// Set once at start-up, before weights are prepared (`--kernels`, or the measured choice).
// Default Bf16Dot; without AVX512_BF16 both classes are F32Widened whatever was set.
void use_gemm_choice(GemmChoice choice);
GemmChoice gemm_choice();
bool gemm_choice_made();  // use_gemm_choice() was called
GemmPath gemm_path(int64_t m);

// Whether prepare() gives a weight of this type oneDNN's packed copy: f32 weights, and bf16 ones
// while some GEMM class multiplies them in bf16; never under --weight-packing off, the
// reference or the deterministic kernels.
bool packs(WeightType type);

// Called once after a weight is filled (model load). May pack it for the fast path.
void prepare(Weight& w);

// y[m, w.rows()] = x[m, w.cols()] · Wᵀ. Accumulates in float32; with BF16 weights the fast
// path may round x to bfloat16 (what vdpbf16ps / oneDNN bf16 do).
void matmul(const float* x, int64_t m, const Weight& w, float* y);

// One product of a batch: y[m, w->rows()] = x[m, w->cols()] · Wᵀ.
struct MatmulJob {
  const float* x;
  int64_t m;
  const Weight* w;
  float* y;
};

// matmul() of every job. The fast path runs the jobs with few rows of x (decode: a step's
// experts, the per-head absorption matrices) in one parallel pass that streams all their
// weights at once, and the others one after another.
void matmul_batch(std::span<const MatmulJob> jobs);

// Claims the calling thread's scratch for matmul()/matmul_batch() calls whose x operands hold
// up to `rows` rows of up to `cols` columns in all (the rows of a batch's jobs added up), so that
// later calls allocate none; the scratch only grows. matmul_scratch_bytes(): what it holds.
void reserve_matmul_scratch(int64_t rows, int64_t cols);
size_t matmul_scratch_bytes();

// y[r, :] = x[r, :] / sqrt(mean(x[r, :]²) + eps) * gamma, for r < rows. y may alias x.
void rms_norm(const float* x, const float* gamma, int64_t rows, int64_t dim, float eps, float* y);

// out[r, i] = silu(gate_up[r, i]) * gate_up[r, inter + i]; gate_up is [rows, 2*inter]
// (gate and up fused in one GEMM output), out is [rows, inter].
void silu_mul(const float* gate_up, int64_t rows, int64_t inter, float* out);

// In-place softmax over x[0, n).
void softmax(float* x, int64_t n);

// The k-th largest of x[0, n) (1 <= k <= n; NaN counts as -inf), a top-k's threshold, and how
// many values exceed it (so a top-k takes k - greater of those equal to it). On the calling
// thread only.
struct KthLargest {
  float value;
  int64_t greater;
};
KthLargest kth_largest(const float* x, int64_t n, int64_t k);

// The top-p nucleus of weights w[0, n) (each > 0): the smallest set of the heaviest weights
// (equal ones taken in index order) whose sum reaches `target` holds every weight above
// `weight` and the first `equal_taken` of those equal to it. A target above the sum (rounding)
// takes every weight: {0, 0}. On the calling thread only.
struct NucleusBar {
  float weight;
  int64_t equal_taken;
};
NucleusBar nucleus_bar(const float* w, int64_t n, double target);

// The index of the first largest of x[0, n) (n > 0), or of the first NaN where there is one: a
// greedy pick from a row of logits. On the calling thread only.
int64_t first_argmax(const float* x, int64_t n);

// out[i] = e^((logits[i] - max_logit) / temperature) for i < n: a sampler's unnormalised
// softmax at a temperature (temperature > 0), the most likely token weighing exactly 1 where
// max_logit is the row's maximum; -inf logits weigh 0. On the calling thread only (samplers run
// one per kernel thread).
void temperature_weights(const float* logits, int64_t n, float max_logit, float temperature,
                         float* out);

// DeepSeek RoPE on interleaved pairs: for each of n_vectors vectors (stride floats apart),
// (x[2i], x[2i+1]) is rotated by angle theta_i, given as cos_theta[i], sin_theta[i], i < dim/2.
void rope_interleaved(float* x, int64_t n_vectors, int64_t stride, int64_t dim,
                      const float* cos_theta, const float* sin_theta);

// ---- MoE routing (one token at a time) -------------------------------------------------
// SqrtSoftplus: sqrt(softplus(logit)), DeepSeek-V4's scoring.
enum class RouterScoring { Softmax, Sigmoid, SqrtSoftplus };
enum class RouterTopk { Greedy, GroupLimitedGreedy, NoauxTc };

struct RouterSpec {
  RouterScoring scoring = RouterScoring::Softmax;
  RouterTopk method = RouterTopk::Greedy;
  int n_experts = 0;
  int top_k = 0;
  int n_group = 1;
  int topk_group = 1;
  bool norm_topk_prob = false;
  float routed_scaling_factor = 1.0f;
  const float* correction_bias = nullptr;  // [n_experts], noaux_tc only
};

// logits: router logits x·Wgᵀ [n_experts]. Writes top_k expert ids and their combine weights
// (routed_scaling_factor already applied, so the MoE output is Σ w·expert + shared).
void route(const float* logits, const RouterSpec& spec, int32_t* expert_ids, float* weights);
// Hash routing (DeepSeek-V4's first layers pick a token's experts from a table by token id):
// the top_k experts are given; their combine weights are scored, normalised and scaled as
// route()'s would be.
void route_given(const float* logits, const RouterSpec& spec, const int32_t* experts,
                 float* weights);

// ---- DeepSeek Sparse Attention: the lightning indexer (V3.2) ---------------------------------
// LayerNorm with bias (the indexer's k_norm): y = (x - mean) / sqrt(var + eps) * gamma + beta with
// the biased variance, for each of `rows` rows of dim values. y may alias x. One implementation
// serves both paths: it touches index_head_dim values per token, nothing to speed up.
void layer_norm(const float* x, const float* gamma, const float* beta, int64_t rows, int64_t dim,
                float eps, float* y);
// RoPE on half-split pairs, the indexer's layout (MLA rotates interleaved pairs): for each of
// n_vectors vectors (stride floats apart), (x[i], x[i + dim/2]) is rotated by theta_i, i < dim/2.
// Like layer_norm, a single implementation.
void rope_half_split(float* x, int64_t n_vectors, int64_t stride, int64_t dim,
                     const float* cos_theta, const float* sin_theta);
// Each query's index_topk keys. q: [n_q, n_heads, head_dim] index queries (roped); weights:
// [n_q, n_heads] per-head weights with every scale folded in; keys: one layer of the index-key
// cache (rows of head_dim values in the pool's dtype); kv_slots[0, n_kv) the sequence's slots in
// order. Query i sits at position n_kv - n_q + i and sees positions [0, n_kv - n_q + i] (causal),
// scored I[s] = sum_h weights[i, h] * relu(q[i, h] . key[s]). Writes the positions of the top_k
// highest (ties: the earlier position), or of every visible key when there are at most top_k,
// in ascending order into selected[i * top_k ...], and their number into counts[i]. The fast
// path scores keys in blocks and keeps only the best candidates: never an [n_q, n_kv] matrix.
// bf16_activations: the model's activations are bf16. Over a bf16 key cache, where the bf16 dot
// product is this CPU's GEMM path, q is then rounded to bf16 and a prefill's scores come from
// vdpbf16ps (indexer_scores_in_bf16; the reference rounds alike), as the absorbed attention does.
struct IndexerTopk {
  int64_t n_q, n_heads, head_dim, n_kv, top_k;
  bool bf16_activations = false;
};
bool indexer_scores_in_bf16(const IndexerTopk& shape, const KvRows& keys);
void indexer_topk(const IndexerTopk& shape, const float* q, const float* weights,
                  const KvRows& keys, const int32_t* kv_slots, int32_t* selected, int32_t* counts);

// ---- DeepSeek-V4 attention -------------------------------------------------------------
// One query token's heads over a gathered set of MQA rows (DeepSeek-V4: its window's raw rows
// and the compressed entries it reads), each row both key and value, with a sink logit per head
// in the softmax's denominator: out[h] = Σ_j p_hj row_j, p_h = softmax over (scale · q_h · row_j
// for every j) and sink[h] (whose value is 0). q: [n_heads, dim]; rows: n_rows pointers to dim
// floats; out: [n_heads, dim]. With no rows, out is 0.
struct SinkAttention {
  int64_t n_heads, dim, n_rows;
  float scale;
};
void sink_attention(const SinkAttention& shape, const float* q, const float* const* rows,
                    const float* sink, float* out);

// ---- MLA attention ---------------------------------------------------------------------
// Absorbed path (decode and extend over a cached prefix): one KV head of dim d_latent+d_rope.
// q: [n_q, n_heads, d_latent + d_rope] (q_nope already multiplied by W_UK, q_pe roped).
// kv holds one layer of the KV pool, rows of d_latent + d_rope values (normalised c_kv | roped
// k_pe) in its stored dtype, read as such (the fast path decodes each kv block's rows into a
// small per-thread tile, never the whole cache); kv_slots[0, n_kv) are this sequence's rows in
// order. Query i sits at position n_kv - n_q + i and sees kv tokens [0, n_kv - n_q + i] (causal).
// out: [n_q, n_heads, d_latent] = softmax(q·kᵀ·scale)·c_kv.
// bf16_activations: the model's activations are bf16. With a bf16 cache, where the bf16 dot
// product is this CPU's GEMM path (gemm_path), q is then rounded to bf16 and the scores come
// from vdpbf16ps against the stored rows, as every bf16 GEMM rounds its x (absorbed_scores_in_bf16;
// the reference rounds alike). The values stay float32.
struct AbsorbedAttention {
  int64_t n_q, n_heads, d_latent, d_rope, n_kv;
  float scale;
  bool bf16_activations = false;
};
bool absorbed_scores_in_bf16(const AbsorbedAttention& shape, const KvRows& kv);
void mla_attention_absorbed(const AbsorbedAttention& shape, const float* q, const KvRows& kv,
                            const int32_t* kv_slots, float* out);

// Normal path (pure prefill, no cached prefix): per-head causal MHA over the new tokens.
// q, k: [n_tokens, n_heads, d_qk]; v: [n_tokens, n_heads, d_v]; out: [n_tokens, n_heads, d_v].
struct PrefillAttention {
  int64_t n_tokens, n_heads, d_qk, d_v;
  float scale;
};
void mla_attention_prefill(const PrefillAttention& shape, const float* q, const float* k,
                           const float* v, float* out);
// Sparse prefill (DeepSeek Sparse Attention on the normal path): as mla_attention_prefill, but
// token i attends only to the counts[i] positions selected[i * top_k ...] (ascending, each
// < n_tokens; indexer_topk's output), and k and v are head-major: k [n_heads, n_tokens, d_qk],
// v [n_heads, n_tokens, d_v] (q and out as mla_attention_prefill's). No two queries share a
// selection, so the fast path takes one head at a time, whose k and v then stay in cache.
void mla_attention_prefill_sparse(const PrefillAttention& shape, int64_t top_k, const float* q,
                                  const float* k, const float* v, const int32_t* selected,
                                  const int32_t* counts, float* out);

}  // namespace mlaserve::kernels
