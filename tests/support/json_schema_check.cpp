#include "support/json_schema_check.h"

#include <algorithm>
#include <cmath>

namespace mlaserve::testing {

namespace {

using Json = nlohmann::ordered_json;

class Validator {
 public:
  Validator(const Json& root, SchemaReading reading) : root_(root), reading_(reading) {}

  std::string check(const Json& value, const Json& schema, const std::string& at) const {
    if (schema.is_boolean()) return schema.get<bool>() ? "" : at + ": the schema is false";
    if (schema.contains("$ref")) {
      const std::string ref = schema["$ref"].get<std::string>();
      return check(value, root_.at(Json::json_pointer(ref.substr(1))), at);
    }
    for (const char* keyword : {"anyOf", "oneOf"}) {
      if (!schema.contains(keyword)) continue;
      for (const Json& branch : schema[keyword]) {
        if (check(value, branch, at).empty()) return "";
      }
      return at + ": no branch of " + keyword + " matches " + value.dump();
    }
    if (schema.contains("const") && value != schema["const"]) return at + ": not the const";
    if (schema.contains("enum")) {
      const Json& values = schema["enum"];
      if (std::find(values.begin(), values.end(), value) == values.end()) {
        return at + ": " + value.dump() + " is not in the enum";
      }
    }
    if (!schema.contains("type")) return check_typed(value, schema, implied_type(schema), at);
    const Json types = schema["type"].is_array() ? schema["type"] : Json::array({schema["type"]});
    std::string why = at + ": no type of " + schema["type"].dump() + " fits " + value.dump();
    for (const Json& type : types) {
      const std::string reason = check_typed(value, schema, type.get<std::string>(), at);
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

  // Every byte that does not continue a UTF-8 sequence starts a code point.
  static size_t code_points(const std::string& utf8) {
    return static_cast<size_t>(std::count_if(
        utf8.begin(), utf8.end(), [](char c) { return (static_cast<uint8_t>(c) & 0xC0) != 0x80; }));
  }

  static bool within(size_t n, const Json& schema, const char* min, const char* max) {
    return n >= schema.value(min, size_t{0}) &&
           (!schema.contains(max) || n <= schema[max].get<size_t>());
  }

  std::string check_typed(const Json& value, const Json& schema, const std::string& type,
                          const std::string& at) const {
    if (type == "any") return "";
    if (type == "null") return value.is_null() ? "" : at + ": not null";
    if (type == "boolean") return value.is_boolean() ? "" : at + ": not a boolean";
    if (type == "number") return value.is_number() ? "" : at + ": not a number";
    if (type == "integer") {
      // JSON Schema's integer is any number without a fraction: 21110583642894020035 is one,
      // though past uint64 the parser holds it as a double.
      const bool integral =
          value.is_number_integer() ||
          (value.is_number_float() && value.get<double>() == std::floor(value.get<double>()));
      return integral ? "" : at + ": not an integer";
    }
    if (type == "string") {
      if (!value.is_string()) return at + ": not a string";
      return within(code_points(value.get<std::string>()), schema, "minLength", "maxLength")
                 ? ""
                 : at + ": string length out of bounds";
    }
    if (type == "array") return check_array(value, schema, at);
    return check_object(value, schema, at);
  }

  std::string check_array(const Json& value, const Json& schema, const std::string& at) const {
    if (!value.is_array()) return at + ": not an array";
    if (!within(value.size(), schema, "minItems", "maxItems")) {
      return at + ": item count out of bounds";
    }
    for (size_t i = 0; i < value.size(); ++i) {
      const std::string why =
          check(value[i], schema.value("items", Json(true)), at + "/" + std::to_string(i));
      if (!why.empty()) return why;
    }
    return "";
  }

  std::string check_object(const Json& value, const Json& schema, const std::string& at) const {
    if (!value.is_object()) return at + ": not an object";
    for (const Json& name : schema.value("required", Json::array())) {
      if (!value.contains(name.get<std::string>())) return at + ": missing " + name.dump();
    }
    const Json properties = schema.value("properties", Json::object());
    if (reading_ == SchemaReading::Generated && !properties.empty()) {
      return check_listed_in_order(value, properties, at);
    }
    const Json additional = schema.value("additionalProperties", Json(true));
    for (const auto& [key, member] : value.items()) {
      const Json& member_schema = properties.contains(key) ? properties[key] : additional;
      const std::string why = check(member, member_schema, at + "/" + key);
      if (!why.empty()) return why;
    }
    return "";
  }

  // The listed properties only, in the schema's order.
  std::string check_listed_in_order(const Json& value, const Json& properties,
                                    const std::string& at) const {
    auto expected = properties.begin();
    for (const auto& [key, member] : value.items()) {
      while (expected != properties.end() && expected.key() != key) ++expected;
      if (expected == properties.end()) return at + "/" + key + ": unknown or out of order";
      const std::string why = check(member, expected.value(), at + "/" + key);
      if (!why.empty()) return why;
    }
    return "";
  }

  const Json& root_;
  SchemaReading reading_;
};

// Records where parsing failed; every other event is accepted.
struct FirstError : nlohmann::json_sax<nlohmann::json> {
  size_t position = SIZE_MAX;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t at, const std::string&,
                   const nlohmann::detail::exception&) override {
    position = at;
    return false;
  }
};

}  // namespace

std::string json_schema_violation(const nlohmann::ordered_json& schema,
                                  const nlohmann::ordered_json& document, SchemaReading reading) {
  return Validator(schema, reading).check(document, schema, "");
}

bool is_json_prefix(const std::string& text) {
  FirstError sax;
  nlohmann::json::sax_parse(text, &sax);
  // A prefix fails only for want of more input: nlohmann reports that error one past the end (a
  // wrong byte is reported at its own position, counted from 1).
  return sax.position == SIZE_MAX || sax.position > text.size();
}

}  // namespace mlaserve::testing
