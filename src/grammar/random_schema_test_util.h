// Seeded random schemas over the supported JSON-schema subset (nested objects and arrays, enums
// with shared prefixes, const, anyOf, type lists, $defs with a recursive $ref), and random
// documents valid for them, written with random whitespace (as much as the grammars allow) and
// escapes.
#pragma once

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "grammar/json_rules.h"

namespace mlaserve::grammar::testing {

using Json = nlohmann::ordered_json;

class RandomSchemas {
 public:
  explicit RandomSchemas(uint64_t seed) : rng_(seed) {}

  // A root schema with $defs: "tree" (recursive through an optional array of $ref) and "leaf".
  Json schema() {
    Json root = node(0);
    if (!root.is_object() || root.contains("$ref")) root = {{"anyOf", {root, {{"type", "null"}}}}};
    root["$defs"] = {
        {"leaf", leaf()},
        {"tree",
         {{"type", "object"},
          {"properties",
           {{"v", leaf()},
            {"kids", {{"type", "array"}, {"items", {{"$ref", "#/$defs/tree"}}}, {"maxItems", 2}}}}},
          {"required", {"v"}}}}};
    return root;
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  bool coin() { return pick(2) == 0; }

  Json leaf() {
    switch (pick(9)) {
      case 0:
        return {{"type", "string"}};
      case 1: {
        Json s = {{"type", "string"}, {"minLength", pick(3)}};
        s["maxLength"] = s["minLength"].get<int>() + pick(4);
        return s;
      }
      case 2:
        return {{"type", "number"}};
      case 3:
        return {{"type", "integer"}};
      case 4:
        return {{"type", "boolean"}};
      case 5:
        return {
            {"type", coin() ? Json::array({"string", "null"}) : Json::array({"integer", "null"})}};
      case 6:
        return {{"enum", {"a", "ab", "abc", "b", 1, 12, -0.5, nullptr, true}}};
      case 7:
        return {{"const",
                 coin() ? Json("x\"y\\z") : Json({{"k", Json::array({1, "v"})}, {"a", nullptr}})}};
      default:
        return Json::object();  // any value
    }
  }

  Json node(int depth) {
    if (depth >= 3) return leaf();
    switch (pick(7)) {
      case 0:
      case 1:
        return object(depth);
      case 2: {
        Json a = {{"type", "array"}, {"items", node(depth + 1)}};
        if (coin()) a["minItems"] = pick(2);
        if (coin()) a["maxItems"] = a.value("minItems", 0) + pick(3);
        return a;
      }
      case 3:
        return {{"anyOf", {node(depth + 1), node(depth + 1)}}};
      case 4:
        return {{"$ref", coin() ? "#/$defs/tree" : "#/$defs/leaf"}};
      default:
        return leaf();
    }
  }

  Json object(int depth) {
    static const std::vector<std::string> kNames = {"a", "ab", "name", "names", "n", "x y", "é"};
    Json properties = Json::object();
    Json required = Json::array();
    for (const std::string& name : kNames) {
      if (pick(3) != 0) continue;
      properties[name] = node(depth + 1);
      if (coin()) required.push_back(name);
    }
    Json o = {{"type", "object"}, {"properties", properties}};
    if (!required.empty()) o["required"] = required;
    if (coin()) o["additionalProperties"] = false;
    return o;
  }

  std::mt19937_64 rng_;
};

// A random document valid for a schema of RandomSchemas (or any schema of the subset whose
// recursion can stop: optional properties, arrays without minItems, anyOf's first branch).
class RandomDocuments {
 public:
  RandomDocuments(const Json& root, uint64_t seed) : root_(root), rng_(seed) {}

