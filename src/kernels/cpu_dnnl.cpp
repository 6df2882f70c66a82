// oneDNN matmul with weights packed once at load. In oneDNN terms: src x [m, K], weights
// [K, N] (our row-major W[N, K] is that matrix in format "ba"), dst y [m, N] f32.
// One primitive per (m, N, K, type, packed) is created on first use and cached.
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "core/scratch.h"
#include "kernels/avx512_util.h"
#include "kernels/cpu_isa.h"
#include "kernels/dnnl_matmul.h"
#include "kernels/gemv.h"
#include "kernels/parallel.h"
#include "kernels/q4_decode.h"
#include "kernels/q8_decode.h"
#include "kernels/weight_buffer.h"

namespace mlaserve::kernels {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

// Rows of x assumed when asking oneDNN for its preferred weight layout. oneDNN 2.6 picks the
// same layout for every m from 1 to 512, so one packed copy serves all calls.
constexpr int64_t kPackingProbeRows = 128;

struct PackedWeight {
  memory weights;                 // [K, N] in the layout the matmul primitive asked for
  bool bf16_blocked = false;      // that layout is packed_tag(bf16), which gemv_packed_rows reads
  std::shared_ptr<void> storage;  // weights' values (packed_storage)
};

// Packed copies are placed one after another in 2 MB-aligned chunks advised as transparent huge
// pages. A decode step streams each copy once, and most copies are small (an expert's 1 MB):
// alone, each would sit on 4 KB pages, where the stream takes a TLB miss every 4 KB and the
// hardware prefetcher stops at each page end (a 1024 x 512 copy streamed at 24 GB/s that way,
// 28 GB/s in a huge-page chunk). Made in load order, consecutive copies are mostly those a
// step reads one after another. A chunk is freed with the last copy in it.
constexpr size_t kChunkBytes = 32 << 20;
constexpr size_t kCopyAlignment = 4096;

std::shared_ptr<void> packed_storage(size_t bytes) {
  static std::mutex mutex;
  static std::shared_ptr<std::byte> chunk;  // the chunk being filled
  static size_t chunk_bytes = 0, used = 0;
  const std::lock_guard lock(mutex);
  bytes = (bytes + kCopyAlignment - 1) / kCopyAlignment * kCopyAlignment;
  if (chunk == nullptr || used + bytes > chunk_bytes) {
    chunk_bytes = std::max(kChunkBytes, (bytes + kHugePage - 1) / kHugePage * kHugePage);
    chunk.reset(static_cast<std::byte*>(allocate_huge_pages(chunk_bytes)),
                [](std::byte* p) { std::free(p); });
    used = 0;
  }
  std::shared_ptr<void> slice(chunk, chunk.get() + used);  // shares the chunk's ownership
  used += bytes;
  return slice;
}

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// The matmul's data type at m rows: f32 for float32 activations and on the F32Widened path,
// else bf16.
memory::data_type data_type(const Weight& w, int64_t m) {
  return w.activations() == WeightType::F32 || gemm_path(m) == GemmPath::F32Widened
             ? memory::data_type::f32
             : memory::data_type::bf16;
}

const void* weight_data(const Weight& w) {
  return w.type() == WeightType::F32 ? static_cast<const void*>(w.f32())
                                     : static_cast<const void*>(w.b16());
}

// Row-major W[n, k] as oneDNN's weights [k, n].
memory::desc row_major_weight_desc(int64_t n, int64_t k, memory::data_type type) {
  return memory::desc({k, n}, type, Tag::ba);
}

// One product's shape: x[m, k] · weights → y[m, n], rows of y ldy floats apart.
struct Shape {
  int64_t m, n, k;
  memory::data_type type;
  int64_t ldy;
};

memory::desc dst_desc(const Shape& s) {
  return memory::desc({s.m, s.n}, memory::data_type::f32, memory::dims{s.ldy, 1});
}

dnnl::matmul::primitive_desc matmul_desc(const Shape& s, const memory::desc& weights) {
  const memory::desc src({s.m, s.k}, s.type, Tag::ab);
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, dst_desc(s)), cpu_engine());
}

