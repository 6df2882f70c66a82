// Fast CPU path of ops.h. Until an op has its own optimised kernel it forwards to the scalar
// reference; ops_test.cpp compares every op against reference.h on random data.
#include "kernels/ops.h"
#include "kernels/reference.h"

namespace mlaserve::kernels {

void prepare(Weight&) {}

void matmul(const float* x, int64_t m, const Weight& w, float* y) { ref::matmul(x, m, w, y); }

void rms_norm(const float* x, const float* gamma, int64_t rows, int64_t dim, float eps, float* y) {
  ref::rms_norm(x, gamma, rows, dim, eps, y);
}

void silu_mul(const float* gate_up, int64_t rows, int64_t inter, float* out) {
  ref::silu_mul(gate_up, rows, inter, out);
}

void softmax(float* x, int64_t n) { ref::softmax(x, n); }

void rope_interleaved(float* x, int64_t n_vectors, int64_t stride, int64_t dim,
                      const float* cos_theta, const float* sin_theta) {
  ref::rope_interleaved(x, n_vectors, stride, dim, cos_theta, sin_theta);
}

void route(const float* logits, const RouterSpec& spec, int32_t* expert_ids, float* weights) {
  ref::route(logits, spec, expert_ids, weights);
}

void mla_attention_absorbed(const AbsorbedAttention& shape, const float* q, const float* kv_pool,
                            const int32_t* kv_slots, float* out) {
  ref::mla_attention_absorbed(shape, q, kv_pool, kv_slots, out);
}

void mla_attention_prefill(const PrefillAttention& shape, const float* q, const float* k,
                           const float* v, float* out) {
  ref::mla_attention_prefill(shape, q, k, v, out);
}

}  // namespace mlaserve::kernels
