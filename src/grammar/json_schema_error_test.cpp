// JSON-schema compile errors: each unsupported keyword or malformed value names itself and the
// JSON pointer of the schema that has it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "grammar/grammar.h"

namespace mlaserve::grammar {
namespace {

struct SchemaError {
  std::string schema;
  std::string keyword;
  std::string message;  // the whole what()
};

void expect_error(const SchemaError& expected) {
  try {
    json_schema_grammar(nlohmann::ordered_json::parse(expected.schema));
    ADD_FAILURE() << expected.schema << " compiled";
  } catch (const GrammarError& e) {
    EXPECT_EQ(e.keyword(), expected.keyword) << expected.schema;
    EXPECT_EQ(std::string(e.what()), expected.message) << expected.schema;
  }
}

TEST(JsonSchemaErrors, UnsupportedKeywordsNameThemselvesAndWhere) {
  const std::vector<std::string> unsupported = {"pattern",
                                                "format",
                                                "minimum",
                                                "maximum",
                                                "exclusiveMinimum",
                                                "multipleOf",
                                                "not",
                                                "allOf",
                                                "if",
                                                "then",
                                                "else",
                                                "patternProperties",
                                                "propertyNames",
                                                "prefixItems",
                                                "contains",
                                                "uniqueItems",
                                                "minProperties",
                                                "maxProperties",
                                                "dependentRequired",
                                                "nullable"};
  for (const std::string& keyword : unsupported) {
    expect_error({R"({"type": "object", "properties": {"name": {"type": "string", ")" + keyword +
                      R"(": 1}}})",
                  keyword,
                  "json_schema: keyword '" + keyword + "' is not supported (at /properties/name)"});
  }
  expect_error({R"({"pattern": "a"})", "pattern",
                "json_schema: keyword 'pattern' is not supported (at the root)"});
  expect_error({R"({"type": "array", "items": {"anyOf": [{"type": "string"}, {"format": "x"}]}})",
                "format", "json_schema: keyword 'format' is not supported (at /items/anyOf/1)"});
  expect_error({R"({"properties": {"a/b~": {"not": {}}}})", "not",
                "json_schema: keyword 'not' is not supported (at /properties/a~1b~0)"});
  expect_error({R"({"$defs": {"x": {"minimum": 1}}, "$ref": "#/$defs/x"})", "minimum",
                "json_schema: keyword 'minimum' is not supported (at /$defs/x)"});
}

TEST(JsonSchemaErrors, MalformedValuesNameTheirKeyword) {
  const std::vector<SchemaError> errors = {
      {R"({"type": "text"})", "type",
       "json_schema: 'type' must be one of object, array, string, number, integer, boolean, null "
       "or a non-empty list of them (at the root)"},
      {R"({"type": []})", "type", "json_schema: 'type' must not be an empty list (at the root)"},
      {R"({"type": "string", "maxLength": -1})", "maxLength",
       "json_schema: 'maxLength' must be a non-negative integer (at the root)"},
      {R"({"type": "string", "minLength": 3, "maxLength": 2})", "maxLength",
       "json_schema: 'maxLength' is below 'minLength' (at the root)"},
      {R"({"type": "array", "maxItems": 100000})", "maxItems",
       "json_schema: 'maxItems' above 10000 is not supported (at the root)"},
      {R"({"type": "array", "items": false, "minItems": 1})", "minItems",
       "json_schema: 'minItems' above 0 with items false (at the root)"},
      {R"({"properties": {"a": {}}, "required": ["b"]})", "required",
       "json_schema: required property 'b' is not in properties (at the root)"},
      {R"({"required": "a"})", "required",
       "json_schema: 'required' must be a list of names (at the root)"},
      {R"({"enum": []})", "enum", "json_schema: 'enum' must be a non-empty array (at the root)"},
      {R"({"type": "integer", "enum": ["a"]})", "enum",
       "json_schema: no value of 'enum' has the schema's type (at the root)"},
      {R"({"anyOf": {}})", "anyOf",
       "json_schema: 'anyOf' must be a non-empty array of schemas (at the root)"},
      {R"({"anyOf": [{}], "type": "string"})", "type",
       "json_schema: keyword 'type' next to 'anyOf' is not supported (at the root)"},
      {R"({"$ref": "#/$defs/missing"})", "$ref",
       "json_schema: '$ref' target '#/$defs/missing' not found (at the root)"},
      {R"({"$ref": "other.json#/a"})", "$ref",
       "json_schema: '$ref' must be \"#\" or \"#/...\" (a JSON pointer within the schema) (at the "
       "root)"},
      {R"({"$ref": "#", "minLength": 1})", "minLength",
       "json_schema: keyword 'minLength' next to '$ref' is not supported (at the root)"},
      {R"({"properties": {"a": false}})", "false",
       "json_schema: schema false allows no value (at /properties/a)"},
      {R"({"items": 3})", "", "json_schema: a schema must be an object or a boolean (at /items)"},
      {R"({"additionalProperties": 1})", "additionalProperties",
       "json_schema: 'additionalProperties' must be a boolean or a schema (at the root)"},
  };
  for (const SchemaError& e : errors) expect_error(e);
}

TEST(JsonSchemaErrors, RecursionWithoutAFiniteValue) {
  try {
    json_schema_grammar(nlohmann::ordered_json::parse(
        R"({"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]})"));
    ADD_FAILURE() << "compiled";
  } catch (const GrammarError& e) {
    EXPECT_EQ(e.keyword(), "$ref");
    EXPECT_THAT(e.what(), ::testing::HasSubstr("json_schema: $ref recursion"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("matches no complete string"));
  }
}

}  // namespace
}  // namespace mlaserve::grammar
