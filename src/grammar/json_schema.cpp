#include "grammar/json_schema.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>

#include "grammar/grammar.h"

namespace mlaserve::grammar {
namespace {

using Json = nlohmann::ordered_json;
using Rule = RuleSet::Rule;

const std::set<std::string_view> kAnnotations = {"title",      "description", "$schema",  "$id",
                                                 "$comment",   "default",     "examples", "strict",
                                                 "deprecated", "readOnly",    "writeOnly"};
const std::set<std::string_view> kDefinitions = {"$defs", "definitions"};
const std::set<std::string_view> kValueKeywords = {
    "type",      "properties", "required", "additionalProperties",
    "items",     "minItems",   "maxItems", "minLength",
    "maxLength", "enum",       "const",    "anyOf",
    "oneOf",     "$ref"};
const std::set<std::string_view> kTypes = {"object",  "array",   "string", "number",
                                           "integer", "boolean", "null"};

// Keywords that imply a type when a schema has none.
const std::vector<std::pair<std::string_view, std::vector<std::string_view>>> kImpliedTypes = {
    {"object", {"properties", "required", "additionalProperties"}},
    {"array", {"items", "minItems", "maxItems"}},
    {"string", {"minLength", "maxLength"}},
};

std::string escape_pointer_token(std::string_view token) {
  std::string out;
  for (const char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

[[noreturn]] void schema_error(const std::string& what, const std::string& keyword,
                               const std::string& at) {
  throw GrammarError("json_schema: " + what + " (at " + (at.empty() ? "the root" : at) + ")",
                     keyword);
}

bool has_type(const Json& value, std::string_view type) {
  if (type == "integer") return value.is_number_integer() || value.is_number_unsigned();
  if (type == "number") return value.is_number();
  if (type == "string") return value.is_string();
  if (type == "boolean") return value.is_boolean();
  if (type == "null") return value.is_null();
  if (type == "array") return value.is_array();
  return value.is_object();
}

class SchemaCompiler {
 public:
  SchemaCompiler(JsonRules& json, RuleSet& rules, const Json& root)
      : json_(json), rules_(rules), root_(root) {}

  // The root goes through the references so that "#" does not compile it a second time.
  Rule compile_root() {
    const Rule rule = rules_.declare();
    references_.emplace("", rule);
    rules_.define(rule, compile(root_, ""));
    return rule;
  }

 private:
  Rule compile(const Json& schema, const std::string& at) {
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) schema_error("schema false allows no value", "false", at);
      return json_.value();
    }
    if (!schema.is_object()) schema_error("a schema must be an object or a boolean", "", at);
    check_keywords(schema, at);
    if (schema.contains("$ref")) return reference(schema, at);
    if (schema.contains("anyOf")) return any_of(schema, "anyOf", at);
    if (schema.contains("oneOf")) return any_of(schema, "oneOf", at);
    if (schema.contains("enum")) return enumeration(schema, "enum", schema["enum"], at);
    if (schema.contains("const"))
      return enumeration(schema, "const", Json::array({schema["const"]}), at);
    std::vector<Rule> alternatives;
    for (const std::string& type : types(schema, at))
      alternatives.push_back(typed(type, schema, at));
    return rules_.choice(std::move(alternatives));
  }

  static void check_keywords(const Json& schema, const std::string& at) {
    for (const auto& [keyword, value] : schema.items()) {
      if (!kAnnotations.contains(keyword) && !kDefinitions.contains(keyword) &&
          !kValueKeywords.contains(keyword))
        schema_error("keyword '" + keyword + "' is not supported", keyword, at);
    }
  }

  // A keyword that stands alone: next to it only annotations, definitions and `allowed`.
  static void check_alone(const Json& schema, const std::string& keyword, const std::string& at,
                          std::string_view allowed = "") {
    for (const auto& [other, value] : schema.items()) {
      if (other != keyword && other != allowed && kValueKeywords.contains(other))
        schema_error("keyword '" + other + "' next to '" + keyword + "' is not supported", other,
                     at);
    }
  }

  Rule reference(const Json& schema, const std::string& at) {
    check_alone(schema, "$ref", at);
    const Json& ref = schema["$ref"];
    if (!ref.is_string() || !ref.get<std::string>().starts_with("#"))
      schema_error("'$ref' must be \"#\" or \"#/...\" (a JSON pointer within the schema)", "$ref",
                   at);
    const std::string pointer = ref.get<std::string>().substr(1);
    if (const auto it = references_.find(pointer); it != references_.end()) return it->second;
    const Json* target = resolve(pointer);
    if (!target)
      schema_error("'$ref' target '" + ref.get<std::string>() + "' not found", "$ref", at);
    const Rule rule = rules_.declare();
    references_.emplace(pointer, rule);
    rules_.define(rule, compile(*target, pointer));
    return rule;
  }

  const Json* resolve(const std::string& pointer) const {
    try {
      const Json::json_pointer parsed(pointer);
      return root_.contains(parsed) ? &root_.at(parsed) : nullptr;
    } catch (const nlohmann::json::exception&) {
      return nullptr;
    }
  }

  Rule any_of(const Json& schema, const std::string& keyword, const std::string& at) {
    check_alone(schema, keyword, at);
    const Json& branches = schema[keyword];
    if (!branches.is_array() || branches.empty())
      schema_error("'" + keyword + "' must be a non-empty array of schemas", keyword, at);
    std::vector<Rule> alternatives;
    for (size_t i = 0; i < branches.size(); ++i)
      alternatives.push_back(compile(branches[i], at + "/" + keyword + "/" + std::to_string(i)));
    return rules_.choice(std::move(alternatives));
  }

  Rule enumeration(const Json& schema, const std::string& keyword, const Json& values,
                   const std::string& at) {
    check_alone(schema, keyword, at, "type");
    if (!values.is_array() || values.empty())
      schema_error("'" + keyword + "' must be a non-empty array", keyword, at);
    const std::vector<std::string> allowed_types =
        schema.contains("type") ? types(schema, at)
                                : std::vector<std::string>(kTypes.begin(), kTypes.end());
    std::vector<Rule> literals;
    for (const Json& value : values) {
      const bool typed = std::any_of(allowed_types.begin(), allowed_types.end(),
                                     [&](const std::string& t) { return has_type(value, t); });
      if (typed) literals.push_back(rules_.literal(value.dump()));
    }
    if (literals.empty())
      schema_error("no value of '" + keyword + "' has the schema's type", keyword, at);
    return rules_.choice(std::move(literals));
  }

  static std::vector<std::string> types(const Json& schema, const std::string& at) {
    if (!schema.contains("type")) return {implied_type(schema)};
    const Json& type = schema["type"];
    const Json list = type.is_array() ? type : Json::array({type});
    std::vector<std::string> names;
    for (const Json& name : list) {
      if (!name.is_string() || !kTypes.contains(name.get<std::string>()))
        schema_error(
            "'type' must be one of object, array, string, number, integer, boolean, null "
            "or a non-empty list of them",
            "type", at);
      names.push_back(name.get<std::string>());
    }
    if (names.empty()) schema_error("'type' must not be an empty list", "type", at);
    return names;
  }

  static std::string implied_type(const Json& schema) {
    for (const auto& [type, keywords] : kImpliedTypes) {
      for (const std::string_view keyword : keywords) {
        if (schema.contains(keyword)) return std::string(type);
      }
    }
    return "any";
  }

  Rule typed(const std::string& type, const Json& schema, const std::string& at) {
    if (type == "object") return object(schema, at);
    if (type == "array") return array(schema, at);
    if (type == "string") return string(schema, at);
    if (type == "number") return json_.number();
    if (type == "integer") return json_.integer();
    if (type == "boolean") return json_.boolean();
    if (type == "null") return json_.null();
    return json_.value();
  }

  // A count keyword's value: a non-negative integer up to kMaxRepeatCount, or nullopt if absent.
  static std::optional<int64_t> count(const Json& schema, const std::string& keyword,
                                      const std::string& at) {
    if (!schema.contains(keyword)) return std::nullopt;
    const Json& value = schema[keyword];
    if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<int64_t>() >= 0))
      schema_error("'" + keyword + "' must be a non-negative integer", keyword, at);
    if (value.get<uint64_t>() > static_cast<uint64_t>(kMaxRepeatCount))
      schema_error(
          "'" + keyword + "' above " + std::to_string(kMaxRepeatCount) + " is not supported",
          keyword, at);
    return value.get<int64_t>();
  }

