#include "tokenizer/jinja_builtins.h"

#include <algorithm>
#include <charconv>

#include "tokenizer/jinja_strings.h"
#include "tokenizer/utf8.h"

namespace mlaserve::tokenizer::jinja {
namespace {

template <typename Function>
struct Named {
  std::string_view name;
  Function function;
};

template <typename Function, size_t N>
Function find_named(const Named<Function> (&table)[N], std::string_view name) {
  for (const auto& entry : table) {
    if (entry.name == name) return entry.function;
  }
  return nullptr;
}

std::optional<std::string> optional_string(const Value& value, std::string_view what, int line) {
  if (value.is_none() || value.is_undefined()) return std::nullopt;
  if (!value.is_string()) fail_at(line, "{} must be a string, got {}", what, value.type_name());
  return value.as_string();
}

int64_t int_argument(const Value& value, std::string_view what, int line) {
  if (!value.is_int()) fail_at(line, "{} must be an integer, got {}", what, value.type_name());
  return value.as_int();
}

const std::string& string_argument(const Value& value, std::string_view what, int line) {
  if (!value.is_string()) fail_at(line, "{} must be a string, got {}", what, value.type_name());
  return value.as_string();
}

List strings_to_list(const std::vector<std::string>& parts) {
  return List(parts.begin(), parts.end());
}

// ---- filters ----

using FilterFunction = Value (*)(const Value&, const CallArgs&, int);

Value filter_length(const Value& input, const CallArgs&, int line) {
  if (input.is_undefined()) return 0;
  if (input.is_string()) return static_cast<int64_t>(utf8::count_code_points(input.as_string()));
  if (input.is_list()) return static_cast<int64_t>(input.as_list().size());
  if (input.is_dict()) return static_cast<int64_t>(input.as_dict().size());
  fail_at(line, "object of type {} has no length", input.type_name());
}

Value filter_trim(const Value& input, const CallArgs& args, int line) {
  return python_strip(input.str(), optional_string(args.get(0, "chars", {}), "trim chars", line),
                      true, true);
}

Value filter_join(const Value& input, const CallArgs& args, int line) {
  const std::string separator = args.get(0, "d", "").str();
  std::string out;
  const List items = iterate(input, line);
  for (size_t i = 0; i < items.size(); ++i) out += (i > 0 ? separator : "") + items[i].str();
  return out;
}

Value filter_default(const Value& input, const CallArgs& args, int) {
  const bool use_default =
      input.is_undefined() || (args.get(1, "boolean", false).truthy() && !input.truthy());
  return use_default ? args.get(0, "default_value", "") : input;
}

Value filter_first(const Value& input, const CallArgs&, int line) {
  const List items = iterate(input, line);
  return items.empty() ? Value(Undefined{"first item"}) : items.front();
}

Value filter_last(const Value& input, const CallArgs&, int line) {
  const List items = iterate(input, line);
  return items.empty() ? Value(Undefined{"last item"}) : items.back();
}

Value filter_tojson(const Value& input, const CallArgs& args, int line) {
  const Value indent = args.get(0, "indent", nullptr);
  return to_json_text(input, indent.is_none() ? -1 : int_argument(indent, "tojson indent", line),
                      line);
}

Value filter_int(const Value& input, const CallArgs& args, int) {
  if (input.is_int()) return input.as_int();
  if (input.is_number()) return static_cast<int64_t>(input.as_double());
  if (input.is_string()) {
    const std::string text = python_strip(input.as_string(), std::nullopt, true, true);
    int64_t parsed = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), parsed);
    if (error == std::errc() && end == text.data() + text.size()) return parsed;
  }
  return args.get(0, "default", 0);
}

Value filter_items(const Value& input, const CallArgs&, int line) {
  if (input.is_undefined()) return List{};
  if (!input.is_dict()) fail_at(line, "items filter needs a dict, got {}", input.type_name());
  List items;
  for (const auto& [key, value] : input.as_dict()) items.push_back(List{key, value});
  return items;
}

