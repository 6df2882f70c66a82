#include "sched/load_balancer.h"

#include <algorithm>

#include "core/error.h"

namespace mlaserve::sched {

LoadBalanceMethod parse_load_balance_method(const std::string& name) {
  if (name == "round_robin") return LoadBalanceMethod::RoundRobin;
  if (name == "minimum_tokens") return LoadBalanceMethod::MinimumTokens;
  fail("--load-balance-method '{}' is not one of round_robin, minimum_tokens", name);
}

int LoadBalancer::choose(const std::vector<int64_t>& outstanding_tokens) {
  const int groups = static_cast<int>(outstanding_tokens.size());
  if (method_ == LoadBalanceMethod::RoundRobin) return next_++ % groups;
  return static_cast<int>(std::min_element(outstanding_tokens.begin(), outstanding_tokens.end()) -
                          outstanding_tokens.begin());
}

}  // namespace mlaserve::sched
