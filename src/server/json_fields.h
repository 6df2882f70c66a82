// Typed reads of request-body fields. A field that is absent or null reads as "not given"
// (many clients send null for options they leave unset); a field of the wrong type is a 400
// that names it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace mlaserve::server {

// Parses a request body that must be a JSON object (400 otherwise, with the parser's reason).
nlohmann::json parse_json_object(const std::string& body);
// Parses JSON text found inside a request (e.g. a schema sent as a string); a 400 naming `what`
// and `param` if it is not valid JSON.
nlohmann::json parse_json_text(const std::string& text, std::string_view what,
                               std::string_view param);
// The same, keeping object keys in the text's order (a JSON schema's properties).
nlohmann::ordered_json parse_ordered_json_text(const std::string& text, std::string_view what,
                                               std::string_view param);

// The value of `key`, or nullptr when it is absent or null.
const nlohmann::json* field(const nlohmann::json& object, std::string_view key);

// Integers also accept integral floats such as 10.0 (what JavaScript clients may send).
std::optional<int64_t> read_int(const nlohmann::json& object, std::string_view key);
std::optional<double> read_number(const nlohmann::json& object, std::string_view key);
std::optional<bool> read_bool(const nlohmann::json& object, std::string_view key);
std::optional<std::string> read_string(const nlohmann::json& object, std::string_view key);
// A string or a list of strings (the "stop" field); empty when not given.
std::vector<std::string> read_string_or_list(const nlohmann::json& object, std::string_view key);

// The fields of an object nested in a body, named by their path in errors ("messages[2].content"):
// the same reads as above, plus required fields and nested lists and objects.
class FieldsAt {
 public:
  // 400 naming `path` unless `value` is an object.
  FieldsAt(const nlohmann::json& value, std::string path);

  const nlohmann::json& json() const { return object_; }
  const std::string& path() const { return path_; }
  std::string path_of(std::string_view key) const;

  // The value of `key`, or nullptr when it is absent or null.
  const nlohmann::json* get(std::string_view key) const { return field(object_, key); }
  std::optional<std::string> string(std::string_view key) const;
  std::optional<int64_t> integer(std::string_view key) const;
  std::optional<double> number(std::string_view key) const;
  std::optional<bool> boolean(std::string_view key) const;
  // A list or object field, nullptr when absent; a 400 when it has another type.
  const nlohmann::json* list(std::string_view key) const;
  std::optional<FieldsAt> object(std::string_view key) const;
  // Required fields: a 400 naming the field when absent, null or of another type.
  std::string required_string(std::string_view key) const;
  const nlohmann::json& required_list(std::string_view key) const;
  FieldsAt required_object(std::string_view key) const;

 private:
  const nlohmann::json& object_;
  std::string path_;
};

// "path[index]": the path of a list's item.
std::string item_path(std::string_view list_path, size_t index);

// Token ids in [0, vocab_size): `value` must be an array of integers. `param` names it in errors.
std::vector<int32_t> read_token_ids(const nlohmann::json& value, std::string_view param,
                                    int32_t vocab_size);

}  // namespace mlaserve::server
