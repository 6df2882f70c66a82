// Stop strings are matched on the generated text, which arrives in pieces that need not align
// with them: a stop string may span several tokens. The matcher releases text only once it can
// no longer be the start of a stop string, so a client never sees text that is later cut.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mlaserve::server {

class StopStringMatcher {
 public:
  // `stops` must be non-empty strings (checked when the request is parsed).
  explicit StopStringMatcher(std::vector<std::string> stops);

  // Adds generated text. Returns what may be released: all text before the first stop string
  // (which then ends matching), or everything except a tail that could begin one.
  std::string push(std::string_view text);
  // The generation ended without a stop string: releases the held-back tail.
  std::string finish();

  // The stop string that matched, once one has.
  const std::optional<std::string>& matched() const { return matched_; }

 private:
  // Length of the longest tail of held_ that is a proper prefix of some stop string.
  size_t possible_stop_start_length() const;

  std::vector<std::string> stops_;
  std::string held_;
  std::optional<std::string> matched_;
};

}  // namespace mlaserve::server
