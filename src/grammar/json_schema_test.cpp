// JSON-schema grammars on hand-written documents: what they accept whole, as a prefix, or not.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "grammar/grammar.h"
#include "grammar/grammar_test_util.h"

namespace mlaserve::grammar {
namespace {

using testing::Match;
using testing::match;

GrammarPtr schema(std::string_view text) {
  return json_schema_grammar(nlohmann::ordered_json::parse(text));
}

struct Case {
  std::string text;
  Match expected;
};

void expect_matches(const GrammarPtr& grammar, const std::vector<Case>& cases) {
  for (const Case& c : cases) EXPECT_EQ(match(grammar, c.text), c.expected) << c.text;
}

TEST(JsonSchemaGrammar, Strings) {
  expect_matches(schema(R"({"type": "string"})"),
                 {{R"("")", Match::Complete},
                  {R"("hello world")", Match::Complete},
                  {R"("tab\tquote\"slash\/\\ \b\f\n\r")", Match::Complete},
                  {R"("\u00e9\u20AC\uD83D\uDE00")", Match::Complete},
                  {"\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"", Match::Complete},
                  {"\"caf\xc3", Match::Prefix},
                  {R"("\uD83D)", Match::Prefix},
                  {R"("abc)", Match::Prefix},
                  {"", Match::Prefix},
                  {R"("\uD83D")", Match::Rejected},        // lone high surrogate
                  {R"("\uDE00")", Match::Rejected},        // lone low surrogate
                  {R"("\uD83D\u0041")", Match::Rejected},  // high surrogate, then no low one
                  {R"("\x41")", Match::Rejected},
                  {R"("\u12G4")", Match::Rejected},
                  {"\"a\nb\"", Match::Rejected},          // raw control byte
                  {"\"\xc0\xaf\"", Match::Rejected},      // overlong
                  {"\"\xed\xa0\x80\"", Match::Rejected},  // surrogate in UTF-8
                  {"\"\xf4\x90\x80\x80\"", Match::Rejected},
                  {"\"\x80\"", Match::Rejected},
                  {R"("a" )", Match::Rejected},  // no trailing whitespace
                  {R"( "a")", Match::Rejected},  // nor leading
                  {R"("a"")", Match::Rejected}});
}

TEST(JsonSchemaGrammar, StringLengthsCountCodePoints) {
  expect_matches(schema(R"({"type": "string", "minLength": 2, "maxLength": 3})"),
                 {{R"("a")", Match::Rejected},
                  {R"("ab")", Match::Complete},
                  {R"("abc")", Match::Complete},
                  {R"("abcd")", Match::Rejected},
                  {"\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"", Match::Complete},
                  {R"("\n\u00e9\uD83D\uDE00")", Match::Complete},
                  {R"("\n\u00e9\uD83D\uDE00x")", Match::Rejected},
                  {R"("a)", Match::Prefix}});
}

TEST(JsonSchemaGrammar, Numbers) {
  expect_matches(schema(R"({"type": "number"})"), {{"0", Match::Complete},
                                                   {"-0", Match::Complete},
                                                   {"-0.5", Match::Complete},
                                                   {"12.25e+10", Match::Complete},
                                                   {"1E-999", Match::Complete},
                                                   {"1e5", Match::Complete},
                                                   {"-", Match::Prefix},
                                                   {"1.", Match::Prefix},
                                                   {"1e", Match::Prefix},
                                                   {"1e+", Match::Prefix},
                                                   {"01", Match::Rejected},
                                                   {"+1", Match::Rejected},
                                                   {".5", Match::Rejected},
                                                   {"1e1000", Match::Rejected},
                                                   {"12345678901234567890", Match::Complete},
                                                   {"123456789012345678901", Match::Rejected},
                                                   {"0.12345678901234567890", Match::Complete},
                                                   {"0.123456789012345678901", Match::Rejected},
                                                   {"NaN", Match::Rejected}});
  expect_matches(schema(R"({"type": "integer"})"), {{"0", Match::Complete},
                                                    {"-0", Match::Complete},
                                                    {"-42", Match::Complete},
                                                    {"1.5", Match::Rejected},
                                                    {"1e3", Match::Rejected},
                                                    {"007", Match::Rejected}});
}

TEST(JsonSchemaGrammar, MustEndAfterACompleteConst) {
  const GrammarPtr grammar = schema(R"({"const": {"b": [1, true], "a": null}})");
  GrammarMatcher matcher(grammar, testing::byte_vocabulary());
  ASSERT_TRUE(matcher.accept_bytes(R"({"b":[1,t)"));
  EXPECT_FALSE(matcher.can_end());
  ASSERT_TRUE(matcher.accept_bytes(R"(rue],"a":null})"));
  EXPECT_TRUE(matcher.can_end());
  EXPECT_TRUE(matcher.must_end());
  EXPECT_FALSE(matcher.accept_bytes(" "));
  const GrammarPtr number = schema(R"({"type": "integer"})");
  GrammarMatcher counting(number, testing::byte_vocabulary());
  ASSERT_TRUE(counting.accept_bytes("12"));
  EXPECT_TRUE(counting.can_end());
  EXPECT_FALSE(counting.must_end());
  ASSERT_TRUE(counting.accept_bytes("345678901234567890"));
  EXPECT_TRUE(counting.must_end());
}

TEST(JsonSchemaGrammar, EnumsWithSharedPrefixes) {
  expect_matches(schema(R"({"enum": ["a", "ab", "abc", 1, 12, null, {"x": 1}]})"),
                 {{R"("a")", Match::Complete},
                  {R"("ab")", Match::Complete},
                  {R"("abc")", Match::Complete},
                  {R"("abcd")", Match::Rejected},
                  {R"("ab)", Match::Prefix},
                  {"1", Match::Complete},
                  {"12", Match::Complete},
                  {"123", Match::Rejected},
                  {"null", Match::Complete},
                  {R"({"x":1})", Match::Complete},
                  {R"({"x": 1})", Match::Rejected}});
  expect_matches(schema(R"({"type": "string", "enum": ["x", 1, "y"]})"),
                 {{R"("x")", Match::Complete}, {"1", Match::Rejected}});
}

TEST(JsonSchemaGrammar, TypeListsWithNull) {
  expect_matches(schema(R"({"type": ["string", "null"], "maxLength": 1})"),
                 {{"null", Match::Complete},
                  {R"("a")", Match::Complete},
                  {R"("ab")", Match::Rejected},
                  {"nul", Match::Prefix},
                  {"0", Match::Rejected}});
}

TEST(JsonSchemaGrammar, ObjectsWritePropertiesInSchemaOrder) {
  const GrammarPtr grammar = schema(R"({
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                   "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["name", "tags"],
    "additionalProperties": false})");
  expect_matches(
      grammar,
      {{R"({"name":"x","tags":[]})", Match::Complete},
       {R"({"name":"x","age":3,"tags":["a","b"]})", Match::Complete},
       {"{\n  \"name\": \"x\",\n  \"age\": 3,\n  \"tags\": [\n    \"a\"\n  ]\n}", Match::Rejected},
       {R"({ "name" : "x" , "tags" : [ ] })", Match::Complete},
       {R"({"age":3,"name":"x","tags":[]})", Match::Rejected},
       {R"({"name":"x"})", Match::Rejected},
       {R"({"name":"x",})", Match::Rejected},
       {R"({"tags":[],"name":"x"})", Match::Rejected},
       {R"({"name":"x","tags":[],"other":1})", Match::Rejected},
       {R"({})", Match::Rejected},
       {R"({"name":"x","tags":[)", Match::Prefix}});
}

TEST(JsonSchemaGrammar, OptionalPropertiesMaySkipAny) {
  const GrammarPtr grammar = schema(R"({"type": "object", "properties": {
      "a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}}})");
  expect_matches(grammar, {{"{}", Match::Complete},
                           {R"({"a":1})", Match::Complete},
                           {R"({"b":1})", Match::Complete},
                           {R"({"a":1,"c":3})", Match::Complete},
                           {R"({"a":1,"b":2,"c":3})", Match::Complete},
                           {R"({,"b":1})", Match::Rejected},
                           {R"({"c":1,"a":1})", Match::Rejected}});
}

TEST(JsonSchemaGrammar, ObjectsWithoutProperties) {
  expect_matches(schema(R"({"type": "object", "additionalProperties": {"type": "integer"}})"),
                 {{"{}", Match::Complete},
                  {R"({"any":1,"key":2})", Match::Complete},
                  {R"({"any":"x"})", Match::Rejected}});
  expect_matches(
      schema(R"({"type": "object", "additionalProperties": false})"),
      {{"{}", Match::Complete}, {"{ }", Match::Complete}, {R"({"a":1})", Match::Rejected}});
  expect_matches(json_object_grammar(), {{R"({"a":[1,{"b":null}],"c":"d"})", Match::Complete},
                                         {"{ }", Match::Complete},
                                         {"[]", Match::Rejected},
                                         {"1", Match::Rejected}});
}

TEST(JsonSchemaGrammar, ArrayCounts) {
  const GrammarPtr grammar =
      schema(R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})");
  expect_matches(grammar, {{"[]", Match::Rejected},
                           {"[1]", Match::Complete},
                           {"[1, 2,3]", Match::Complete},
                           {"[1,2,3,4]", Match::Rejected},
                           {"[1,2,3,", Match::Rejected},
                           {"[1,", Match::Prefix}});
  expect_matches(schema(R"({"type": "array", "items": false})"),
                 {{"[]", Match::Complete}, {"[1]", Match::Rejected}});
}

// Single-line JSON: at most one space between tokens (json_rules.h says why).
TEST(JsonSchemaGrammar, WhitespaceIsOneSpaceAtMost) {
  const GrammarPtr grammar = schema(R"({"type": "array"})");
  EXPECT_EQ(match(grammar, "[ ]"), Match::Complete);
  EXPECT_EQ(match(grammar, "[1 , 2]"), Match::Complete);
  EXPECT_EQ(match(grammar, "[  ]"), Match::Rejected);
  EXPECT_EQ(match(grammar, "[\n]"), Match::Rejected);
  EXPECT_EQ(match(grammar, "[1,\t2]"), Match::Rejected);
}

TEST(JsonSchemaGrammar, RecursiveReferences) {
  const GrammarPtr grammar = schema(R"({
    "type": "object",
    "properties": {"value": {"type": "integer"},
                   "children": {"type": "array", "items": {"$ref": "#"}}},
    "required": ["value", "children"]})");
  std::string deep = R"({"value":0,"children":[)";
  for (int i = 0; i < 200; ++i) deep += R"({"value":1,"children":[)";
  EXPECT_EQ(match(grammar, deep), Match::Prefix);
  for (int i = 0; i < 200; ++i) deep += "]}";
  EXPECT_EQ(match(grammar, deep + "]}"), Match::Complete);
  EXPECT_EQ(match(grammar, deep + "]}]"), Match::Rejected);

  const GrammarPtr linked = schema(R"({
    "$defs": {"node": {"anyOf": [{"type": "null"},
        {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}},
         "required": ["next"]}]}},
    "$ref": "#/$defs/node"})");
  EXPECT_EQ(match(linked, R"({"next":{"next":null}})"), Match::Complete);
  EXPECT_EQ(match(linked, R"({"next":{"next":1}})"), Match::Rejected);

  // A reference to itself in tail position loops without reading, which the recognizer stops.
  expect_matches(schema(R"({"anyOf": [{"$ref": "#"}, {"type": "null"}]})"),
                 {{"null", Match::Complete}, {"1", Match::Rejected}});
}

TEST(JsonSchemaGrammar, EmptySchemaIsAnyValue) {
  for (const char* any : {"{}", "true"}) {
    expect_matches(schema(any), {{"[1,\"a\",{\"b\":[null,false]}]", Match::Complete},
                                 {"-1.5e3", Match::Complete},
                                 {"\"x\"", Match::Complete},
                                 {"nul", Match::Prefix},
                                 {"[1,]", Match::Rejected}});
  }
}

TEST(JsonSchemaGrammar, OrderedJsonKeepsPropertyOrderAndJsonSortsIt) {
  const char* text = R"({"type": "object", "properties": {"b": {"type": "integer"},
      "a": {"type": "integer"}}, "required": ["a", "b"]})";
  EXPECT_EQ(match(schema(text), R"({"b":1,"a":2})"), Match::Complete);
  const GrammarPtr sorted = json_schema_grammar(nlohmann::json::parse(text));
  EXPECT_EQ(match(sorted, R"({"a":2,"b":1})"), Match::Complete);
}

}  // namespace
}  // namespace mlaserve::grammar
