// A compiled grammar: its flat rules, and the cache of what matchers learn from them (recognizer
// states and transitions, token masks per vocabulary), shared by every matcher of the grammar
// behind one mutex. A matcher call holds the mutex throughout (a mask computation included).
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "grammar/flat_grammar.h"
#include "grammar/grammar.h"
#include "grammar/mask_cache.h"
#include "grammar/recognizer.h"

namespace mlaserve::grammar {

// How much one grammar's cache may hold. Past recognizer_bytes the cache starts afresh (with
// the masks), the old one living on only until its matchers have moved their state over; each
// vocabulary's masks stay within mask_bytes by dropping the least recently used.
struct CacheBudget {
  size_t recognizer_bytes = size_t{64} << 20;
  size_t mask_bytes = size_t{64} << 20;
};

// What matchers learned about one grammar. Its state ids are meaningful only within it.
struct GrammarCache {
  explicit GrammarCache(const FlatGrammar& rules) : recognizer(rules) {}
  // The masks for `vocabulary`, created empty on first use.
  MaskCache& masks_for(const TokenVocabulary& vocabulary, size_t budget_bytes);

  Recognizer recognizer;
  std::vector<MaskCache> masks;  // one per vocabulary
};

class Grammar {
 public:
  explicit Grammar(FlatGrammar rules, CacheBudget budget = {});
  Grammar(const Grammar&) = delete;
  Grammar& operator=(const Grammar&) = delete;

  // Held by a matcher throughout each call.
  std::unique_lock<std::mutex> lock() const { return std::unique_lock(mutex_); }
  // The cache matchers should use now: a fresh one when the current one outgrew its budget.
  // Call with the lock held.
  std::shared_ptr<GrammarCache> current_cache() const;
  const CacheBudget& budget() const { return budget_; }

 private:
  const FlatGrammar rules_;
  const CacheBudget budget_;
  mutable std::mutex mutex_;
  mutable std::shared_ptr<GrammarCache> cache_;
};

// A grammar of `root` in `rules` (flattened; throws GrammarError as flatten does).
GrammarPtr make_grammar(const RuleSet& rules, RuleSet::Rule root);

}  // namespace mlaserve::grammar