  std::string document() {
    ascii_only_ = pick(3) == 0;
    return write(root_, 0);
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  bool coin() { return pick(2) == 0; }
  const Json& one_of(const Json& list) {
    return list[static_cast<size_t>(pick(static_cast<int>(list.size())))];
  }

  // What JSON grammars allow between tokens (json_rules.h): up to kMaxWhitespace spaces.
  std::string whitespace() {
    return std::string(static_cast<size_t>(pick(kMaxWhitespace + 1)), ' ');
  }

  // A free string, with \u escapes for everything outside ASCII (surrogate pairs too) when
  // ascii_only_. Keys and enum or const values have one spelling, compact: Json::dump().
  std::string dump_string(const std::string& text) const {
    return Json(text).dump(-1, ' ', ascii_only_);
  }

  std::string write(const Json& schema, int depth) {
    if (schema.is_boolean()) return write_any(depth);
    if (schema.contains("$ref")) {
      const std::string ref = schema["$ref"].get<std::string>();
      return write(root_.at(Json::json_pointer(ref.substr(1))), depth + 1);
    }
    if (schema.contains("anyOf"))
      return write(depth > 4 ? schema["anyOf"][0] : one_of(schema["anyOf"]), depth + 1);
    if (schema.contains("enum")) return one_of(schema["enum"]).dump();
    if (schema.contains("const")) return schema["const"].dump();
    if (!schema.contains("type")) return write_any(depth);
    const Json& type = schema["type"];
    return write_typed((type.is_array() ? one_of(type) : type).get<std::string>(), schema, depth);
  }

  std::string write_typed(const std::string& type, const Json& schema, int depth) {
    if (type == "string")
      return write_string(schema.value("minLength", 0), schema.value("maxLength", 8));
    if (type == "integer")
      return std::to_string(std::uniform_int_distribution<int64_t>(-99999, 99999)(rng_));
    if (type == "number") return write_number();
    if (type == "boolean") return coin() ? "true" : "false";
    if (type == "null") return "null";
    if (type == "array") return write_array(schema, depth);
    return write_object(schema, depth);
  }

  std::string write_number() {
    switch (pick(4)) {
      case 0:
        return coin() ? "-0" : "0";
      case 1:
        return Json(std::uniform_real_distribution<double>(-1e6, 1e6)(rng_)).dump();
      case 2:
        return Json(std::ldexp(1.0, pick(200) - 100)).dump();
      default:
        return std::to_string(pick(1000)) + (coin() ? ".5" : "") + (coin() ? "e-7" : "E+12");
    }
  }

  std::string write_string(int min_chars, int max_chars) {
    static const std::vector<std::string> kCharacters = {
        "a",   "Z",  " ",    "\"",       "\\",           "/",
        "\n",  "\t", "\x01", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
        "\x7f"};
    std::string text;
    const int n = min_chars + pick(max_chars - min_chars + 1);
    for (int i = 0; i < n; ++i)
      text += kCharacters[static_cast<size_t>(pick(static_cast<int>(kCharacters.size())))];
    return dump_string(text);
  }

  // The parts in order (a braced list is evaluated left to right, so random draws are too).
  static std::string join(std::initializer_list<std::string> parts) {
    std::string out;
    for (const std::string& part : parts) out += part;
    return out;
  }

  std::string write_array(const Json& schema, int depth) {
    const int min = schema.value("minItems", 0);
    const int max = std::min(schema.value("maxItems", min + 3), min + 3);
    const int n = depth > 4 ? min : min + pick(max - min + 1);
    std::string out = join({"[", whitespace()});
    for (int i = 0; i < n; ++i) {
      if (i > 0) out += join({",", whitespace()});
      out += join({write(schema.value("items", Json::object()), depth + 1), whitespace()});
    }
    return out + ']';
  }

  std::string write_object(const Json& schema, int depth) {
    const Json required = schema.value("required", Json::array());
    std::string out = join({"{", whitespace()});
    bool first = true;
    const Json properties = schema.value("properties", Json::object());
    for (const auto& [name, property] : properties.items()) {
      const bool is_required = std::any_of(required.begin(), required.end(), [&](const Json& r) {
        return r.get<std::string>() == name;
      });
      if (!is_required && (depth > 4 || coin())) continue;
      if (!first) out += join({",", whitespace()});
      first = false;
      out += join({Json(name).dump(), whitespace(), ":", whitespace(), write(property, depth + 1),
                   whitespace()});
    }
    return out + '}';
  }

  std::string write_any(int depth) {
    switch (depth > 4 ? 2 + pick(3) : pick(5)) {
      case 0:
        return join({"[", whitespace(), write_any(depth + 1), whitespace(), "]"});
      case 1:
        return join({"{", whitespace(), "\"k\"", whitespace(), ":", write_any(depth + 1), "}"});
      case 2:
        return write_string(0, 4);
      case 3:
        return write_number();
      default:
        return coin() ? "null" : "false";
    }
  }

  const Json& root_;
  std::mt19937_64 rng_;
  bool ascii_only_ = false;
};

}  // namespace mlaserve::grammar::testing