const Named<FilterFunction> kFilters[] = {
    {"length", filter_length},
    {"count", filter_length},
    {"trim", filter_trim},
    {"lower",
     [](const Value& input, const CallArgs&, int) { return Value(ascii_lower(input.str())); }},
    {"upper",
     [](const Value& input, const CallArgs&, int) { return Value(ascii_upper(input.str())); }},
    {"string", [](const Value& input, const CallArgs&, int) { return Value(input.str()); }},
    {"join", filter_join},
    {"default", filter_default},
    {"d", filter_default},
    {"first", filter_first},
    {"last", filter_last},
    {"tojson", filter_tojson},
    {"list",
     [](const Value& input, const CallArgs&, int line) { return Value(iterate(input, line)); }},
    {"int", filter_int},
    {"items", filter_items},
};

// ---- tests ----

using TestFunction = bool (*)(const Value&);

const Named<TestFunction> kTests[] = {
    {"defined", [](const Value& v) { return !v.is_undefined(); }},
    {"undefined", [](const Value& v) { return v.is_undefined(); }},
    {"none", [](const Value& v) { return v.is_none(); }},
    {"true", [](const Value& v) { return v.is_bool() && v.truthy(); }},
    {"false", [](const Value& v) { return v.is_bool() && !v.truthy(); }},
    {"boolean", [](const Value& v) { return v.is_bool(); }},
    {"string", [](const Value& v) { return v.is_string(); }},
    {"number", [](const Value& v) { return v.is_number(); }},
    {"integer", [](const Value& v) { return v.is_int() && !v.is_bool(); }},
    {"float", [](const Value& v) { return v.is_number() && !v.is_int(); }},
    {"mapping", [](const Value& v) { return v.is_dict(); }},
    {"sequence", [](const Value& v) { return v.is_string() || v.is_list() || v.is_dict(); }},
    {"iterable",
     [](const Value& v) {
       return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
     }},
    {"odd", [](const Value& v) { return v.is_int() && v.as_int() % 2 != 0; }},
    {"even", [](const Value& v) { return v.is_int() && v.as_int() % 2 == 0; }},
};

// ---- methods ----

bool string_affix_matches(const std::string& text, const Value& affixes, bool prefix, int line) {
  const List candidates = affixes.is_list() ? affixes.as_list() : List{affixes};
  return std::any_of(candidates.begin(), candidates.end(), [&](const Value& candidate) {
    const std::string& affix = string_argument(candidate, "startswith/endswith argument", line);
    return prefix ? text.starts_with(affix) : text.ends_with(affix);
  });
}

Value string_method(const std::string& text, std::string_view name, const CallArgs& args,
                    int line) {
  if (name == "startswith" || name == "endswith") {
    return string_affix_matches(text, args.get(0, "prefix", {}), name == "startswith", line);
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const auto chars = optional_string(args.get(0, "chars", nullptr), "strip chars", line);
    return python_strip(text, chars, name != "rstrip", name != "lstrip");
  }
  if (name == "split") {
    const auto separator = optional_string(args.get(0, "sep", nullptr), "split separator", line);
    if (separator && separator->empty()) fail_at(line, "split: empty separator");
    const int64_t max_split = int_argument(args.get(1, "maxsplit", -1), "split maxsplit", line);
    return strings_to_list(python_split(text, separator, max_split));
  }
  if (name == "lower") return ascii_lower(text);
  if (name == "upper") return ascii_upper(text);
  if (name == "replace") {
    return python_replace(text, string_argument(args.get(0, "old", {}), "replace old", line),
                          string_argument(args.get(1, "new", {}), "replace new", line),
                          int_argument(args.get(2, "count", -1), "replace count", line));
  }
  fail_at(line, "unsupported string method '{}'", name);
}

Value dict_method(const Dict& dict, std::string_view name, const CallArgs& args, int line) {
  if (name == "items" || name == "keys" || name == "values") {
    List out;
    for (const auto& [key, value] : dict) {
      out.push_back(name == "items"  ? Value(List{key, value})
                    : name == "keys" ? Value(key)
                                     : value);
    }
    return out;
  }
  if (name == "get") {
    // A copy: args.get returns a temporary, which a reference into would outlive.
    const std::string key = string_argument(args.get(0, "key", {}), "get key", line);
    const Value* found = find_entry(dict, key);
    return found != nullptr ? *found : args.get(1, "default", nullptr);
  }
  fail_at(line, "unsupported dict method '{}'", name);
}

