#include "server/stop_strings.h"

#include <algorithm>
#include <utility>

namespace mlaserve::server {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

std::string StopStringMatcher::push(std::string_view text) {
  if (matched_) return {};
  held_.append(text);
  // The held text cannot contain a whole stop string from earlier pushes (it would have
  // matched then), so searching it all finds the earliest one.
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) {
    const size_t at = held_.find(stop);
    if (at < first) {
      first = at;
      matched_ = stop;
    }
  }
  std::string released;
  if (matched_) {
    released = held_.substr(0, first);
    held_.clear();
    return released;
  }
  // A stop string starts with a UTF-8 lead byte, so the held-back tail starts on a character
  // boundary and the released text is whole characters.
  const size_t keep = possible_stop_start_length();
  released = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return released;
}

std::string StopStringMatcher::finish() {
  if (matched_) return {};
  return std::exchange(held_, {});
}

size_t StopStringMatcher::possible_stop_start_length() const {
  size_t longest = 0;
  for (const std::string& stop : stops_) {
    for (size_t length = std::min(stop.size() - 1, held_.size()); length > longest; --length) {
      if (std::string_view(held_).ends_with(std::string_view(stop).substr(0, length))) {
        longest = length;
        break;
      }
    }
  }
  return longest;
}

}  // namespace mlaserve::server
