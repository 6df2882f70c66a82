// Plain scalar implementations of every op in ops.h: the definition of what each op computes,
// kept obvious on purpose. ops_test.cpp holds the fast path to these.
#pragma once

#include "kernels/ops.h"

namespace mlaserve::kernels::ref {

void matmul(const float* x, int64_t m, const Weight& w, float* y);
void matmul_batch(std::span<const MatmulJob> jobs);
void rms_norm(const float* x, const float* gamma, int64_t rows, int64_t dim, float eps, float* y);
void silu_mul(const float* gate_up, int64_t rows, int64_t inter, float* out);
void softmax(float* x, int64_t n);
KthLargest kth_largest(const float* x, int64_t n, int64_t k);
NucleusBar nucleus_bar(const float* w, int64_t n, double target);
int64_t first_argmax(const float* x, int64_t n);
void temperature_weights(const float* logits, int64_t n, float max_logit, float temperature,
                         float* out);
void rope_interleaved(float* x, int64_t n_vectors, int64_t stride, int64_t dim,
                      const float* cos_theta, const float* sin_theta);
void route(const float* logits, const RouterSpec& spec, int32_t* expert_ids, float* weights);
void route_given(const float* logits, const RouterSpec& spec, const int32_t* experts,
                 float* weights);
void sink_attention(const SinkAttention& shape, const float* q, const float* const* rows,
                    const float* sink, float* out);
void mla_attention_absorbed(const AbsorbedAttention& shape, const float* q, const KvRows& kv,
                            const int32_t* kv_slots, float* out);
void mla_attention_prefill(const PrefillAttention& shape, const float* q, const float* k,
                           const float* v, float* out);
void mla_attention_prefill_sparse(const PrefillAttention& shape, int64_t top_k, const float* q,
                                  const float* k, const float* v, const int32_t* selected,
                                  const int32_t* counts, float* out);
void indexer_topk(const IndexerTopk& shape, const float* q, const float* weights,
                  const KvRows& keys, const int32_t* kv_slots, int32_t* selected, int32_t* counts);

}  // namespace mlaserve::kernels::ref
