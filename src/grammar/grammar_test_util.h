// Helpers for the grammar tests: matching whole texts, vocabularies of the test tokenizers, the
// brute-force mask a fill_mask must equal, and random walks through the masks.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
#include "support/tokenizers.h"

namespace mlaserve::grammar::testing {

// How a grammar takes a whole text.
enum class Match { Complete, Prefix, Rejected };

inline std::ostream& operator<<(std::ostream& out, Match m) {
  return out << (m == Match::Complete ? "Complete" : m == Match::Prefix ? "Prefix" : "Rejected");
}

// Every single byte as a token (id = byte value).
inline std::shared_ptr<const TokenVocabulary> byte_vocabulary() {
  static const auto vocabulary = [] {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
    return std::make_shared<const TokenVocabulary>(tokens, std::vector<bool>(256));
  }();
  return vocabulary;
}

inline Match match(const GrammarPtr& grammar, std::string_view text) {
  GrammarMatcher matcher(grammar, byte_vocabulary());
  if (!matcher.accept_bytes(text)) return Match::Rejected;
  return matcher.can_end() ? Match::Complete : Match::Prefix;
}

// A tokenizer's vocabulary with its special tokens excluded (ids it does not know are empty).
inline std::shared_ptr<const TokenVocabulary> vocabulary_of(const tokenizer::Tokenizer& tok) {
  std::vector<std::string> tokens(static_cast<size_t>(tok.vocab_size()));
  std::vector<bool> excluded(tokens.size());
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    try {
      tokens[static_cast<size_t>(id)] = std::string(tok.id_to_bytes(id));
      excluded[static_cast<size_t>(id)] = tok.is_special(id);
    } catch (const mlaserve::Error&) {  // an id between the vocabulary and the added tokens
    }
  }
  return std::make_shared<const TokenVocabulary>(std::move(tokens), excluded);
}

inline std::shared_ptr<const TokenVocabulary> brown_tiny_vocabulary() {
  static const auto vocabulary = vocabulary_of(mlaserve::testing::brown_tiny_tokenizer());
  return vocabulary;
}

inline std::shared_ptr<const TokenVocabulary> deepseek_v3_vocabulary() {
  static const auto vocabulary = vocabulary_of(mlaserve::testing::deepseek_v3_tokenizer());
  return vocabulary;
}

inline bool allowed(const std::vector<uint64_t>& mask, int32_t id) {
  return (mask[static_cast<size_t>(id) / 64] >> (id % 64)) & 1;
}

// The mask by definition: token t is allowed when a copy of the matcher accepts it.
inline std::vector<uint64_t> brute_force_mask(const GrammarMatcher& matcher,
                                              const TokenVocabulary& vocabulary) {
  std::vector<uint64_t> mask(static_cast<size_t>(vocabulary.mask_words()));
  for (int32_t id = 0; id < vocabulary.size(); ++id) {
    GrammarMatcher copy = matcher;
    if (copy.accept_token(id)) mask[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
  }
  return mask;
}

// Fails the test, naming the first differing tokens, when fill_mask differs from brute force.
inline void expect_mask_matches_brute_force(GrammarMatcher& matcher,
                                            const TokenVocabulary& vocabulary,
                                            const std::string& where) {
  std::vector<uint64_t> mask(static_cast<size_t>(vocabulary.mask_words()), ~uint64_t{0});
  matcher.fill_mask(mask);
  const std::vector<uint64_t> expected = brute_force_mask(matcher, vocabulary);
  if (mask == expected) return;
  int reported = 0;
  for (int32_t id = 0; id < vocabulary.size() && reported < 5; ++id) {
    if (allowed(mask, id) == allowed(expected, id)) continue;
    ADD_FAILURE() << where << ": token " << id << " '" << vocabulary.text_bytes(id) << "' is "
                  << (allowed(mask, id) ? "allowed" : "refused") << " by fill_mask";
    ++reported;
  }
}

struct Walk {
  std::string text;
  bool complete = false;  // can_end held where the walk stopped
};

// Generates by picking uniformly among the allowed tokens until must_end, or until can_end and a
// coin with probability stop_probability says stop, or for at most max_tokens.
inline Walk random_walk(const GrammarPtr& grammar,
                        const std::shared_ptr<const TokenVocabulary>& vocabulary,
                        std::mt19937_64& rng, double stop_probability, int max_tokens) {
  GrammarMatcher matcher(grammar, vocabulary);
  std::vector<uint64_t> mask(static_cast<size_t>(vocabulary->mask_words()));
  Walk walk;
  for (int step = 0; step < max_tokens && !matcher.must_end(); ++step) {
    if (matcher.can_end() && std::bernoulli_distribution(stop_probability)(rng)) break;
    matcher.fill_mask(mask);
    std::vector<int32_t> candidates;
    for (int32_t id = 0; id < vocabulary->size(); ++id) {
      if (allowed(mask, id)) candidates.push_back(id);
    }
    if (candidates.empty()) {
      ADD_FAILURE() << "no token allowed after '" << walk.text << "' though must_end is false";
      break;
    }
    const int32_t id =
        candidates[std::uniform_int_distribution<size_t>(0, candidates.size() - 1)(rng)];
    EXPECT_TRUE(matcher.accept_token(id));
    walk.text += vocabulary->text_bytes(id);
  }
  walk.complete = matcher.can_end();
  return walk;
}

}  // namespace mlaserve::grammar::testing