// Key of a cached primitive: m, n, k, data type, packed or row-major weights, ldy.
using PrimitiveKey = std::tuple<int64_t, int64_t, int64_t, memory::data_type, bool, int64_t>;

// Prefill chunk sizes bring ever new m; past this many primitives the map starts over instead
// of growing without bound (oneDNN's own primitive cache still makes recent ones cheap).
constexpr size_t kMaxCachedPrimitives = 1024;

// The primitive for this call's shape, created on first use. Returned by value (a reference-
// counted handle), so clearing the map cannot pull it from under a running call.
dnnl::matmul cached_primitive(const Shape& s, bool packed, const memory::desc& weights) {
  static std::mutex mutex;
  static std::map<PrimitiveKey, dnnl::matmul> primitives;
  const PrimitiveKey key{s.m, s.n, s.k, s.type, packed, s.ldy};
  const std::lock_guard lock(mutex);
  auto it = primitives.find(key);
  if (it == primitives.end()) {
    if (primitives.size() >= kMaxCachedPrimitives) primitives.clear();
    it = primitives.emplace(key, dnnl::matmul(matmul_desc(s, weights))).first;
  }
  return it->second;
}

// x as the matmul's src: f32 used in place; for bf16 rounded into a per-thread buffer.
memory source_memory(const float* x, int64_t m, int64_t k, memory::data_type type) {
  const memory::desc desc({m, k}, type, Tag::ab);
  if (type == memory::data_type::f32) return memory(desc, cpu_engine(), const_cast<float*>(x));
  bf16* rounded = rounded_x_scratch(m * k);
  round_rows_to_bf16(x, m, k, k, rounded);
  return memory(desc, cpu_engine(), rounded);
}

void execute(const Shape& s, const dnnl::matmul& primitive, const memory& source,
             const memory& weights, float* y) {
  thread_local dnnl::stream stream(cpu_engine());
  park_threads();  // oneDNN runs on its own OpenMP team
  primitive.execute(stream, {{DNNL_ARG_SRC, source},
                             {DNNL_ARG_WEIGHTS, weights},
                             {DNNL_ARG_DST, memory(dst_desc(s), cpu_engine(), y)}});
  stream.wait();
}

// Bytes of one panel of weight rows in the matmul's type: the GEMM reads it from the last-level
// cache while the next panel has not been written yet, and the scratch stays bounded whatever the
// weight's size (DeepSeek-V3's dense gate_up is 528 MB in bf16). (Panels of 1-2 MB measured
// 2-3x slower on the GEMM probe's shape: each is one more oneDNN call.)
constexpr int64_t kPanelBytes = 8 << 20;

// oneDNN's packed weight layouts on AVX-512, for [K, N] weights (our W[N, K] transposed): blocks
// of 64 output rows (outermost) by 16 32-bit words of columns, each block word-row-major:
//   f32 (BA16a64b):    element (k, n) at ((n / 64) * ceil(K / 16) + k / 16) * 1024
//                      + (k % 16) * 64 + n % 64 floats;
//   bf16 (BA16a64b2a): pairs of columns share a word: element (k, n) at
//                      ((n / 64) * ceil(K / 32) + k / 32) * 2048 + (k % 32 / 2) * 128
//                      + (n % 64) * 2 + k % 2 bf16 values;
// padding zeroed. Either way a block is 64 rows by 16 words transposed (pack_f32_block,
// pack_bf16_block).
constexpr int64_t kPackedRows = 64, kPackedWords = 16;

Tag packed_tag(memory::data_type type) {
  return type == memory::data_type::f32 ? Tag::BA16a64b : Tag::BA16a64b2a;
}

// Columns of a row in one 16-word block.
int64_t block_cols(memory::data_type type) {
  return type == memory::data_type::f32 ? kPackedWords : 2 * kPackedWords;
}

