// JSON Schema, the subset OpenAI's structured outputs use, compiled to rules matching the JSON
// values valid for a schema.
//
// Supported:
// - type: object, array, string, number, integer, boolean, null, or a list of them (any of
//   them). Without type, a schema with properties, required or additionalProperties is an
//   object, one with items, minItems or maxItems an array, one with minLength or maxLength a
//   string, any other any JSON value ({} and true too).
// - properties, required, additionalProperties: with properties, exactly the listed properties
//   are generated, in the schema's order, the required ones always and each optional one or not;
//   additionalProperties then only has to be a boolean or a schema (no other key is ever
//   generated). With no properties, additionalProperties false allows only {}, and true, absent
//   or a schema allows any keys with values of that schema.
// - items (absent or true: any values; false: only []), minItems, maxItems.
// - minLength, maxLength, in code points (an escape is one character, an escaped surrogate pair
//   too).
// - enum and const, of any JSON values, each written compactly with object keys in the schema's
//   order; with type, only the values of that type. They combine with nothing else but
//   annotations.
// - anyOf, and oneOf read as anyOf (a value may match more than one branch).
// - $ref to "#" or to any JSON pointer "#/..." within the schema ("#/$defs/NAME",
//   "#/definitions/NAME"), recursion included; $defs and definitions hold the targets.
// - Annotations, ignored: title, description, $schema, $id, $comment, default, examples, strict,
//   deprecated, readOnly, writeOnly.
// Every other keyword (pattern, format, minimum, not, allOf, patternProperties, ...) and every
// malformed value is a GrammarError naming the keyword and the JSON pointer of its schema, as is
// a schema for which no finite value is valid (recursion through required properties).
#pragma once

#include <nlohmann/json.hpp>

#include "grammar/json_rules.h"
#include "grammar/rule_set.h"

namespace mlaserve::grammar {

RuleSet::Rule compile_json_schema(JsonRules& json, RuleSet& rules,
                                  const nlohmann::ordered_json& schema);

}  // namespace mlaserve::grammar
