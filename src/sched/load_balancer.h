// Which DP group a new request goes to (SGLang's DP load-balancing methods): round robin, the group
// with the fewest outstanding tokens (prompt still to prefill plus generation budget still to run),
// or cache aware (SGLang router's idea): the group whose radix cache holds at least half of the
// prompt, else the fewest outstanding tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mlaserve::sched {

enum class LoadBalanceMethod { RoundRobin, MinimumTokens, CacheAware };
LoadBalanceMethod parse_load_balance_method(const std::string& name);

class LoadBalancer {
 public:
  explicit LoadBalancer(LoadBalanceMethod method) : method_(method) {}
  struct GroupLoad {
    int64_t outstanding_tokens = 0;
    int64_t cached_prefix = 0;  // prompt tokens the group's radix cache holds (cache_aware only)
  };
  bool needs_cached_prefix() const { return method_ == LoadBalanceMethod::CacheAware; }
  // One entry per group; ties go to the lowest group.
  int choose(const std::vector<GroupLoad>& groups, int64_t prompt_len);

 private:
  LoadBalanceMethod method_;
  int next_ = 0;
};

}  // namespace mlaserve::sched
