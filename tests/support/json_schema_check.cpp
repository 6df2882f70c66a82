#include "support/json_schema_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace mlaserve::testing {

namespace {

using nlohmann::json;

class Validator {
 public:
  explicit Validator(const json& root) : root_(root) {}

  std::string check(const json& schema, const json& value, const std::string& at) const {
    if (schema.is_boolean()) return schema.get<bool>() ? "" : at + ": the schema is false";
    if (schema.contains("$ref")) return check(resolve(schema["$ref"]), value, at);
    for (const std::string& error :
         {check_type(schema, value, at), check_values(schema, value, at),
          check_alternatives(schema, value, at), check_object(schema, value, at),
          check_array(schema, value, at), check_string(schema, value, at)}) {
      if (!error.empty()) return error;
    }
    return "";
  }

 private:
  const json& resolve(const std::string& ref) const {
    if (ref == "#") return root_;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      const std::string p = prefix;
      if (ref.rfind(p, 0) == 0) return root_.at(p.substr(2, p.size() - 3)).at(ref.substr(p.size()));
    }
    throw std::runtime_error("unsupported $ref " + ref);
  }

  static bool has_type(const json& value, const std::string& type) {
    if (type == "object") return value.is_object();
    if (type == "array") return value.is_array();
    if (type == "string") return value.is_string();
    // JSON Schema's integer is any number without a fraction: 21110583642894020035 is one,
    // though past uint64 the parser holds it as a double.
    if (type == "integer") {
      return value.is_number_integer() ||
             (value.is_number_float() && std::floor(value.get<double>()) == value.get<double>());
    }
    if (type == "number") return value.is_number();
    if (type == "boolean") return value.is_boolean();
    if (type == "null") return value.is_null();
    return false;
  }

  static std::string check_type(const json& schema, const json& value, const std::string& at) {
    if (!schema.contains("type")) return "";
    const json types = schema["type"].is_array() ? schema["type"] : json::array({schema["type"]});
    for (const json& type : types) {
      if (has_type(value, type.get<std::string>())) return "";
    }
    return fmt::format("{}: {} is not of type {}", at, value.dump(), schema["type"].dump());
  }

  static std::string check_values(const json& schema, const json& value, const std::string& at) {
    if (schema.contains("const") && schema["const"] != value) {
      return fmt::format("{}: {} is not the const {}", at, value.dump(), schema["const"].dump());
    }
    if (schema.contains("enum")) {
      const json& options = schema["enum"];
      if (std::find(options.begin(), options.end(), value) == options.end()) {
        return fmt::format("{}: {} is not in the enum {}", at, value.dump(), options.dump());
      }
    }
    return "";
  }

  std::string check_alternatives(const json& schema, const json& value,
                                 const std::string& at) const {
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!schema.contains(key)) continue;
      const json& options = schema[key];
      if (std::none_of(options.begin(), options.end(),
                       [&](const json& option) { return check(option, value, at).empty(); })) {
        return fmt::format("{}: {} matches none of {}", at, value.dump(), key);
      }
    }
    return "";
  }

  std::string check_object(const json& schema, const json& value, const std::string& at) const {
    if (!value.is_object()) return "";
    const json properties = schema.value("properties", json::object());
    for (const json& name : schema.value("required", json::array())) {
      if (!value.contains(name.get<std::string>())) {
        return fmt::format("{}: required property {} is missing", at, name.dump());
      }
    }
    const json extra = schema.value("additionalProperties", json(true));
    for (const auto& [name, item] : value.items()) {
      const std::string where = at + "/" + name;
      if (properties.contains(name)) {
        if (std::string error = check(properties[name], item, where); !error.empty()) return error;
      } else if (extra.is_boolean() && !extra.get<bool>()) {
        return fmt::format("{}: property not allowed", where);
      } else if (extra.is_object()) {
        if (std::string error = check(extra, item, where); !error.empty()) return error;
      }
    }
    return "";
  }

  std::string check_array(const json& schema, const json& value, const std::string& at) const {
    if (!value.is_array()) return "";
    if (value.size() < schema.value("minItems", size_t{0}) ||
        value.size() > schema.value("maxItems", SIZE_MAX)) {
      return fmt::format("{}: {} items is outside [minItems, maxItems]", at, value.size());
    }
    if (!schema.contains("items")) return "";
    for (size_t i = 0; i < value.size(); ++i) {
      if (std::string error = check(schema["items"], value[i], fmt::format("{}/{}", at, i));
          !error.empty()) {
        return error;
      }
    }
    return "";
  }

  static std::string check_string(const json& schema, const json& value, const std::string& at) {
    if (!value.is_string()) return "";
    const std::string& text = value.get_ref<const std::string&>();
    // Code points: every byte that does not continue a UTF-8 sequence starts one.
    const auto length = static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
      return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    }));
    if (length < schema.value("minLength", size_t{0}) ||
        length > schema.value("maxLength", SIZE_MAX)) {
      return fmt::format("{}: length {} is outside [minLength, maxLength]", at, length);
    }
    return "";
  }

  const json& root_;
};

// Records where parsing failed; every other event is accepted.
struct FirstError : nlohmann::json_sax<json> {
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

bool is_json_prefix(const std::string& text) {
  FirstError sax;
  json::sax_parse(text, &sax);
  // A prefix fails only for want of more input: nlohmann reports that error one past the end (a
  // wrong byte is reported at its own position, counted from 1).
  return sax.position == SIZE_MAX || sax.position > text.size();
}

std::string json_schema_violation(const nlohmann::json& schema, const nlohmann::json& document) {
  return Validator(schema).check(schema, document, "");
}

}  // namespace mlaserve::testing