  // The [min, max] of a pair of count keywords.
  static std::pair<int64_t, std::optional<int64_t>> bounds(const Json& schema,
                                                           const std::string& min_keyword,
                                                           const std::string& max_keyword,
                                                           const std::string& at) {
    const int64_t min = count(schema, min_keyword, at).value_or(0);
    const std::optional<int64_t> max = count(schema, max_keyword, at);
    if (max && *max < min)
      schema_error("'" + max_keyword + "' is below '" + min_keyword + "'", max_keyword, at);
    return {min, max};
  }

  Rule string(const Json& schema, const std::string& at) {
    const auto [min, max] = bounds(schema, "minLength", "maxLength", at);
    return json_.string(min, max);
  }

  Rule array(const Json& schema, const std::string& at) {
    auto [min, max] = bounds(schema, "minItems", "maxItems", at);
    const Json items = schema.value("items", Json(true));
    if (items == Json(false)) {
      if (min > 0) schema_error("'minItems' above 0 with items false", "minItems", at);
      max = 0;
    }
    const Rule item = items == Json(false) ? json_.value() : compile(items, at + "/items");
    return json_.array(item, min, max);
  }

  Rule object(const Json& schema, const std::string& at) {
    const Json additional = schema.value("additionalProperties", Json(true));
    if (!additional.is_boolean() && !additional.is_object())
      schema_error("'additionalProperties' must be a boolean or a schema", "additionalProperties",
                   at);
    const Json properties = schema.value("properties", Json::object());
    if (!properties.is_object())
      schema_error("'properties' must be an object of schemas", "properties", at);
    const std::set<std::string> required = required_names(schema, properties, at);
    if (!properties.empty()) return listed_properties(properties, required, at);
    if (additional == Json(false)) return rules_.literal("{}");
    const Rule value = additional == Json(true) ? json_.value()
                                                : compile(additional, at + "/additionalProperties");
    return json_.object(value);
  }

