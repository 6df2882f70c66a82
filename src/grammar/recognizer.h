// The pushdown recognizer of one flat grammar, with what it has seen interned and memoized.
// A parse is a stack of grammar positions: the top is at a byte set (the next byte it reads), each
// position below is where to continue when the rule above it completes (a call in tail position
// pushes none, so right recursion does not grow the stack). Stacks are hash-consed nodes (a
// position and the node below it); a state is the sorted set of live parses' top nodes plus
// whether the bytes so far are a complete match; each (state, byte) transition is computed once
// into a dense table. Not thread-safe: the owning grammar's mutex guards it.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "grammar/flat_grammar.h"

namespace mlaserve::grammar {

using StateId = int32_t;
inline constexpr StateId kDead = -1;  // no parse survives the byte
// Parses alive at once in one state (e.g. anyOf branches that match the same text); more is a
// GrammarError, so that an ambiguous grammar fails its request instead of slowing the server.
inline constexpr size_t kMaxParses = 2048;
// Parse steps in one transition's expansion, for the same reason.
inline constexpr size_t kMaxExpansionSteps = size_t{1} << 18;

// A state written out independently of a recognizer (to carry it into a fresh one): each parse
// as its positions from top to bottom.
struct PortableState {
  std::vector<std::vector<int32_t>> parses;
  bool complete = false;
};

class Recognizer {
 public:
  // Keeps a reference to the grammar.
  explicit Recognizer(const FlatGrammar& grammar);

  StateId initial() const { return 0; }
  // The state after reading `byte` in `state`, or kDead.
  StateId next(StateId state, uint8_t byte) {
    const StateId known = transitions_[static_cast<size_t>(state) * 256 + byte];
    return known != kUnknown ? known : compute_next(state, byte);
  }
  bool complete(StateId state) const { return state_keys_[state]->back() != 0; }
  bool has_parses(StateId state) const { return state_keys_[state]->size() > 1; }

  PortableState portable(StateId state) const;
  StateId intern(const PortableState& state);
  // Roughly what the tables hold, for the cache budget.
  size_t memory_bytes() const;

 private:
  static constexpr StateId kUnknown = -2;
  struct Node {
    int32_t position;
    int32_t below;  // -1 at the bottom
  };
  struct KeyHash {
    size_t operator()(const std::vector<int32_t>& key) const;
  };

  StateId compute_next(StateId state, uint8_t byte);
  // Expands the parse continuing at (position, below) until every branch of it is at a byte set
  // or complete, into tops_ and complete_.
  void expand(int32_t position, int32_t below);
  StateId finish_expansion();
  int32_t intern_node(int32_t position, int32_t below);
  StateId intern_state(std::vector<int32_t> key);
  // The state's top nodes (its key without the trailing complete flag).
  std::span<const int32_t> tops(StateId state) const {
    return std::span(*state_keys_[state]).first(state_keys_[state]->size() - 1);
  }

  const FlatGrammar& grammar_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> node_index_;
  // State keys: sorted top nodes, then 1 if complete else 0.
  std::unordered_map<std::vector<int32_t>, StateId, KeyHash> state_index_;
  std::vector<const std::vector<int32_t>*> state_keys_;
  std::vector<StateId> transitions_;  // [state * 256 + byte]

  // Scratch of one expansion.
  std::vector<std::pair<int32_t, int32_t>> pending_;
  std::unordered_set<uint64_t> visited_;
  std::vector<int32_t> tops_;
  bool complete_ = false;
};

}  // namespace mlaserve::grammar
