// Routing works on one token's few dozen router logits: the scalar reference is fast enough.
#include "kernels/ops.h"
#include "kernels/reference.h"

namespace mlaserve::kernels {

void route(const float* logits, const RouterSpec& spec, int32_t* expert_ids, float* weights) {
  ref::route(logits, spec, expert_ids, weights);
}

void route_given(const float* logits, const RouterSpec& spec, const int32_t* experts,
                 float* weights) {
  ref::route_given(logits, spec, experts, weights);
}

}  // namespace mlaserve::kernels