  static std::set<std::string> required_names(const Json& schema, const Json& properties,
                                              const std::string& at) {
    const Json list = schema.value("required", Json::array());
    if (!list.is_array()) schema_error("'required' must be a list of names", "required", at);
    std::set<std::string> names;
    for (const Json& name : list) {
      if (!name.is_string()) schema_error("'required' must be a list of names", "required", at);
      if (!properties.contains(name.get<std::string>()))
        schema_error("required property '" + name.get<std::string>() + "' is not in properties",
                     "required", at);
      names.insert(name.get<std::string>());
    }
    return names;
  }

  // '{' ws first(0) '}', where first(i) writes some of properties i.. when none was written
  // before them, and after(i) when one was (so each starts with a comma); a required property
  // cannot be skipped.
  Rule listed_properties(const Json& properties, const std::set<std::string>& required,
                         const std::string& at) {
    std::vector<std::pair<std::string, Rule>> members;
    for (const auto& [name, schema] : properties.items()) {
      const Rule value = compile(schema, at + "/properties/" + escape_pointer_token(name));
      members.emplace_back(name, json_.member(name, value));
    }
    const Rule comma = rules_.sequence({rules_.literal(","), json_.whitespace()});
    Rule first = rules_.empty();
    Rule after = rules_.empty();
    for (auto it = members.rbegin(); it != members.rend(); ++it) {
      const auto& [name, member] = *it;
      const Rule write_first = rules_.sequence({member, after});
      const Rule write_after = rules_.sequence({comma, member, after});
      const bool skippable = !required.contains(name);
      first = skippable ? rules_.choice({write_first, first}) : write_first;
      after = skippable ? rules_.choice({write_after, after}) : write_after;
    }
    return rules_.sequence({rules_.literal("{"), json_.whitespace(), first, rules_.literal("}")});
  }

  JsonRules& json_;
  RuleSet& rules_;
  const Json& root_;
  std::map<std::string, Rule> references_;  // by JSON pointer
};

}  // namespace

RuleSet::Rule compile_json_schema(JsonRules& json, RuleSet& rules, const Json& schema) {
  return SchemaCompiler(json, rules, schema).compile_root();
}

}  // namespace mlaserve::grammar
