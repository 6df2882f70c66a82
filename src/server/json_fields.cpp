#include "server/json_fields.h"

#include <fmt/format.h>

#include <cmath>
#include <utility>

#include "server/api_error.h"

namespace mlaserve::server {

namespace {

ApiError wrong_type(std::string_view key, std::string_view expected, const nlohmann::json& value) {
  return invalid_request(
      fmt::format("'{}' must be {}, got {}", key, expected,
                  value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)),
      std::string(key));
}

std::optional<int64_t> as_int(const nlohmann::json& value) {
  if (value.is_number_integer()) {
    if (value.is_number_unsigned() && value.get<uint64_t>() > INT64_MAX) return std::nullopt;
    return value.get<int64_t>();
  }
  if (value.is_number_float()) {
    const double number = value.get<double>();
    // 2^63 is the first double past int64's range.
    if (std::trunc(number) == number && std::abs(number) < 0x1p63) {
      return static_cast<int64_t>(number);
    }
  }
  return std::nullopt;
}

bool is_integer_array(const nlohmann::json& value) {
  if (!value.is_array()) return false;
  for (const nlohmann::json& item : value) {
    if (!item.is_number_integer()) return false;
  }
  return true;
}

// The parser itself is iterative, but dumping a value (error messages quote it) recurses once
// per level, so a body of a million '[' could exhaust a server thread's stack. No request field
// nests anywhere near this deep.
constexpr int kMaxNestingDepth = 128;

template <typename Json>
bool refuse_deep_nesting(int depth, nlohmann::json::parse_event_t event, Json&) {
  const bool opens = event == nlohmann::json::parse_event_t::object_start ||
                     event == nlohmann::json::parse_event_t::array_start;
  // `depth` counts the arrays and objects around the one that opens (0 for the body itself).
  if (opens && depth >= kMaxNestingDepth) {
    throw invalid_request(fmt::format("Request body nests arrays and objects deeper than {} levels",
                                      kMaxNestingDepth));
  }
  return true;
}

}  // namespace

nlohmann::json parse_json_object(const std::string& body) {
  nlohmann::json parsed = parse_json_text(body, "Request body", "");
  if (!parsed.is_object()) throw invalid_request("Request body must be a JSON object");
  return parsed;
}

namespace {

template <typename Json>
Json parse_text(const std::string& text, std::string_view what, std::string_view param) {
  try {
    return Json::parse(text, refuse_deep_nesting<Json>);
  } catch (const nlohmann::json::exception& error) {
    // Not just parse_error: a number past double's range such as 1e400 is an out_of_range.
    throw invalid_request(fmt::format("{} is not valid JSON: {}", what, error.what()),
                          std::string(param));
  }
}

}  // namespace

nlohmann::json parse_json_text(const std::string& text, std::string_view what,
                               std::string_view param) {
  return parse_text<nlohmann::json>(text, what, param);
}

nlohmann::ordered_json parse_ordered_json_text(const std::string& text, std::string_view what,
                                               std::string_view param) {
  return parse_text<nlohmann::ordered_json>(text, what, param);
}

const nlohmann::json* field(const nlohmann::json& object, std::string_view key) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

namespace {

// The typed reads of a field's value (nullptr: not given), naming the field `name` in errors.
std::optional<int64_t> int_value(const nlohmann::json* value, std::string_view name) {
  if (!value) return std::nullopt;
  const std::optional<int64_t> number = as_int(*value);
  if (!number) throw wrong_type(name, "an integer", *value);
  return number;
}

std::optional<double> number_value(const nlohmann::json* value, std::string_view name) {
  if (!value) return std::nullopt;
  if (!value->is_number()) throw wrong_type(name, "a number", *value);
  return value->get<double>();
}

std::optional<bool> bool_value(const nlohmann::json* value, std::string_view name) {
  if (!value) return std::nullopt;
  if (!value->is_boolean()) throw wrong_type(name, "a boolean", *value);
  return value->get<bool>();
}

std::optional<std::string> string_value(const nlohmann::json* value, std::string_view name) {
  if (!value) return std::nullopt;
  if (!value->is_string()) throw wrong_type(name, "a string", *value);
  return value->get<std::string>();
}

}  // namespace

