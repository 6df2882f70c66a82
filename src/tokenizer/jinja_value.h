// Values of the chat-template interpreter, with Python semantics (templates are written against
// Jinja2 running in Python): truthiness, ==, ordering, str() and repr().
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/error.h"

namespace mlaserve::tokenizer::jinja {

// An error in a template, reported with the template line it comes from.
template <typename... Args>
[[noreturn]] void fail_at(int line, fmt::format_string<Args...> format, Args&&... args) {
  fail("chat template line {}: {}", line, fmt::format(format, std::forward<Args>(args)...));
}

class Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;  // keeps insertion order, like Python

// What a failed lookup yields: printing it gives "", testing it gives false, and most other uses
// are an error naming `name` (Jinja's default Undefined).
struct Undefined {
  std::string name;
};

// namespace(...): the one mutable object, so that {% set ns.x %} inside a loop is seen outside.
struct Namespace {
  Dict attributes;
};

class Value {
 public:
  using Storage = std::variant<Undefined, std::nullptr_t, bool, int64_t, double, std::string,
                               std::shared_ptr<const List>, std::shared_ptr<const Dict>,
                               std::shared_ptr<Namespace>>;

  Value() : storage_(Undefined{}) {}
  Value(Undefined undefined) : storage_(std::move(undefined)) {}
  Value(std::nullptr_t) : storage_(nullptr) {}
  Value(bool value) : storage_(value) {}
  Value(int value) : storage_(int64_t{value}) {}
  Value(int64_t value) : storage_(value) {}
  Value(double value) : storage_(value) {}
  Value(std::string value) : storage_(std::move(value)) {}
  Value(const char* value) : storage_(std::string(value)) {}
  Value(List list) : storage_(std::make_shared<const List>(std::move(list))) {}
  Value(Dict dict) : storage_(std::make_shared<const Dict>(std::move(dict))) {}
  Value(std::shared_ptr<Namespace> ns) : storage_(std::move(ns)) {}

  static Value from_json(const nlohmann::json& json);
  static Value from_json(const nlohmann::ordered_json& json);  // keys in the order written

  bool is_undefined() const { return std::holds_alternative<Undefined>(storage_); }
  bool is_none() const { return std::holds_alternative<std::nullptr_t>(storage_); }
  bool is_bool() const { return std::holds_alternative<bool>(storage_); }
  bool is_int() const { return std::holds_alternative<int64_t>(storage_) || is_bool(); }
  bool is_number() const { return is_int() || std::holds_alternative<double>(storage_); }
  bool is_string() const { return std::holds_alternative<std::string>(storage_); }
  bool is_list() const { return std::holds_alternative<std::shared_ptr<const List>>(storage_); }
  bool is_dict() const { return std::holds_alternative<std::shared_ptr<const Dict>>(storage_); }
  bool is_namespace() const { return std::holds_alternative<std::shared_ptr<Namespace>>(storage_); }

  const std::string& undefined_name() const { return std::get<Undefined>(storage_).name; }
  int64_t as_int() const;  // bools count as 0/1, as in Python
  double as_double() const;
  const std::string& as_string() const { return std::get<std::string>(storage_); }
  const List& as_list() const { return *std::get<std::shared_ptr<const List>>(storage_); }
  const Dict& as_dict() const { return *std::get<std::shared_ptr<const Dict>>(storage_); }
  Namespace& as_namespace() const { return *std::get<std::shared_ptr<Namespace>>(storage_); }

  // Python truthiness; Undefined is false.
  bool truthy() const;
  // Python str(): what {{ value }} prints ("" for Undefined, "None", "True", "1.0", ...).
  std::string str() const;
  // Python repr(): strings quoted, as inside a printed list.
  std::string repr() const;
  // The name Python would give the type, for error messages.
  std::string type_name() const;

  // A dict's or namespace's entry; Undefined (named `key`) when absent.
  Value attribute(std::string_view key) const;

 private:
  Storage storage_;
};

// The value stored under `key`, or null.
const Value* find_entry(const Dict& dict, std::string_view key);

bool operator==(const Value& left, const Value& right);
// Python ordering of numbers, strings and lists; other types are an error at `line`.
bool less_than(const Value& left, const Value& right, int line);

// Python json.dumps of a string (ensure_ascii=False) without the quotes: each byte escaped on its
// own, so pieces of a string escape to pieces of its escape.
std::string json_escaped(std::string_view text);

// Python json.dumps(value, ensure_ascii=False, indent=indent): what HF's tojson filter gives.
// A negative indent means none (one line, ", " and ": " separators).
std::string to_json_text(const Value& value, int indent, int line);

}  // namespace mlaserve::tokenizer::jinja
