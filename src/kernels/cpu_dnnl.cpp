// oneDNN matmul with weights packed once at load. In oneDNN terms: src x [m, K], weights
// [K, N] (our row-major W[N, K] is that matrix in format "ba"), dst y [m, N] f32.
// One primitive per (m, N, K, type, packed) is created on first use and cached.
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
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

namespace mlaserve::kernels {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

// Rows of x assumed when asking oneDNN for its preferred weight layout. oneDNN 2.6 picks the
// same layout for every m from 1 to 512, so one packed copy serves all calls.
constexpr int64_t kPackingProbeRows = 128;

struct PackedWeight {
  memory weights;  // [K, N] in the layout the matmul primitive asked for
};

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

// Bytes of one dequantized (or widened) panel of weight rows: the GEMM reads it from the
// last-level cache while the next panel has not been written yet, and the scratch stays bounded
// whatever the weight's size (DeepSeek-V3's dense gate_up is 528 MB in bf16).
constexpr int64_t kPanelBytes = 8 << 20;

// Rows [first, last) of an FP8/INT8 weight dequantized into panel as `type`, on the kernels'
// threads.
void dequantize_panel(const Weight& w, int64_t first, int64_t last, memory::data_type type,
                      void* panel) {
  const bool parallel = (last - first) * w.cols() >= (1 << 16);
  for_ranges(last - first, parallel, [&](int64_t begin, int64_t end) {
    if (type == memory::data_type::f32) {
      dequantize_rows_f32(w, first + begin, first + end,
                          static_cast<float*>(panel) + begin * w.cols());
    } else {
      dequantize_rows_bf16(w, first + begin, first + end,
                           static_cast<bf16*>(panel) + begin * w.cols());
    }
  });
}

// FP8/INT8 weights: each panel of rows is dequantized to the matmul's type once per call and
// multiplied as a row-major weight.
void dnnl_matmul_panels(const float* x, int64_t m, const Weight& w, float* y) {
  const memory::data_type type = data_type(w, m);
  const int64_t value_bytes = type == memory::data_type::f32 ? 4 : 2;
  const int64_t panel_rows =
      std::clamp<int64_t>(kPanelBytes / (w.cols() * value_bytes) / 16 * 16, 16, w.rows());
  thread_local std::vector<float> panel;  // float-aligned storage for either type
  panel.resize(static_cast<size_t>((panel_rows * w.cols() * value_bytes + 3) / 4));
  const memory source = source_memory(x, m, w.cols(), type);
  for (int64_t first = 0; first < w.rows(); first += panel_rows) {
    const int64_t rows = std::min(panel_rows, w.rows() - first);
    dequantize_panel(w, first, first + rows, type, panel.data());
    const Shape shape{m, rows, w.cols(), type, w.rows()};
    const memory::desc weights_desc = row_major_weight_desc(rows, w.cols(), type);
    const memory weights(weights_desc, cpu_engine(), panel.data());
    execute(shape, cached_primitive(shape, false, weights_desc), source, weights, y + first);
  }
}

// out[i] = in[i] as float32 for i < count (exact: a bf16 is the high half of its float32).
void widen(const bf16* in, int64_t count, float* out) {
  if (cpu_has_avx512()) {
    widen_bf16_row(in, count, out);
  } else {
    for (int64_t i = 0; i < count; ++i) out[i] = bf16_to_f32(in[i]);
  }
}

// oneDNN's packed f32 layout on AVX-512, BA16a64b of the [K, N] weights: blocks of 64 output
// rows (outermost) by 16 columns, each block k-major: element (k, n) of W[n, k] at
// ((n / 64) * ceil(K / 16) + k / 16) * 1024 + (k % 16) * 64 + n % 64, padding zeroed.
constexpr int64_t kPackedRows = 64, kPackedCols = 16;

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

// One 64 x 16 block of the packed layout: rows [n0, n0 + 64) and columns [k0, k0 + 16) of the
// bf16 rows w (k columns each), widened; rows past n_end and columns past k read as zero.
MLASERVE_AVX512 void pack_block(const bf16* w, int64_t k, int64_t n0, int64_t n_end, int64_t k0,
                                float* block) {
  const __mmask16 cols = first_lanes16(std::min<int64_t>(kPackedCols, k - k0));
  for (int64_t group = 0; group < kPackedRows; group += 16) {
    __m512 v[16];
    for (int r = 0; r < 16; ++r) {
      const int64_t n = n0 + group + r;
      v[r] = n < n_end ? bf16_to_f32x16(_mm256_maskz_loadu_epi16(cols, w + n * k + k0))
                       : _mm512_setzero_ps();
    }
    transpose16(v);
    for (int c = 0; c < 16; ++c) _mm512_storeu_ps(block + c * kPackedRows + group, v[c]);
  }
}

// Whether oneDNN's f32 matmul wants rows x k weights in the layout pack_block writes (asked
// once per shape: creating a primitive descriptor costs more than a small expert's GEMM).
bool packed_layout_known(int64_t rows, int64_t k) {
  if (!cpu_has_avx512()) return false;
  static std::mutex mutex;
  static std::map<std::pair<int64_t, int64_t>, bool> known;
  const std::lock_guard lock(mutex);
  const auto [it, added] = known.try_emplace({rows, k}, false);
  if (added) {
    const Shape shape{kPackingProbeRows, rows, k, memory::data_type::f32, rows};
    const memory::desc any({k, rows}, memory::data_type::f32, Tag::any);
    it->second = matmul_desc(shape, any).weights_desc() ==
                 memory::desc({k, rows}, memory::data_type::f32, Tag::BA16a64b);
  }
  return it->second;
}

// BF16 weights on the F32Widened path: each panel of rows is widened to f32 in oneDNN's own
// packed layout (so the matmul reads it as it is), on the kernels' threads, and multiplied with
// x as it is. oneDNN 2.7 runs packed weights into a strided destination on its reference
// kernel, so a panel of a weight with several writes its columns of y through a scratch block.
// Where oneDNN wants another layout the panel is widened row-major and the matmul packs it.
// (Panels of 1-2 MB measured 2-3x slower on the probe's shape: each is one more oneDNN call;
// oneDNN's own reorder from bf16 to its packed f32 layout ran at ~10 GB/s.)
void dnnl_matmul_widened(const float* x, int64_t m, const Weight& w, float* y) {
  const int64_t k = w.cols();
  const int64_t panel_rows =
      std::clamp<int64_t>(kPanelBytes / (k * 4) / kPackedRows * kPackedRows, kPackedRows, w.rows());
  const int64_t k_blocks = (k + kPackedCols - 1) / kPackedCols;
  thread_local std::vector<float> panel, y_block;
  panel.resize(static_cast<size_t>((panel_rows + kPackedRows) * k_blocks * kPackedCols));
  float* widened = panel.data();  // the pool's threads have their own `panel`
  const memory source = source_memory(x, m, k, memory::data_type::f32);
  for (int64_t first = 0; first < w.rows(); first += panel_rows) {
    const int64_t rows = std::min(panel_rows, w.rows() - first);
    const bf16* stored = w.b16() + first * k;
    const bool packs = packed_layout_known(rows, k);
    if (packs) {
      const int64_t row_blocks = (rows + kPackedRows - 1) / kPackedRows;
      for_ranges(row_blocks * k_blocks, rows * k >= (1 << 16), [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b) {
          pack_block(stored, k, b / k_blocks * kPackedRows, rows, b % k_blocks * kPackedCols,
                     widened + b * kPackedRows * kPackedCols);
        }
      });
    } else {
      for_ranges(rows * k, rows * k >= (1 << 16), [&](int64_t begin, int64_t end) {
        widen(stored + begin, end - begin, widened + begin);
      });
    }
    const bool through_block = packs && rows < w.rows();
    float* out = through_block ? take(y_block, m * rows) : y + first;
    const Shape shape{m, rows, k, memory::data_type::f32, through_block ? rows : w.rows()};
    const memory::desc weights_desc =
        packs ? memory::desc({k, rows}, memory::data_type::f32, Tag::BA16a64b)
              : row_major_weight_desc(rows, k, memory::data_type::f32);
    const memory weights(weights_desc, cpu_engine(), widened);
    execute(shape, cached_primitive(shape, packs, weights_desc), source, weights, out);
    if (!through_block) continue;
    for_ranges(m, m * rows >= (1 << 16), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        std::copy(out + i * rows, out + (i + 1) * rows, y + i * w.rows() + first);
    });
  }
}

}  // namespace

