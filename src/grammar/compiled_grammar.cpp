#include "grammar/compiled_grammar.h"

#include <algorithm>

namespace mlaserve::grammar {

MaskCache& GrammarCache::masks_for(const TokenVocabulary& vocabulary, size_t budget_bytes) {
  const auto it = std::find_if(masks.begin(), masks.end(), [&](const MaskCache& cache) {
    return cache.vocabulary_serial() == vocabulary.serial();
  });
  if (it != masks.end()) return *it;
  return masks.emplace_back(vocabulary.serial(), budget_bytes);
}

Grammar::Grammar(FlatGrammar rules, CacheBudget budget)
    : rules_(std::move(rules)), budget_(budget), cache_(std::make_shared<GrammarCache>(rules_)) {}

std::shared_ptr<GrammarCache> Grammar::current_cache() const {
  if (cache_->recognizer.memory_bytes() > budget_.recognizer_bytes)
    cache_ = std::make_shared<GrammarCache>(rules_);
  return cache_;
}

GrammarPtr make_grammar(const RuleSet& rules, RuleSet::Rule root) {
  return std::make_shared<const Grammar>(flatten(rules, root));
}

}  // namespace mlaserve::grammar
