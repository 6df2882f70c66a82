// The demo models' reference.json (models/brown-tiny*, float64 outputs of an independent
// implementation): prompts with their last-position top-10 logits and greedy continuations.
#pragma once

#include <string>
#include <vector>

namespace mlaserve::testing {

// Ids of the k largest logits, largest first.
std::vector<int> top_ids(const std::vector<float>& logits, size_t k);

// Runs every reference prompt of `model_dir` through `eval --dtype float32 <flags>` and expects
// each prompt's top-10 ids, their logits within 1e-4 relative, and its greedy tokens (all the
// reference has; a longer continuation is cut to its length).
void expect_demo_reference_prompts(const std::string& model_dir, const std::string& flags);

}  // namespace mlaserve::testing
