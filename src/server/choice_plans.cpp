#include "server/choice_plans.h"

namespace mlaserve::server {

std::vector<ChoicePlan> plan_choices(const std::vector<Prompt>& prompts,
                                     const GenerationOptions& options,
                                     const std::vector<std::string>& rids,
                                     const TokenBudget& budget) {
  std::vector<ChoicePlan> plans;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const int64_t max_new_tokens =
        resolve_max_new_tokens(prompts[p].ids.size(), options.max_new_tokens, budget.default_tokens,
                               budget.context_length, budget.param);
    for (int j = 0; j < options.n; ++j) {
      plans.push_back({engine_request(options, prompts[p].ids, max_new_tokens, j), p, rids[p],
                       options.stop, options.skip_special_tokens});
    }
  }
  return plans;
}

}  // namespace mlaserve::server
