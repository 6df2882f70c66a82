#include "sched/active_request.h"

namespace mlaserve::sched {

std::vector<int32_t> ActiveRequest::fill_tokens(int64_t begin, int64_t end) const {
  std::vector<int32_t> tokens;
  tokens.reserve(static_cast<size_t>(end - begin));
  for (int64_t i = begin; i < end; ++i) tokens.push_back(fill_token(i));
  return tokens;
}

}  // namespace mlaserve::sched
