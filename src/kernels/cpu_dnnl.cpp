// oneDNN matmul with weights packed once at load. In oneDNN terms: src x [m, K], weights
// [K, N] (our row-major W[N, K] is that matrix in format "ba"), dst y [m, N] f32.
// One primitive per (m, N, K, type, packed) is created on first use and cached.
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

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
MLASERVE_AVX512 void widen_avx512(const bf16* in, int64_t count, float* out) {
  int64_t i = 0;
  for (; i + 16 <= count; i += 16)
    _mm512_storeu_ps(out + i,
                     bf16_to_f32x16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i))));
  for (; i < count; ++i) out[i] = bf16_to_f32(in[i]);
}

void widen(const bf16* in, int64_t count, float* out) {
  if (cpu_has_avx512()) {
    widen_avx512(in, count, out);
  } else {
    for (int64_t i = 0; i < count; ++i) out[i] = bf16_to_f32(in[i]);
  }
}

// BF16 weights on the F32Widened path: each panel of rows is widened to a row-major f32 copy,
// on the kernels' threads, and multiplied with x as it is. (Panels of 1-2 MB, to stay in L2,
// measured 2-3x slower on the probe's shape: each is one more oneDNN call.) (oneDNN's own reorder
// from bf16 to its packed f32 layout widens and packs in one pass but ran at ~10 GB/s, slower than
// this widening plus the matmul's packing of the panel: at m = 32, 73 vs 137 GFLOP/s.)
void dnnl_matmul_widened(const float* x, int64_t m, const Weight& w, float* y) {
  const int64_t k = w.cols();
  const int64_t panel_rows = std::clamp<int64_t>(kPanelBytes / (k * 4) / 16 * 16, 16, w.rows());
  thread_local std::vector<float> panel;
  panel.resize(static_cast<size_t>(panel_rows * k));
  float* widened = panel.data();  // the pool's threads have their own `panel`
  const memory source = source_memory(x, m, k, memory::data_type::f32);
  for (int64_t first = 0; first < w.rows(); first += panel_rows) {
    const int64_t rows = std::min(panel_rows, w.rows() - first);
    for_ranges(rows * k, rows * k >= (1 << 16), [&](int64_t begin, int64_t end) {
      widen(w.b16() + first * k + begin, end - begin, widened + begin);
    });
    const Shape shape{m, rows, k, memory::data_type::f32, w.rows()};
    const memory::desc weights_desc = row_major_weight_desc(rows, k, memory::data_type::f32);
    const memory weights(weights_desc, cpu_engine(), widened);
    execute(shape, cached_primitive(shape, false, weights_desc), source, weights, y + first);
  }
}

}  // namespace

bool dnnl_supports() {
  return !reference_kernels_forced();
}

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
