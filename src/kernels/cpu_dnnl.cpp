// oneDNN matmul with weights packed once at load. In oneDNN terms: src x [m, K], weights
// [K, N] (our row-major W[N, K] is that matrix in format "ba"), dst y [m, N] f32.
// One primitive per (m, N, K, type, packed) is created on first use and cached.
#include <oneapi/dnnl/dnnl.hpp>

#include <map>
#include <mutex>
#include <tuple>
#include <vector>

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

memory::data_type data_type(WeightType type) {
  return type == WeightType::F32 ? memory::data_type::f32 : memory::data_type::bf16;
}

const void* weight_data(const Weight& w) {
  return w.type() == WeightType::F32 ? static_cast<const void*>(w.f32())
                                     : static_cast<const void*>(w.b16());
}

memory::desc row_major_weight_desc(const Weight& w) {
  return memory::desc({w.cols(), w.rows()}, data_type(w.type()), Tag::ba);
}

// Primitive descriptor for x[m, K] · weights → y[m, N] with the given weights layout.
dnnl::matmul::primitive_desc matmul_desc(int64_t m, const Weight& w, const memory::desc& weights) {
  const memory::desc src({m, w.cols()}, data_type(w.type()), Tag::ab);
  const memory::desc dst({m, w.rows()}, memory::data_type::f32, Tag::ab);
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, dst), cpu_engine());
}

// Key of a cached primitive: m, N, K, weight type, packed or row-major weights.
using PrimitiveKey = std::tuple<int64_t, int64_t, int64_t, WeightType, bool>;

// Prefill chunk sizes bring ever new m; past this many primitives the map starts over instead
// of growing without bound (oneDNN's own primitive cache still makes recent ones cheap).
constexpr size_t kMaxCachedPrimitives = 1024;

// The primitive for this call's shape, created on first use. Returned by value (a reference-
// counted handle), so clearing the map cannot pull it from under a running call.
dnnl::matmul cached_primitive(int64_t m, const Weight& w, const memory::desc& weights) {
  static std::mutex mutex;
  static std::map<PrimitiveKey, dnnl::matmul> primitives;
  const PrimitiveKey key{m, w.rows(), w.cols(), w.type(), w.packed != nullptr};
  const std::lock_guard lock(mutex);
  auto it = primitives.find(key);
  if (it == primitives.end()) {
    if (primitives.size() >= kMaxCachedPrimitives) primitives.clear();
    it = primitives.emplace(key, dnnl::matmul(matmul_desc(m, w, weights))).first;
  }
  return it->second;
}

// x as the matmul's src: f32 used in place; for BF16 weights rounded into a per-thread buffer.
memory source_memory(const float* x, int64_t m, const Weight& w) {
  const memory::desc desc({m, w.cols()}, data_type(w.type()), Tag::ab);
  if (w.type() == WeightType::F32) return memory(desc, cpu_engine(), const_cast<float*>(x));
  thread_local std::vector<bf16> rounded;
  rounded.resize(static_cast<size_t>(m * w.cols()));
  round_rows_to_bf16(x, m, w.cols(), w.cols(), rounded.data());
  return memory(desc, cpu_engine(), rounded.data());
}

}  // namespace

bool dnnl_supports(WeightType type) {
  return !reference_kernels_forced() && (type == WeightType::F32 || cpu_has_avx512_bf16());
}

std::shared_ptr<void> dnnl_pack(const Weight& w) {
  const memory::desc any({w.cols(), w.rows()}, data_type(w.type()), Tag::any);
  const memory::desc packed_desc = matmul_desc(kPackingProbeRows, w, any).weights_desc();
  memory row_major(row_major_weight_desc(w), cpu_engine(), const_cast<void*>(weight_data(w)));
  auto packed = std::make_shared<PackedWeight>(PackedWeight{memory(packed_desc, cpu_engine())});
  dnnl::stream stream(cpu_engine());
  dnnl::reorder(row_major, packed->weights).execute(stream, row_major, packed->weights);
  stream.wait();
  return packed;
}

void dnnl_matmul(const float* x, int64_t m, const Weight& w, float* y) {
  const auto* packed = static_cast<const PackedWeight*>(w.packed.get());
  const memory weights =
      packed ? packed->weights
             : memory(row_major_weight_desc(w), cpu_engine(), const_cast<void*>(weight_data(w)));
  const dnnl::matmul primitive = cached_primitive(m, w, weights.get_desc());
  const memory::desc dst({m, w.rows()}, memory::data_type::f32, Tag::ab);
  const memory source = source_memory(x, m, w);  // may run on the kernel thread pool
  thread_local dnnl::stream stream(cpu_engine());
  park_threads();  // oneDNN runs on its own OpenMP team
  primitive.execute(stream, {{DNNL_ARG_SRC, source},
                             {DNNL_ARG_WEIGHTS, weights},
                             {DNNL_ARG_DST, memory(dst, cpu_engine(), y)}});
  stream.wait();
}

}  // namespace mlaserve::kernels
