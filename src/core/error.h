// Errors that reach the user: one exception type carrying a complete, human-readable message.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace mlaserve {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// fail("tensor {} has shape {}", name, shape) throws Error with the formatted text.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace mlaserve