// 16 rows of 16 floats transposed in registers: t[c] lane r = v[r] lane c.
MLASERVE_AVX512 inline void transpose16(__m512 (&v)[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // rows i..i+3: column c of each 4-lane group into v[i + c]
    const __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 1]);
    const __m512d c = _mm512_castps_pd(t[i + 2]), d = _mm512_castps_pd(t[i + 3]);
    v[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    v[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    v[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    v[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int i = 0; i < 16; i += 8) {
    for (int j = 0; j < 4; ++j) {
      t[i + j] = _mm512_shuffle_f32x4(v[i + j], v[i + j + 4], 0x88);
      t[i + j + 4] = _mm512_shuffle_f32x4(v[i + j], v[i + j + 4], 0xdd);
    }
  }
  for (int i = 0; i < 8; ++i) {
    v[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    v[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
  }
}

// Columns [k0, k0 + count) of the rows of a quantized weight (count <= 32): which scale block
// each column is in. A run of 32 columns meets at most two (blocks are 128 wide, and may start
// anywhere: col_phase). The same for every row, so worked out once per column run.
struct ColumnRun {
  int64_t k0, count;  // count clipped to the row's end
  int64_t block;      // scale block of column k0
  __mmask32 next;     // lanes in block + 1
};

ColumnRun column_run(const Weight& w, int64_t k0, int64_t count) {
  const BlockScales& s = w.scales();
  ColumnRun run{k0, std::min(count, w.cols() - k0), (k0 + s.col_phase) / s.col_block, 0};
  const int64_t next_block = s.block_end(run.block, w.cols());  // its first column
  if (next_block < k0 + run.count) run.next = ~first_lanes32(next_block - k0);
  return run;
}

// The decode table of a quantized weight: 8-bit codes' or 4-bit codes'.
struct CodeTable {
  const DecodeTable* bytes = nullptr;
  const NibbleTable* nibbles = nullptr;
};

CodeTable code_table(const Weight& w) {
  if (!w.quantized()) return {};
  if (four_bit(w.type())) return {nullptr, &nibble_table(w.type())};
  return {&decode_table(w.type()), nullptr};
}

// The run's columns of quantized row n (zero past the row): the codes decoded (exact in bf16),
// widened and multiplied by their block's scale in f32, as dequantize_rows_f32 computes them;
// lo holds the first 16, hi the rest.
MLASERVE_AVX512 inline __attribute__((always_inline)) void dequantize_run(const Weight& w,
                                                                          const CodeTable& table,
                                                                          const ColumnRun& run,
                                                                          int64_t n, __m512& lo,
                                                                          __m512& hi) {
  const uint8_t* row = w.codes() + n * w.code_row_bytes();
  const __m512i v = table.nibbles ? decode_nibbles32(row + run.k0 / 2, run.count, *table.nibbles)
                                  : decode_codes(load_codes(row + run.k0, run.count), *table.bytes);
  const BlockScales& s = w.scales();
  __m512 scale_lo = _mm512_set1_ps(s.scale(n, run.block)), scale_hi = scale_lo;
  if (run.next) {
    const __m512 next_scale = _mm512_set1_ps(s.scale(n, run.block + 1));
    scale_lo = _mm512_mask_blend_ps(static_cast<__mmask16>(run.next), scale_lo, next_scale);
    scale_hi = _mm512_mask_blend_ps(static_cast<__mmask16>(run.next >> 16), scale_hi, next_scale);
  }
  lo = _mm512_mul_ps(bf16_to_f32x16(_mm512_castsi512_si256(v)), scale_lo);
  hi = _mm512_mul_ps(bf16_to_f32x16(_mm512_extracti64x4_epi64(v, 1)), scale_hi);
}

// Stores the 16 transposed vectors of rows [group, group + 16) of a 64-row block.
MLASERVE_AVX512 inline void store_transposed(__m512 (&v)[16], int64_t group, float* block) {
  transpose16(v);
  for (int c = 0; c < 16; ++c) _mm512_storeu_ps(block + c * kPackedRows + group, v[c]);
}

// A block's 64 rows are 64 streams, too many for the hardware prefetcher: as a block is packed,
// each of its rows fetches the bytes that row of the block kAheadBlocks later (in the order a
// thread packs them) will read, `rows` below and `cols` right of its own (a block takes ~100
// ns, about one DRAM latency; prefetching 8 blocks ahead took the packing of the bench model's
// FP8 prefill from 19 % of its samples to ~12 %). Rows that land at or past the panel's end
// (n_end) fetch nothing.
constexpr int64_t kAheadBlocks = 8;
struct Ahead {
  int64_t rows = 0, cols = 0;
};

// Where a block's rows fetch (Ahead at column k0): the offset of that column in a row's values
// or codes, and its scale block; the same for every row, so worked out once per block.
struct Fetch {
  int64_t rows, offset, scale_block;
};

Fetch fetch_at(const Weight& w, const Ahead& ahead, int64_t k0) {
  const int64_t col = k0 + ahead.cols;
  if (!w.quantized()) return {ahead.rows, col, 0};
  const BlockScales& s = w.scales();
  return {ahead.rows, col * w.code_row_bytes() / w.cols(),
          std::min((col + s.col_phase) / s.col_block, s.col_blocks - 1)};
}

MLASERVE_AVX512 inline void prefetch_ahead(const Weight& w, const Fetch& fetch, int64_t n,
                                           int64_t n_end) {
  if (n + fetch.rows >= n_end) return;
  const int64_t row = n + fetch.rows;
  if (!w.quantized()) {
    _mm_prefetch(static_cast<const void*>(w.b16() + row * w.cols() + fetch.offset), _MM_HINT_T0);
    return;
  }
  _mm_prefetch(static_cast<const void*>(w.codes() + row * w.code_row_bytes() + fetch.offset),
               _MM_HINT_T0);
  // And the row's scale there: a 4-bit weight's scales (a float or an exponent per 32 columns
  // of each row) are as many streams as its codes.
  const BlockScales& s = w.scales();
  _mm_prefetch(s.by_exponent ? static_cast<const void*>(s.row_exponents(row) + fetch.scale_block)
                             : static_cast<const void*>(s.row_scales(row) + fetch.scale_block),
               _MM_HINT_T0);
}

// One f32 block of the packed layout: rows [n0, n0 + 64) of w (rows past n_end zero) from
// column k0, bf16 rows widened or quantized rows dequantized to f32.
MLASERVE_AVX512 void pack_f32_block(const Weight& w, int64_t n0, int64_t n_end, int64_t k0,
                                    const Ahead& ahead, float* block) {
  const Fetch fetch = fetch_at(w, ahead, k0);
  const int64_t k = w.cols();
  const CodeTable table = code_table(w);
  const bool quantized = w.quantized();
  const ColumnRun run = quantized ? column_run(w, k0, 16) : ColumnRun{};
  for (int64_t group = 0; group < kPackedRows; group += 16) {
    __m512 v[16], unused;
    for (int r = 0; r < 16; ++r) {
      const int64_t n = n0 + group + r;
      prefetch_ahead(w, fetch, n, n_end);
      if (n >= n_end) {
        v[r] = _mm512_setzero_ps();
      } else if (quantized) {
        dequantize_run(w, table, run, n, v[r], unused);
      } else {
        v[r] =
            bf16_to_f32x16(_mm256_maskz_loadu_epi16(first_lanes16(k - k0), w.b16() + n * k + k0));
      }
    }
    store_transposed(v, group, block);
  }
}

// Byte p of transpose_bytes16's out[0]: column p / 16 of row r = p % 16, which sits in the pair
// (rows[0], rows[1]) or (rows[2], rows[3]) at (r % 8 / 4) * 64 + (r % 4) * 16 + column.
alignas(64) constexpr std::array<uint8_t, 64> kTransposeBytes = [] {
  std::array<uint8_t, 64> index{};
  for (int p = 0; p < 64; ++p)
    index[p] = static_cast<uint8_t>(p % 8 / 4 * 64 + p % 4 * 16 + p / 16);
  return index;
}();

// Word 2r of a pair of columns: row r's first column (lane r of the rounded pair), 2r + 1 its
// second (lane 16 + r).
alignas(64) constexpr std::array<uint16_t, 32> kInterleaveWords = [] {
  std::array<uint16_t, 32> index{};
  for (int i = 0; i < 32; ++i) index[i] = static_cast<uint16_t>(i % 2 * 16 + i / 2);
  return index;
}();

// 16 rows of 16 bytes, rows 4i..4i+3 in rows[i] (a row per 16 bytes), transposed: out[j] holds
// byte columns 4j..4j+3, 16 bytes each (one per row). Two vpermi2b gather a column block's bytes
// of rows 0-7 and of rows 8-15 into their places, a blend joins them.
MLASERVE_AVX512_VBMI_BF16 inline void transpose_bytes16(const __m512i (&rows)[4],
                                                        __m512i (&out)[4]) {
  const __m512i first = _mm512_load_si512(kTransposeBytes.data());
  constexpr __mmask64 kRows8To15 = 0xFF00FF00FF00FF00ull;
  for (int j = 0; j < 4; ++j) {  // out[j]: columns 4j on
    const __m512i index = _mm512_add_epi8(first, _mm512_set1_epi8(static_cast<char>(4 * j)));
    const __m512i low = _mm512_permutex2var_epi8(rows[0], index, rows[1]);
    const __m512i high = _mm512_permutex2var_epi8(rows[2], index, rows[3]);
    out[j] = _mm512_mask_blend_epi8(kRows8To15, low, high);
  }
}

// The scales of rows [n, n + 16) for column block j, 0 for rows at or past n_end.
MLASERVE_AVX512 inline __m512 row_scales16(const BlockScales& s, int64_t n, int64_t n_end,
                                           int64_t j) {
  alignas(64) float values[16];
  for (int r = 0; r < 16; ++r) values[r] = n + r < n_end ? s.scale(n + r, j) : 0.0f;
  return _mm512_load_ps(values);
}

// Four rows' 4-bit code bytes from column k0 (the masked bytes, zeros past n_end) as the four
// 128-bit lanes of one vector, rows n..n+3 in lanes 0..3. The lane of an insert is an immediate,
// so the four are spelled out.
MLASERVE_AVX512 inline __m512i code_rows4(const Weight& w, const Fetch& fetch, int64_t n,
                                          int64_t n_end, int64_t k0, __mmask16 bytes) {
  __m128i lanes[4];
  for (int r = 0; r < 4; ++r) {
    prefetch_ahead(w, fetch, n + r, n_end);
    lanes[r] = n + r < n_end
                   ? _mm_maskz_loadu_epi8(bytes, w.codes() + (n + r) * w.code_row_bytes() + k0 / 2)
                   : _mm_setzero_si128();
  }
  const __m512i low = _mm512_inserti32x4(_mm512_castsi128_si512(lanes[0]), lanes[1], 1);
  return _mm512_inserti32x4(_mm512_inserti32x4(low, lanes[2], 2), lanes[3], 3);
}

// pack_bf16_block for 4-bit codes, without transposing floats: a byte of codes is already a
// pair of columns, so 16 rows' 16 bytes are transposed as bytes (transpose_bytes16) and each
// output word is decoded in place: its two nibbles looked up as floats (vpermps reads an index's
// low 4 bits), times their row's scale, rounded to bf16 and interleaved. The values are
// dequantize_run's, bit for bit, at about a third of its instructions per value.
MLASERVE_AVX512_VBMI_BF16 void pack_4bit_block(const Weight& w, int64_t n0, int64_t n_end,
                                               int64_t k0, const Ahead& ahead, float* block) {
  const Fetch fetch = fetch_at(w, ahead, k0);
  const __m512 values = bf16_to_f32x16(_mm512_castsi512_si256(nibble_table(w.type()).values));
  const __m512i interleave = _mm512_load_si512(kInterleaveWords.data());
  const ColumnRun run = column_run(w, k0, 32);  // run.count is even: 4-bit rows have even length
  const __mmask16 bytes = first_lanes16(run.count / 2);
  for (int64_t group = 0; group < kPackedRows; group += 16) {
    const int64_t n = n0 + group;
    __m512i rows[4];
    for (int q = 0; q < 4; ++q) rows[q] = code_rows4(w, fetch, n + 4 * q, n_end, k0, bytes);
    alignas(64) __m512i pairs[4];  // read back 16 bytes at a time by vpmovzxbd
    transpose_bytes16(rows, pairs);
    const __m512 scale = row_scales16(w.scales(), n, n_end, run.block);
    const __m512 next_scale = run.next ? row_scales16(w.scales(), n, n_end, run.block + 1) : scale;
    for (int c = 0; c < 16; ++c) {
      const __m512i codes =
          _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(pairs) + c));
      const __m512 first = _mm512_mul_ps(_mm512_permutexvar_ps(codes, values),
                                         run.next >> (2 * c) & 1 ? next_scale : scale);
      const __m512 second =
          _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(codes, 4), values),
                        run.next >> (2 * c + 1) & 1 ? next_scale : scale);
      const __m512i words =
          _mm512_permutexvar_epi16(interleave, (__m512i)_mm512_cvtne2ps_pbh(second, first));
      _mm512_storeu_si512(block + c * kPackedRows + group, words);
    }
  }
}

