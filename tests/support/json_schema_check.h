// A plain JSON-schema validator for the subset structured output supports (type, properties,
// required, additionalProperties, items, minItems/maxItems, minLength/maxLength in code points,
// enum, const, anyOf/oneOf, $ref to any "#/..." pointer), written for tests: it checks a document
// the way the schema reads, independently of the grammar engine that generated it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace mlaserve::testing {

// How object schemas with "properties" are read. Standard: JSON Schema's way (any order; other
// keys allowed unless additionalProperties says no). Generated: as the grammar generates them
// (src/grammar/json_schema.h): only the listed properties, in the schema's order.
enum class SchemaReading { Standard, Generated };

// "" when `document` satisfies `schema`, else where and why not ("/tags/2: not an integer").
// ordered_json keeps the documents' and schemas' key order, which Generated checks.
std::string json_schema_violation(const nlohmann::ordered_json& schema,
                                  const nlohmann::ordered_json& document,
                                  SchemaReading reading = SchemaReading::Standard);

// Whether `text` can be continued into valid JSON: nlohmann's parser reads it without an error
// before its end (an answer cut short by max_tokens is such a prefix).
bool is_json_prefix(const std::string& text);

}  // namespace mlaserve::testing
