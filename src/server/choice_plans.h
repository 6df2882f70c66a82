// The engine requests for an API request: n choices per prompt, prompt-major (choice index
// = prompt index * n + j, as OpenAI numbers them), each with its token budget resolved.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "server/generation_batch.h"
#include "server/generation_options.h"
#include "server/prompt_input.h"

namespace mlaserve::server {

struct TokenBudget {
  int64_t default_tokens;  // when the request names no maximum
  int64_t context_length;  // prompt + generated tokens must fit
  std::string param;       // the request field that sets the maximum, for errors
};

// `rids[p]` names prompt p's choices for /abort_request.
std::vector<ChoicePlan> plan_choices(const std::vector<Prompt>& prompts,
                                     const GenerationOptions& options,
                                     const std::vector<std::string>& rids,
                                     const TokenBudget& budget);

}  // namespace mlaserve::server
