// A plain JSON-schema validator for the subset structured output supports (type, properties,
// required, additionalProperties, items, minItems/maxItems, minLength/maxLength, enum, const,
// anyOf/oneOf, $defs/definitions with $ref), written for tests: it checks a document the way the
// schema reads, independently of the grammar engine that generated it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace mlaserve::testing {

// "" when `document` satisfies `schema`, else where and why it does not ("/tags/2: not an
// integer"). Keywords outside the subset are ignored.
std::string json_schema_violation(const nlohmann::json& schema, const nlohmann::json& document);

// Whether `text` can be continued into valid JSON: nlohmann's parser reads it without an error
// before its end (an answer cut short by max_tokens is such a prefix).
bool is_json_prefix(const std::string& text);

}  // namespace mlaserve::testing