// One bf16 block of the packed layout: rows [n0, n0 + 64) of a quantized weight dequantized to
// bf16 (rounded once, as dequantize_rows_bf16), a word per pair of columns, from column k0.
MLASERVE_AVX512_BF16 void pack_bf16_block(const Weight& w, int64_t n0, int64_t n_end, int64_t k0,
                                          const Ahead& ahead, float* block) {
  if (four_bit(w.type()) && cpu_has_avx512_vbmi_bf16()) {
    pack_4bit_block(w, n0, n_end, k0, ahead, block);
    return;
  }
  const Fetch fetch = fetch_at(w, ahead, k0);
  const CodeTable table = code_table(w);
  const ColumnRun run = column_run(w, k0, 32);
  for (int64_t group = 0; group < kPackedRows; group += 16) {
    __m512 v[16];
    for (int r = 0; r < 16; ++r) {
      const int64_t n = n0 + group + r;
      prefetch_ahead(w, fetch, n, n_end);
      __m512 lo, hi;
      if (n < n_end) dequantize_run(w, table, run, n, lo, hi);
      v[r] = n < n_end ? _mm512_castsi512_ps((__m512i)_mm512_cvtne2ps_pbh(hi, lo))
                       : _mm512_setzero_ps();
    }
    store_transposed(v, group, block);
  }
}

