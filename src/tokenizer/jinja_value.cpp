#include "tokenizer/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

namespace mlaserve::tokenizer::jinja {
namespace {

std::string python_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".en") == std::string::npos) text += ".0";
  return text;
}

std::string python_string_repr(const std::string& text) {
  const bool has_single = text.find('\'') != std::string::npos;
  const bool has_double = text.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : text) {
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (static_cast<uint8_t>(c) < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", static_cast<uint8_t>(c));
    } else {
      out += c;
    }
  }
  out += quote;
  return out;
}

std::string dict_repr(const Dict& dict) {
  std::string out = "{";
  for (size_t i = 0; i < dict.size(); ++i) {
    if (i > 0) out += ", ";
    out += python_string_repr(dict[i].first) + ": " + dict[i].second.repr();
  }
  return out + "}";
}

}  // namespace

std::string json_escaped(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out;
}

namespace {

std::string json_string(const std::string& text) {
  std::string out = "\"";  // (not "\"" + ...: g++ 12 misreads that as an overlapping memcpy)
  out += json_escaped(text);
  return out + "\"";
}

void append_json(const Value& value, int indent, int depth, int line, std::string& out);

// Writes "[...]" or "{...}" items the way json.dumps lays them out for this indent.
template <typename Items, typename WriteItem>
void append_json_container(const Items& items, char open, char close, int indent, int depth,
                           WriteItem write_item, std::string& out) {
  out += open;
  if (items.empty()) {
    out += close;
    return;
  }
  auto break_line = [&](int level) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(level * indent), ' ');
  };
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += indent < 0 ? ", " : ",";
    break_line(depth + 1);
    write_item(items[i]);
  }
  break_line(depth);
  out += close;
}

void append_json(const Value& value, int indent, int depth, int line, std::string& out) {
  if (value.is_none()) {
    out += "null";
  } else if (value.is_bool()) {
    out += value.truthy() ? "true" : "false";
  } else if (value.is_int()) {
    out += std::to_string(value.as_int());
  } else if (value.is_number()) {
    const double number = value.as_double();
    out += std::isnan(number)   ? "NaN"
           : std::isinf(number) ? (number > 0 ? "Infinity" : "-Infinity")
                                : python_float(number);
  } else if (value.is_string()) {
    out += json_string(value.as_string());
  } else if (value.is_list()) {
    append_json_container(
        value.as_list(), '[', ']', indent, depth,
        [&](const Value& item) { append_json(item, indent, depth + 1, line, out); }, out);
  } else if (value.is_dict()) {
    append_json_container(
        value.as_dict(), '{', '}', indent, depth,
        [&](const auto& entry) {
          out += json_string(entry.first) + ": ";
          append_json(entry.second, indent, depth + 1, line, out);
        },
        out);
  } else {
    fail_at(line, "tojson: a value of type {} is not JSON serializable", value.type_name());
  }
}

}  // namespace

namespace {

// Either JSON flavour: objects keep their keys' order (sorted for nlohmann::json, as written for
// nlohmann::ordered_json).
template <typename Json>
Value value_of_json(const Json& json) {
  switch (json.type()) {
    case Json::value_t::null:
      return nullptr;
    case Json::value_t::boolean:
      return json.template get<bool>();
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return json.template get<int64_t>();
    case Json::value_t::number_float:
      return json.template get<double>();
    case Json::value_t::string:
      return json.template get<std::string>();
    case Json::value_t::array: {
      List list;
      for (const auto& item : json) list.push_back(value_of_json(item));
      return list;
    }
    case Json::value_t::object: {
      Dict dict;
      for (const auto& [key, item] : json.items()) dict.emplace_back(key, value_of_json(item));
      return dict;
    }
    default:
      fail("chat template variables: JSON value {} has no template equivalent", json.dump());
  }
}

}  // namespace

Value Value::from_json(const nlohmann::json& json) {
  return value_of_json(json);
}

Value Value::from_json(const nlohmann::ordered_json& json) {
  return value_of_json(json);
}

int64_t Value::as_int() const {
  if (is_bool()) return std::get<bool>(storage_) ? 1 : 0;
  return std::get<int64_t>(storage_);
}