// ---- global functions ----

Value make_namespace(const CallArgs& args, int line) {
  auto ns = std::make_shared<Namespace>();
  for (const Value& initial : args.positional) {
    if (!initial.is_dict()) fail_at(line, "namespace() takes keyword arguments or a dict");
    ns->attributes = initial.as_dict();
  }
  for (const auto& [key, value] : args.keyword) ns->attributes.emplace_back(key, value);
  return ns;
}

Value make_range(const CallArgs& args, int line) {
  constexpr int64_t kMaxLength = 100'000;  // Jinja's sandbox refuses longer ranges too
  const size_t count = args.positional.size();
  if (count < 1 || count > 3) fail_at(line, "range() takes 1 to 3 arguments");
  const int64_t start = count == 1 ? 0 : int_argument(args.positional[0], "range start", line);
  const int64_t stop = int_argument(args.positional[count == 1 ? 0 : 1], "range stop", line);
  const int64_t step = count == 3 ? int_argument(args.positional[2], "range step", line) : 1;
  if (step == 0) fail_at(line, "range() step must not be zero");
  List out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    if (static_cast<int64_t>(out.size()) >= kMaxLength) fail_at(line, "range() is too long");
    out.push_back(i);
    if (__builtin_add_overflow(i, step, &i)) break;  // the next value is past any int64 stop
  }
  return out;
}

}  // namespace

Value CallArgs::get(size_t position, std::string_view name, Value fallback) const {
  if (position < positional.size()) return positional[position];
  for (const auto& [key, value] : keyword) {
    if (key == name) return value;
  }
  return fallback;
}

void fail_undefined(const Value& value, int line) {
  if (value.undefined_name().empty()) fail_at(line, "a value is undefined");
  fail_at(line, "'{}' is undefined", value.undefined_name());
}

Value apply_filter(std::string_view name, const Value& input, const CallArgs& args, int line) {
  const FilterFunction filter = find_named(kFilters, name);
  if (filter == nullptr) fail_at(line, "unsupported filter '{}'", name);
  return filter(input, args, line);
}

bool apply_test(std::string_view name, const Value& input, const CallArgs& args, int line) {
  const TestFunction test = find_named(kTests, name);
  if (test == nullptr) fail_at(line, "unsupported test '{}'", name);
  if (!args.positional.empty() || !args.keyword.empty()) {
    fail_at(line, "test '{}' takes no arguments", name);
  }
  return test(input);
}

Value call_method(const Value& object, std::string_view name, const CallArgs& args, int line) {
  if (object.is_undefined()) fail_undefined(object, line);
  if (object.is_string()) return string_method(object.as_string(), name, args, line);
  if (object.is_dict()) return dict_method(object.as_dict(), name, args, line);
  fail_at(line, "unsupported method '{}' on a value of type {}", name, object.type_name());
}

Value call_function(std::string_view name, const CallArgs& args, int line) {
  if (name == "namespace") return make_namespace(args, line);
  if (name == "raise_exception")
    fail_at(line, "raise_exception: {}", args.get(0, "message", "").str());
  if (name == "range") return make_range(args, line);
  fail_at(line, "unsupported function '{}'", name);
}

List iterate(const Value& value, int line) {
  if (value.is_undefined()) return {};
  if (value.is_list()) return value.as_list();
  if (value.is_dict()) {
    List keys;
    for (const auto& entry : value.as_dict()) keys.push_back(entry.first);
    return keys;
  }
  if (value.is_string()) {
    List characters;
    for (const char32_t c : to_code_points(value.as_string()))
      characters.push_back(to_utf8(std::u32string(1, c)));
    return characters;
  }
  fail_at(line, "a value of type {} is not iterable", value.type_name());
}

}  // namespace mlaserve::tokenizer::jinja
