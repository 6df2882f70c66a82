// The tests' oracle: validates a parsed JSON value against a schema of the supported subset as
// json_schema.h reads it (listed properties only, in the schema's order; lengths in code points),
// independently of the grammar engine.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace mlaserve::grammar::testing {

using Json = nlohmann::ordered_json;

class SchemaValidator {
 public:
  explicit SchemaValidator(const Json& root) : root_(root) {}

  // "" when `value` is valid for `schema`, else why not.
  std::string check(const Json& value, const Json& schema) const {
    if (schema.is_boolean()) return schema.get<bool>() ? "" : "schema false";
    if (schema.contains("$ref")) {
      const std::string ref = schema["$ref"].get<std::string>();
      return check(value, root_.at(Json::json_pointer(ref.substr(1))));
    }
    for (const char* keyword : {"anyOf", "oneOf"}) {
      if (!schema.contains(keyword)) continue;
      for (const Json& branch : schema[keyword]) {
        if (check(value, branch).empty()) return "";
      }
      return std::string("no branch of ") + keyword + " matches " + value.dump();
    }
    if (schema.contains("const") && value != schema["const"]) return "not the const";
    if (schema.contains("enum")) {
      const Json& values = schema["enum"];
      if (std::find(values.begin(), values.end(), value) == values.end()) return "not in enum";
    }
    if (!schema.contains("type")) return check_typed(value, schema, implied_type(schema));
    const Json types = schema["type"].is_array() ? schema["type"] : Json::array({schema["type"]});
    std::string why = "no type of " + schema["type"].dump() + " fits " + value.dump();
    for (const Json& type : types) {
      const std::string reason = check_typed(value, schema, type.get<std::string>());
      if (reason.empty()) return "";
      why += "; " + reason;
    }
    return why;
  }

 private:
  static std::string implied_type(const Json& schema) {
    if (schema.contains("properties") || schema.contains("required") ||
        schema.contains("additionalProperties"))
      return "object";
    if (schema.contains("items") || schema.contains("minItems") || schema.contains("maxItems"))
      return "array";
    if (schema.contains("minLength") || schema.contains("maxLength")) return "string";
    return "any";
  }

  static size_t code_points(const std::string& utf8) {
    size_t count = 0;
    for (const char c : utf8) count += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
    return count;
  }

  static bool within(size_t n, const Json& schema, const char* min, const char* max) {
    return n >= schema.value(min, size_t{0}) &&
           (!schema.contains(max) || n <= schema[max].get<size_t>());
  }

  std::string check_typed(const Json& value, const Json& schema, const std::string& type) const {
    if (type == "any") return "";
    if (type == "null") return value.is_null() ? "" : "not null";
    if (type == "boolean") return value.is_boolean() ? "" : "not a boolean";
    if (type == "number") return value.is_number() ? "" : "not a number";
    if (type == "integer") {
      const bool integral =
          value.is_number_integer() ||
          (value.is_number_float() && value.get<double>() == std::floor(value.get<double>()));
      return integral ? "" : "not an integer";
    }
    if (type == "string") {
      if (!value.is_string()) return "not a string";
      return within(code_points(value.get<std::string>()), schema, "minLength", "maxLength")
                 ? ""
                 : "string length out of bounds";
    }
    if (type == "array") return check_array(value, schema);
    return check_object(value, schema);
  }

  std::string check_array(const Json& value, const Json& schema) const {
    if (!value.is_array()) return "not an array";
    if (!within(value.size(), schema, "minItems", "maxItems")) return "item count out of bounds";
    for (const Json& item : value) {
      const std::string why = check(item, schema.value("items", Json(true)));
      if (!why.empty()) return "item: " + why;
    }
    return "";
  }

  std::string check_object(const Json& value, const Json& schema) const {
    if (!value.is_object()) return "not an object";
    for (const Json& name : schema.value("required", Json::array())) {
      if (!value.contains(name.get<std::string>())) return "missing " + name.dump();
    }
    const Json properties = schema.value("properties", Json::object());
    if (properties.empty()) {
      const Json additional = schema.value("additionalProperties", Json(true));
      for (const auto& [key, member] : value.items()) {
        const std::string why = check(member, additional);
        if (!why.empty()) return key + ": " + why;
      }
      return "";
    }
    auto expected = properties.begin();
    for (const auto& [key, member] : value.items()) {
      while (expected != properties.end() && expected.key() != key) ++expected;
      if (expected == properties.end()) return "property " + key + " unknown or out of order";
      const std::string why = check(member, expected.value());
      if (!why.empty()) return key + ": " + why;
    }
    return "";
  }

  const Json& root_;
};

}  // namespace mlaserve::grammar::testing