std::shared_ptr<void> dnnl_pack(const Weight& w) {
  const memory::data_type type =
      w.type() == WeightType::F32 ? memory::data_type::f32 : memory::data_type::bf16;
  const Shape shape{kPackingProbeRows, w.rows(), w.cols(), type, w.rows()};
  const memory::desc any({w.cols(), w.rows()}, shape.type, Tag::any);
  const memory::desc packed_desc = matmul_desc(shape, any).weights_desc();
  memory row_major(row_major_weight_desc(w.rows(), w.cols(), shape.type), cpu_engine(),
                   const_cast<void*>(weight_data(w)));
  auto packed = std::make_shared<PackedWeight>(PackedWeight{memory(packed_desc, cpu_engine())});
  dnnl::stream stream(cpu_engine());
  dnnl::reorder(row_major, packed->weights).execute(stream, row_major, packed->weights);
  stream.wait();
  return packed;
}

size_t dnnl_packed_bytes(const Weight& w) {
  const auto* packed = static_cast<const PackedWeight*>(w.packed.get());
  return packed ? packed->weights.get_desc().get_size() : 0;
}

void dnnl_matmul(const float* x, int64_t m, const Weight& w, float* y) {
  const memory::data_type type = data_type(w, m);
  if (w.quantized()) {
    dnnl_matmul_panels(x, m, w, y);
    return;
  }
  if (w.type() == WeightType::BF16 && type == memory::data_type::f32) {
    dnnl_matmul_widened(x, m, w, y);
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