// The layout oneDNN's matmul of `type` wants for rows x k weights ([k, rows] in its terms), asked
// once per shape: creating a primitive descriptor costs more than a small expert's GEMM.
memory::desc preferred_weights_desc(int64_t rows, int64_t k, memory::data_type type) {
  static std::mutex mutex;
  static std::map<std::tuple<int64_t, int64_t, memory::data_type>, memory::desc> known;
  const std::lock_guard lock(mutex);
  auto it = known.find({rows, k, type});
  if (it == known.end()) {
    const Shape shape{kPackingProbeRows, rows, k, type, rows};
    const memory::desc any({k, rows}, type, Tag::any);
    it = known.emplace(std::tuple{rows, k, type}, matmul_desc(shape, any).weights_desc()).first;
  }
  return it->second;
}

// Whether that layout is the one pack_*_block write.
bool packed_layout_known(int64_t rows, int64_t k, memory::data_type type) {
  return cpu_has_avx512() &&
         preferred_weights_desc(rows, k, type) == memory::desc({k, rows}, type, packed_tag(type));
}

memory::data_type packed_type(WeightType type) {
  return type == WeightType::F32 ? memory::data_type::f32 : memory::data_type::bf16;
}

// out[i] = in[i] as float32 for i < count (exact: a bf16 is the high half of its float32).
void widen(const bf16* in, int64_t count, float* out) {
  if (cpu_has_avx512()) {
    widen_bf16_row(in, count, out);
  } else {
    for (int64_t i = 0; i < count; ++i) out[i] = bf16_to_f32(in[i]);
  }
}

