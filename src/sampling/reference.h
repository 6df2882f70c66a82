// Plain full-sort implementation of the filtering that sampling::filter() does: the definition
// of what it computes, kept obvious on purpose. sampling_test.cpp compares the two.
#pragma once

#include <span>
#include <vector>

#include "sampling/sampling.h"

namespace mlaserve::sampling {

// The distribution a Sampler draws from for these (already penalised) logits: one probability
// per token, 0 for tokens filtered out, summing to 1.
std::vector<float> reference_filtered_probs(std::span<const float> logits,
                                            const SamplingParams& params);

}  // namespace mlaserve::sampling
