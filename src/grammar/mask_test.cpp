// fill_mask against its definition (a token is allowed when a copy of the matcher accepts it),
// along valid documents of random schemas, on brown-tiny's vocabulary and on DeepSeek-V3's; and
// on hand-made vocabularies whose tokens split UTF-8 characters and escapes.
#include <gtest/gtest.h>

#include <random>

#include "grammar/compiled_grammar.h"
#include "grammar/grammar.h"
#include "grammar/grammar_test_util.h"
#include "grammar/json_schema.h"
#include "grammar/random_schema_test_util.h"
#include "support/tokenizers.h"

namespace mlaserve::grammar {
namespace {

using testing::Json;

// Feeds the document's tokens one by one, comparing fill_mask with brute force at up to
// `checks` random positions (the start and the end among them); every token must be accepted
// and the whole must be complete.
void check_document(const GrammarPtr& grammar,
                    const std::shared_ptr<const TokenVocabulary>& vocabulary,
                    const tokenizer::Tokenizer& tok, const std::string& document, size_t checks,
                    std::mt19937_64& rng) {
  const std::vector<int32_t> ids = tok.encode(document, false);
  std::vector<bool> checked(ids.size() + 1, checks >= ids.size() + 1);
  checked.front() = checked.back() = true;
  for (size_t i = 2; i < checks; ++i)
    checked[std::uniform_int_distribution<size_t>(0, ids.size())(rng)] = true;
  GrammarMatcher matcher(grammar, vocabulary);
  for (size_t i = 0; i <= ids.size(); ++i) {
    if (checked[i]) {
      testing::expect_mask_matches_brute_force(
          matcher, *vocabulary, "after " + std::to_string(i) + " tokens of " + document);
    }
    if (i == ids.size()) break;
    ASSERT_TRUE(matcher.accept_token(ids[i]))
        << "token " << i << " '" << vocabulary->text_bytes(ids[i]) << "' of " << document;
  }
  EXPECT_TRUE(matcher.can_end()) << document;
}

void check_random_schemas(const tokenizer::Tokenizer& tok,
                          const std::shared_ptr<const TokenVocabulary>& vocabulary, int schemas,
                          int documents, size_t checks, uint64_t seed) {
  testing::RandomSchemas random_schemas(seed);
  std::mt19937_64 rng(seed);
  for (int s = 0; s < schemas; ++s) {
    const Json schema = random_schemas.schema();
    SCOPED_TRACE("schema " + schema.dump());
    const GrammarPtr grammar = json_schema_grammar(schema);
    testing::RandomDocuments random_documents(schema, seed + static_cast<uint64_t>(s));
    for (int d = 0; d < documents; ++d)
      check_document(grammar, vocabulary, tok, random_documents.document(), checks, rng);
  }
}

TEST(TokenMask, MatchesBruteForceOnBrownTiny) {
  check_random_schemas(mlaserve::testing::brown_tiny_tokenizer(), testing::brown_tiny_vocabulary(),
                       50, 3, 1000, 1);
}

TEST(TokenMask, MatchesBruteForceOnDeepSeekV3) {
  check_random_schemas(mlaserve::testing::deepseek_v3_tokenizer(),
                       testing::deepseek_v3_vocabulary(), 16, 2, 25, 2);
}

TEST(TokenMask, MatchesBruteForceOnRegexes) {
  const auto& tok = mlaserve::testing::brown_tiny_tokenizer();
  std::mt19937_64 rng(3);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[A-Z][a-z]+( [a-z]+)*\\.", "The cat sat on the mat."},
      {"(\\d{3}-){2}\\d{4}", "555-123-4567"},
      {"(yes|no|maybe) because .{1,40}", "maybe because the sky is blue"},
      {"[^\\n]*\\n[\\w ]{0,30}", "caf\xc3\xa9 \xe2\x82\xac 1\nwords here"}};
  for (const auto& [pattern, text] : cases) {
    SCOPED_TRACE(pattern);
    check_document(regex_grammar(pattern), testing::brown_tiny_vocabulary(), tok, text, 100, rng);
  }
}

// Tokens that split multi-byte characters, \u escapes and closing quotes in every way.
std::shared_ptr<const TokenVocabulary> splitting_vocabulary() {
  std::vector<std::string> tokens = {
      "\"",     "\xe2", "\x82",     "\xac",     "\xe2\x82", "\x82\xac", "\xac\"", "\xc3",
      "\xa9\"", "\\",   "\\u",      "\\ud8",    "3d",       "\\ude",    "00\"",   "00",
      "a\"",    "\"a",  "\xf0\x9f", "\x98\x80", "\xed\xa0", "\x80",     "",       "\"}"};
  std::vector<bool> excluded(tokens.size());
  excluded.back() = true;  // "\"}" hidden like a special token
  return std::make_shared<const TokenVocabulary>(tokens, excluded);
}

TEST(TokenMask, TokensMaySplitCharactersAndEscapes) {
  const auto vocabulary = splitting_vocabulary();
  const GrammarPtr grammar = json_schema_grammar(Json::parse(R"({"type": "string"})"));
  GrammarMatcher matcher(grammar, vocabulary);
  for (const std::string piece : {"\"", "\xe2", "\x82\xac", "\\ud8", "3d", "\\ude", "00\""}) {
    testing::expect_mask_matches_brute_force(matcher, *vocabulary, "before " + piece);
    ASSERT_TRUE(matcher.accept_bytes(piece)) << piece;
  }
  EXPECT_TRUE(matcher.must_end());
  GrammarMatcher split(grammar, vocabulary);
  ASSERT_TRUE(split.accept_bytes("\"\xe2"));
  std::vector<uint64_t> mask(1);
  split.fill_mask(mask);
  for (int32_t id = 0; id < vocabulary->size(); ++id) {
    const std::string_view bytes = vocabulary->text_bytes(id);
    // One or two continuation bytes of the three-byte character (a quote after one is early).
    const bool continues = bytes == "\x82" || bytes == "\xac" || bytes == "\x80" ||
                           bytes == "\x82\xac" || bytes == "\x98\x80";
    EXPECT_EQ(testing::allowed(mask, id), continues) << id;
  }
  EXPECT_FALSE(split.accept_token(23));  // excluded
  EXPECT_FALSE(split.accept_token(22));  // empty
}

// A grammar whose caches restart on every call (a budget of one byte) still gives the same
// masks and accepts the same documents: matchers carry their state into each fresh cache.
TEST(TokenMask, CachesThatRestartKeepMatchersRight) {
  const Json schema = Json::parse(R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 5}, "tags": {"type": "array", "items": {"enum": ["ab", "abc"]}}},
      "required": ["name"]})");
  RuleSet rules;
  JsonRules json(rules);
  const RuleSet::Rule root = compile_json_schema(json, rules, schema);
  const auto grammar = std::make_shared<const Grammar>(flatten(rules, root), CacheBudget{1, 1});
  std::mt19937_64 rng(4);
  testing::RandomDocuments documents(schema, 4);
  for (int d = 0; d < 5; ++d) {
    check_document(grammar, testing::brown_tiny_vocabulary(),
                   mlaserve::testing::brown_tiny_tokenizer(), documents.document(), 8, rng);
  }
}

}  // namespace
}  // namespace mlaserve::grammar