// Rows [first, first + rows) of w into `panel` in oneDNN's packed layout for `type`, a 64-row
// block at a time on the kernels' threads.
void pack_panel(const Weight& w, int64_t first, int64_t rows, memory::data_type type,
                float* panel) {
  const int64_t cols = block_cols(type), k_blocks = (w.cols() + cols - 1) / cols;
  const int64_t row_blocks = (rows + kPackedRows - 1) / kPackedRows;
  for_ranges(row_blocks * k_blocks, rows * w.cols() >= (1 << 16), [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const int64_t n0 = first + b / k_blocks * kPackedRows, k0 = b % k_blocks * cols;
      const int64_t later = std::min(b + kAheadBlocks, end - 1);
      const Ahead ahead{first + later / k_blocks * kPackedRows - n0, later % k_blocks * cols - k0};
      float* block = panel + b * kPackedRows * kPackedWords;
      if (type == memory::data_type::f32) {
        pack_f32_block(w, n0, first + rows, k0, ahead, block);
      } else {
        pack_bf16_block(w, n0, first + rows, k0, ahead, block);
      }
    }
  });
}

// Rows [first, first + rows) of w into `panel` row-major as `type` (where oneDNN wants some
// other layout: it packs the panel itself).
void fill_row_major_panel(const Weight& w, int64_t first, int64_t rows, memory::data_type type,
                          void* panel) {
  const int64_t k = w.cols(), value_bytes = static_cast<int64_t>(memory::data_type_size(type));
  const bool parallel = rows * k >= (1 << 16);
  for_ranges(rows, parallel, [&](int64_t begin, int64_t end) {
    void* out = static_cast<char*>(panel) + begin * k * value_bytes;
    if (type == memory::data_type::f32 && w.quantized()) {
      dequantize_rows_f32(w, first + begin, first + end, static_cast<float*>(out));
    } else if (w.quantized()) {
      dequantize_rows_bf16(w, first + begin, first + end, static_cast<bf16*>(out));
    } else {
      widen(w.b16() + (first + begin) * k, (end - begin) * k, static_cast<float*>(out));
    }
  });
}

