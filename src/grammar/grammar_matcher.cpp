#include "grammar/compiled_grammar.h"
#include "grammar/grammar.h"
#include "grammar/token_mask.h"

namespace mlaserve::grammar {

GrammarMatcher::GrammarMatcher(GrammarPtr grammar,
                               std::shared_ptr<const TokenVocabulary> vocabulary)
    : grammar_(std::move(grammar)), vocabulary_(std::move(vocabulary)) {
  const auto lock = grammar_->lock();
  cache_ = grammar_->current_cache();
  set_state(cache_->recognizer.initial());
}

GrammarCache& GrammarMatcher::current_cache() {
  std::shared_ptr<GrammarCache> current = grammar_->current_cache();
  if (current != cache_) {
    state_ = current->recognizer.intern(cache_->recognizer.portable(state_));
    cache_ = std::move(current);
  }
  return *cache_;
}

void GrammarMatcher::set_state(StateId state) {
  state_ = state;
  can_end_ = cache_->recognizer.complete(state);
  must_end_ = can_end_ && !cache_->recognizer.has_parses(state);
}

void GrammarMatcher::fill_mask(std::span<uint64_t> mask) {
  if (static_cast<int64_t>(mask.size()) != vocabulary_->mask_words())
    fail("fill_mask: the mask has {} words, the vocabulary needs {}", mask.size(),
         vocabulary_->mask_words());
  const auto lock = grammar_->lock();
  GrammarCache& cache = current_cache();
  MaskCache& masks = cache.masks_for(*vocabulary_, grammar_->budget().mask_bytes);
  if (masks.find(state_, mask)) return;
  compute_token_mask(cache.recognizer, state_, vocabulary_->trie(), mask);
  masks.insert(state_, mask);
}

bool GrammarMatcher::accept_token(int32_t id) {
  const std::string_view bytes = vocabulary_->text_bytes(id);
  return !bytes.empty() && accept_bytes(bytes);
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  const auto lock = grammar_->lock();
  Recognizer& recognizer = current_cache().recognizer;
  StateId state = state_;
  for (const char c : bytes) {
    state = recognizer.next(state, static_cast<uint8_t>(c));
    if (state == kDead) return false;
  }
  set_state(state);
  return true;
}

}  // namespace mlaserve::grammar