double Value::as_double() const {
  if (std::holds_alternative<double>(storage_)) return std::get<double>(storage_);
  return static_cast<double>(as_int());
}

bool Value::truthy() const {
  if (is_undefined() || is_none()) return false;
  if (is_bool()) return std::get<bool>(storage_);
  if (is_int()) return as_int() != 0;
  if (is_number()) return as_double() != 0.0;
  if (is_string()) return !as_string().empty();
  if (is_list()) return !as_list().empty();
  if (is_dict()) return !as_dict().empty();
  return true;
}

std::string Value::str() const {
  if (is_undefined()) return "";
  if (is_string()) return as_string();
  return repr();
}

std::string Value::repr() const {
  if (is_undefined()) return "Undefined";
  if (is_none()) return "None";
  if (is_bool()) return truthy() ? "True" : "False";
  if (is_int()) return std::to_string(as_int());
  if (is_number()) return python_float(as_double());
  if (is_string()) return python_string_repr(as_string());
  if (is_list()) {
    std::string out = "[";
    for (size_t i = 0; i < as_list().size(); ++i) out += (i > 0 ? ", " : "") + as_list()[i].repr();
    return out + "]";
  }
  if (is_dict()) return dict_repr(as_dict());
  return "<Namespace " + dict_repr(as_namespace().attributes) + ">";
}

std::string Value::type_name() const {
  if (is_undefined()) return "undefined";
  if (is_none()) return "NoneType";
  if (is_bool()) return "bool";
  if (is_int()) return "int";
  if (is_number()) return "float";
  if (is_string()) return "str";
  if (is_list()) return "list";
  if (is_dict()) return "dict";
  return "Namespace";
}

Value Value::attribute(std::string_view key) const {
  const Dict* entries = is_dict()        ? &as_dict()
                        : is_namespace() ? &as_namespace().attributes
                                         : nullptr;
  const Value* found = entries != nullptr ? find_entry(*entries, key) : nullptr;
  return found != nullptr ? *found : Value(Undefined{std::string(key)});
}

const Value* find_entry(const Dict& dict, std::string_view key) {
  for (const auto& [name, value] : dict) {
    if (name == key) return &value;
  }
  return nullptr;
}

bool operator==(const Value& left, const Value& right) {
  if (left.is_number() && right.is_number()) {
    if (left.is_int() && right.is_int()) return left.as_int() == right.as_int();
    return left.as_double() == right.as_double();
  }
  if (left.is_string() && right.is_string()) return left.as_string() == right.as_string();
  if (left.is_none() || right.is_none()) return left.is_none() && right.is_none();
  if (left.is_undefined() || right.is_undefined())
    return left.is_undefined() && right.is_undefined();
  if (left.is_list() && right.is_list()) return left.as_list() == right.as_list();
  if (left.is_dict() && right.is_dict()) {
    const Dict& a = left.as_dict();
    const Dict& b = right.as_dict();
    return a.size() == b.size() && std::all_of(a.begin(), a.end(), [&](const auto& entry) {
             return right.attribute(entry.first) == entry.second;
           });
  }
  if (left.is_namespace() && right.is_namespace())
    return &left.as_namespace() == &right.as_namespace();
  return false;
}

bool less_than(const Value& left, const Value& right, int line) {
  if (left.is_number() && right.is_number()) {
    if (left.is_int() && right.is_int()) return left.as_int() < right.as_int();
    return left.as_double() < right.as_double();
  }
  // UTF-8 byte order is code point order, which is how Python compares strings.
  if (left.is_string() && right.is_string()) return left.as_string() < right.as_string();
  if (left.is_list() && right.is_list()) {
    const List& a = left.as_list();
    const List& b = right.as_list();
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
      if (!(a[i] == b[i])) return less_than(a[i], b[i], line);
    }
    return a.size() < b.size();
  }
  fail_at(line, "cannot order values of types {} and {}", left.type_name(), right.type_name());
}

std::string to_json_text(const Value& value, int indent, int line) {
  std::string out;
  append_json(value, indent, 0, line, out);
  return out;
}

}  // namespace mlaserve::tokenizer::jinja
