// The filters, tests, methods and global functions that chat templates can call. Each table
// holds what HF chat templates use; any other name is an Error naming it.
#pragma once

#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace mlaserve::tokenizer::jinja {

struct CallArgs {
  List positional;
  std::vector<std::pair<std::string, Value>> keyword;

  // The argument passed at `position` or as `name`, else `fallback`.
  Value get(size_t position, std::string_view name, Value fallback) const;
};

// Raises the error for using an Undefined value (Jinja's UndefinedError).
[[noreturn]] void fail_undefined(const Value& value, int line);

// Filters: length/count, trim, lower, upper, string, join, default/d, first, last, tojson, list,
// int, items.
Value apply_filter(std::string_view name, const Value& input, const CallArgs& args, int line);

// Tests: defined, undefined, none, true, false, boolean, string, number, integer, float,
// mapping, sequence, iterable, odd, even.
bool apply_test(std::string_view name, const Value& input, const CallArgs& args, int line);

// String methods: startswith, endswith, strip, lstrip, rstrip, split, lower, upper, replace.
// Dict methods: items, keys, values, get.
Value call_method(const Value& object, std::string_view name, const CallArgs& args, int line);

// Global functions: namespace(...), raise_exception(message), range(...).
Value call_function(std::string_view name, const CallArgs& args, int line);

// The items a for loop visits: a list's items, a dict's keys, a string's characters; nothing for
// Undefined (as in Jinja).
List iterate(const Value& value, int line);

}  // namespace mlaserve::tokenizer::jinja
