// Grammars over bytes for constrained decoding: compile a JSON schema, "any JSON object", a regex
// or a composition of them (tool calls) once, then let each request's GrammarMatcher say which
// tokens may come next (a bit mask applied to the logits) and advance by the sampled token.
//
// Threading: a Grammar is immutable rules plus caches (interned recognizer states, transition
// tables, token masks) behind one mutex, so one Grammar serves every request that uses the same
// schema, from any thread. A GrammarMatcher is one request's position, used by one thread at a
// time; it may be copied (e.g. to try speculative tokens and keep or drop the copy).
//
// Limits (a GrammarError when hit, so that a request fails with a clear message instead of
// exhausting memory): 2048 parses live at once in one state (kMaxParses in recognizer.h), counts
// such as maxLength or {n,m} up to 10000 (kMaxRepeatCount in rule_set.h), 4 Mi grammar symbols.
// The caches of one grammar stay within a budget (compiled_grammar.h): when they outgrow it they
// start afresh and matchers move their state over on their next call.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace mlaserve::grammar {

// A compiled grammar (compiled_grammar.h); only shared, never used directly.
class Grammar;
using GrammarPtr = std::shared_ptr<const Grammar>;

// A grammar that cannot be compiled, or a limit hit while matching. what() is a complete message
// meant for the API's user (an HTTP 400), e.g. "json_schema: keyword 'pattern' is not supported
// (at /properties/name)"; keyword() is the offending JSON-schema keyword or regex construct
// ("pattern", "(?=") or "" for syntax errors and limits.
class GrammarError : public mlaserve::Error {
 public:
  explicit GrammarError(const std::string& message, std::string keyword = "")
      : Error(message), keyword_(std::move(keyword)) {}
  std::string keyword() const { return keyword_; }

 private:
  std::string keyword_;
};

// A JSON value valid for `schema`, written compactly or with bounded whitespace (json_rules.h);
// the supported subset and how it is read are in json_schema.h. Object properties come in the
// schema's order: nlohmann::json keeps object keys sorted, so pass nlohmann::ordered_json (parse
// the request with it) to keep the order the user wrote.
GrammarPtr json_schema_grammar(const nlohmann::json& schema);
GrammarPtr json_schema_grammar(const nlohmann::ordered_json& schema);
// Any JSON object (values any JSON, nesting unbounded).
GrammarPtr json_object_grammar();
// The whole output matches `pattern` (the subset is in regex.h; anything else is a GrammarError
// whose message lists the subset).
GrammarPtr regex_grammar(std::string_view pattern);

class RuleSet;
class JsonRules;

// Composes grammars, e.g. for tool calls: literal markers, a choice of function names each with
// its JSON-schema arguments, one or more calls separated by "\n". Rules are handles valid only
// in the builder that made them.
class GrammarBuilder {
 public:
  using Rule = int32_t;

  GrammarBuilder();
  ~GrammarBuilder();
  GrammarBuilder(GrammarBuilder&&) noexcept;
  GrammarBuilder& operator=(GrammarBuilder&&) noexcept;

  Rule literal(std::string_view bytes);
  Rule sequence(std::vector<Rule> parts);
  Rule choice(std::vector<Rule> alternatives);     // at least one
  Rule json_schema(const nlohmann::json& schema);  // throws GrammarError
  Rule json_schema(const nlohmann::ordered_json& schema);
  Rule json_object();
  Rule one_or_more(Rule item, Rule separator);  // item (separator item)*
  // Throws GrammarError when root matches no finite string or is left-recursive.
  GrammarPtr build(Rule root) &&;

 private:
  Rule checked(Rule rule) const;

  std::unique_ptr<RuleSet> rules_;
  std::unique_ptr<JsonRules> json_;
};

struct VocabularyTrie;

// A tokenizer's vocabulary as byte strings indexed by token id, prepared for mask computation (a
// byte trie). Built once per server. Excluded ids (special tokens hidden from the output text,
// EOS, BOS) and empty byte strings are never allowed as text.
class TokenVocabulary {
 public:
  // excluded.size() must equal token_bytes.size().
  TokenVocabulary(std::vector<std::string> token_bytes, const std::vector<bool>& excluded);
  ~TokenVocabulary();
  TokenVocabulary(const TokenVocabulary&) = delete;
  TokenVocabulary& operator=(const TokenVocabulary&) = delete;

  int32_t size() const { return static_cast<int32_t>(token_bytes_.size()); }
  int64_t mask_words() const { return (size() + 63) / 64; }
  // The bytes of a token that may appear as text; "" for excluded ids.
  std::string_view text_bytes(int32_t id) const;

  const VocabularyTrie& trie() const { return *trie_; }
  // Distinguishes vocabularies in the grammars' mask caches (unlike an address, never reused).
  uint64_t serial() const { return serial_; }

 private:
  std::vector<std::string> token_bytes_;
  std::unique_ptr<const VocabularyTrie> trie_;
  uint64_t serial_;
};

struct GrammarCache;

// One request's position in a grammar. Each call holds the grammar's lock, a mask computation
// included (1.5-5 ms on DeepSeek-V3's vocabulary inside a string, microseconds elsewhere; a mask
// seen before is a copy). fill_mask and accept_* throw GrammarError when the grammar is too
// ambiguous at this point (kMaxParses): the request should fail with that message.
class GrammarMatcher {
 public:
  GrammarMatcher(GrammarPtr grammar, std::shared_ptr<const TokenVocabulary> vocabulary);

  // Sets bit (id % 64) of mask[id / 64] for every token allowed next and clears all others;
  // mask.size() must be vocabulary->mask_words(). Never sets a bit for an excluded id (the caller
  // adds EOS when can_end()).
  void fill_mask(std::span<uint64_t> mask);
  bool can_end() const { return can_end_; }    // the bytes so far form a complete match
  bool must_end() const { return must_end_; }  // complete, and no byte may follow
  // Advances by the token's bytes; returns false and stays unchanged if they do not keep a valid
  // prefix (always false for excluded ids). An id outside the vocabulary is an mlaserve::Error.
  bool accept_token(int32_t id);
  bool accept_bytes(std::string_view bytes);

 private:
  // Moves state_ into the grammar's current cache (a fresh one after a reset); call locked.
  GrammarCache& current_cache();
  void set_state(int32_t state);

  GrammarPtr grammar_;
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  std::shared_ptr<GrammarCache> cache_;  // where state_ is interned
  int32_t state_ = 0;
  bool can_end_ = false;
  bool must_end_ = false;
};

}  // namespace mlaserve::grammar