// The GEMM on weights not held in the matmul's type, one panel of rows at a time: quantized weights
// dequantized (oneDNN 2.7 has no FP8 or weight-only int8 matmul) and BF16 on the F32Widened
// path widened (oneDNN 2.6 has no f32 x bf16), each panel written straight into oneDNN's packed
// layout so that the matmul reads it as it is (on plain row-major weights oneDNN copies each
// panel into that layout again per call; its own reorder from bf16 to packed f32 ran at ~10
// GB/s). oneDNN 2.7 runs packed weights into a strided destination on its reference kernel, so
// a panel of a weight with several writes its columns of y through a scratch block.
void dnnl_matmul_panels(const float* x, int64_t m, const Weight& w, float* y) {
  const memory::data_type type = data_type(w, m);
  const int64_t k = w.cols(), value_bytes = static_cast<int64_t>(memory::data_type_size(type));
  const int64_t panel_rows = std::clamp<int64_t>(
      kPanelBytes / (k * value_bytes) / kPackedRows * kPackedRows, kPackedRows, w.rows());
  const int64_t k_words = (k * value_bytes / 4 + kPackedWords) / kPackedWords * kPackedWords;
  thread_local std::vector<float> panel, y_block;  // the pool's threads have their own
  float* values = take(panel, (panel_rows + kPackedRows) * k_words);
  const memory source = source_memory(x, m, k, type);
  for (int64_t first = 0; first < w.rows(); first += panel_rows) {
    const int64_t rows = std::min(panel_rows, w.rows() - first);
    const bool packs = packed_layout_known(rows, k, type);
    if (packs) {
      pack_panel(w, first, rows, type, values);
    } else {
      fill_row_major_panel(w, first, rows, type, values);
    }
    const bool through_block = packs && rows < w.rows();
    float* out = through_block ? take(y_block, m * rows) : y + first;
    const Shape shape{m, rows, k, type, through_block ? rows : w.rows()};
    const memory::desc weights_desc = packs ? memory::desc({k, rows}, type, packed_tag(type))
                                            : row_major_weight_desc(rows, k, type);
    const memory weights(weights_desc, cpu_engine(), values);
    execute(shape, cached_primitive(shape, packs, weights_desc), source, weights, out);
    if (!through_block) continue;
    for_ranges(m, m * rows >= (1 << 16), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        std::copy(out + i * rows, out + (i + 1) * rows, y + i * w.rows() + first);
    });
  }
}

}  // namespace

