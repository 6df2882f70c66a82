#include "sched/load_balancer.h"

#include <algorithm>

#include "core/error.h"

namespace mlaserve::sched {

LoadBalanceMethod parse_load_balance_method(const std::string& name) {
  if (name == "round_robin") return LoadBalanceMethod::RoundRobin;
  if (name == "minimum_tokens") return LoadBalanceMethod::MinimumTokens;
  if (name == "cache_aware") return LoadBalanceMethod::CacheAware;
  fail("--load-balance-method '{}' is not one of round_robin, minimum_tokens, cache_aware", name);
}

int LoadBalancer::choose(const std::vector<GroupLoad>& groups, int64_t prompt_len) {
  if (method_ == LoadBalanceMethod::RoundRobin) return next_++ % static_cast<int>(groups.size());
  auto fewer_tokens = [](const GroupLoad& a, const GroupLoad& b) {
    return a.outstanding_tokens < b.outstanding_tokens;
  };
  if (method_ == LoadBalanceMethod::CacheAware) {
    const auto most_cached =
        std::min_element(groups.begin(), groups.end(), [&](const GroupLoad& a, const GroupLoad& b) {
          return a.cached_prefix != b.cached_prefix ? a.cached_prefix > b.cached_prefix
                                                    : fewer_tokens(a, b);
        });
    if (most_cached->cached_prefix > 0 && 2 * most_cached->cached_prefix >= prompt_len) {
      return static_cast<int>(most_cached - groups.begin());
    }
  }
  return static_cast<int>(std::min_element(groups.begin(), groups.end(), fewer_tokens) -
                          groups.begin());
}

}  // namespace mlaserve::sched
