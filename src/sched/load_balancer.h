// Which DP group a new request goes to (research G): round robin, or the group with the fewest
// outstanding tokens (prompt still to prefill plus generation budget still to run).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mlaserve::sched {

enum class LoadBalanceMethod { RoundRobin, MinimumTokens };
LoadBalanceMethod parse_load_balance_method(const std::string& name);

class LoadBalancer {
 public:
  explicit LoadBalancer(LoadBalanceMethod method) : method_(method) {}
  // outstanding_tokens[g] for each group; ties go to the lowest group.
  int choose(const std::vector<int64_t>& outstanding_tokens);

 private:
  LoadBalanceMethod method_;
  int next_ = 0;
};

}  // namespace mlaserve::sched