std::optional<int64_t> read_int(const nlohmann::json& object, std::string_view key) {
  return int_value(field(object, key), key);
}

std::optional<double> read_number(const nlohmann::json& object, std::string_view key) {
  return number_value(field(object, key), key);
}

std::optional<bool> read_bool(const nlohmann::json& object, std::string_view key) {
  return bool_value(field(object, key), key);
}

std::optional<std::string> read_string(const nlohmann::json& object, std::string_view key) {
  return string_value(field(object, key), key);
}

std::vector<std::string> read_string_or_list(const nlohmann::json& object, std::string_view key) {
  const nlohmann::json* value = field(object, key);
  if (!value) return {};
  if (value->is_string()) return {value->get<std::string>()};
  if (!value->is_array()) throw wrong_type(key, "a string or a list of strings", *value);
  std::vector<std::string> strings;
  for (const nlohmann::json& item : *value) {
    if (!item.is_string()) throw wrong_type(key, "a string or a list of strings", *value);
    strings.push_back(item.get<std::string>());
  }
  return strings;
}

std::vector<int32_t> read_token_ids(const nlohmann::json& value, std::string_view param,
                                    int32_t vocab_size) {
  if (!is_integer_array(value)) throw wrong_type(param, "a list of token ids", value);
  std::vector<int32_t> ids;
  ids.reserve(value.size());
  for (const nlohmann::json& item : value) {
    const std::optional<int64_t> id = as_int(item);
    if (!id || *id < 0 || *id >= vocab_size) {
      throw invalid_request(fmt::format("'{}' holds token id {}, outside the vocabulary [0, {})",
                                        param, item.dump(), vocab_size),
                            std::string(param));
    }
    ids.push_back(static_cast<int32_t>(*id));
  }
  return ids;
}

FieldsAt::FieldsAt(const nlohmann::json& value, std::string path)
    : object_(value), path_(std::move(path)) {
  if (!value.is_object()) throw wrong_type(path_, "an object", value);
}

std::string FieldsAt::path_of(std::string_view key) const {
  return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
}

std::optional<std::string> FieldsAt::string(std::string_view key) const {
  return string_value(get(key), path_of(key));
}

std::optional<int64_t> FieldsAt::integer(std::string_view key) const {
  return int_value(get(key), path_of(key));
}

std::optional<double> FieldsAt::number(std::string_view key) const {
  return number_value(get(key), path_of(key));
}

std::optional<bool> FieldsAt::boolean(std::string_view key) const {
  return bool_value(get(key), path_of(key));
}

const nlohmann::json* FieldsAt::list(std::string_view key) const {
  const nlohmann::json* value = get(key);
  if (value && !value->is_array()) throw wrong_type(path_of(key), "a list", *value);
  return value;
}

std::optional<FieldsAt> FieldsAt::object(std::string_view key) const {
  const nlohmann::json* value = get(key);
  if (!value) return std::nullopt;
  return FieldsAt(*value, path_of(key));
}

std::string FieldsAt::required_string(std::string_view key) const {
  std::optional<std::string> value = string(key);
  if (!value) throw invalid_request(fmt::format("'{}' is required", path_of(key)), path_of(key));
  return std::move(*value);
}

const nlohmann::json& FieldsAt::required_list(std::string_view key) const {
  const nlohmann::json* value = list(key);
  if (!value) throw invalid_request(fmt::format("'{}' is required", path_of(key)), path_of(key));
  return *value;
}

FieldsAt FieldsAt::required_object(std::string_view key) const {
  std::optional<FieldsAt> value = object(key);
  if (!value) throw invalid_request(fmt::format("'{}' is required", path_of(key)), path_of(key));
  return *value;
}

std::string item_path(std::string_view list_path, size_t index) {
  return fmt::format("{}[{}]", list_path, index);
}

}  // namespace mlaserve::server