// Each 64-row block packed into the bf16 layout and multiplied while it is in L2: one pass
// over the weight for every x row.
void gemv_dequantized_rows(const GemvJob& job, const bf16* xb, int64_t k_padded, int64_t first,
                           int64_t last) {
  const Weight& w = *job.dequantized;
  const int64_t cols = block_cols(memory::data_type::bf16), k_blocks = k_padded / cols;
  // Each thread its own, on a huge page: on 4 KB pages the bench model's int4 prefill of 512
  // tokens ran at 965-1173 tok/s from process to process, on one huge page at 1193-1249.
  thread_local WeightBuffer<float> block_buf;
  float* block = take_huge(block_buf, static_cast<size_t>(k_blocks * kPackedRows * kPackedWords));
  for (int64_t n0 = first; n0 < last; n0 += kPackedRows) {
    for (int64_t kb = 0; kb < k_blocks; ++kb) {
      // Fetch the codes kAheadBlocks column blocks on, past the row's end the next row block's.
      const int64_t later = kb + kAheadBlocks;
      const Ahead ahead = later < k_blocks ? Ahead{0, kAheadBlocks * cols}
                                           : Ahead{kPackedRows, (later - k_blocks - kb) * cols};
      pack_bf16_block(w, n0, w.rows(), kb * cols, ahead, block + kb * kPackedRows * kPackedWords);
    }
    gemv_packed_panel(reinterpret_cast<const bf16*>(block), k_padded, xb, job.m, job.y + n0, job.n,
                      std::min(kPackedRows, last - n0));
  }
}

std::shared_ptr<void> dnnl_pack(const Weight& w) {
  const memory::data_type type = packed_type(w.type());
  const memory::desc packed_desc = preferred_weights_desc(w.rows(), w.cols(), type);
  memory row_major(row_major_weight_desc(w.rows(), w.cols(), type), cpu_engine(),
                   const_cast<void*>(weight_data(w)));
  const bool bf16_blocked = type == memory::data_type::bf16 &&
                            packed_layout_known(w.rows(), w.cols(), memory::data_type::bf16);
  std::shared_ptr<void> storage = packed_storage(packed_desc.get_size());
  auto packed = std::make_shared<PackedWeight>(
      PackedWeight{memory(packed_desc, cpu_engine(), storage.get()), bf16_blocked, storage});
  dnnl::stream stream(cpu_engine());
  dnnl::reorder(row_major, packed->weights).execute(stream, row_major, packed->weights);
  stream.wait();
  return packed;
}

size_t dnnl_packed_bytes(const Weight& w) {
  const auto* packed = static_cast<const PackedWeight*>(w.packed.get());
  return packed ? packed->weights.get_desc().get_size() : 0;
}

size_t dnnl_packed_size(WeightType type, int64_t rows, int64_t cols) {
  return preferred_weights_desc(rows, cols, packed_type(type)).get_size();
}

bool dnnl_packs_bf16_blocked(int64_t rows, int64_t cols) {
  return packed_layout_known(rows, cols, memory::data_type::bf16);
}

bool dnnl_has_amx() {
  static const bool has = dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::avx512_core_amx;
  return has;
}

const bf16* dnnl_packed_bf16(const Weight& w) {
  const auto* packed = static_cast<const PackedWeight*>(w.packed.get());
  // The values through `storage`: asking oneDNN for the handle on every product is a call into
  // the library.
  return packed && packed->bf16_blocked ? static_cast<const bf16*>(packed->storage.get()) : nullptr;
}

void dnnl_matmul(const float* x, int64_t m, const Weight& w, float* y) {
  const memory::data_type type = data_type(w, m);
  if (w.quantized() || (w.type() == WeightType::BF16 && type == memory::data_type::f32)) {
    dnnl_matmul_panels(x, m, w, y);
    return;
  }
  const Shape shape{m, w.rows(), w.cols(), type, w.rows()};
  const auto* packed = static_cast<const PackedWeight*>(w.packed.get());
  const memory weights = packed ? packed->weights
                                : memory(row_major_weight_desc(w.rows(), w.cols(), shape.type),
                                         cpu_engine(), const_cast<void*>(weight_data(w)));
  const dnnl::matmul primitive = cached_primitive(shape, packed != nullptr, weights.get_desc());
  const memory source = source_memory(x, m, w.cols(), shape.type);  // may use the kernel pool
  execute(shape, primitive, source, weights, y);
}

}  // namespace mlaserve::kernels
