#include "grammar/recognizer.h"

#include <algorithm>

#include "grammar/grammar.h"

namespace mlaserve::grammar {
namespace {

uint64_t pair_key(int32_t position, int32_t below) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(position)) << 32) |
         static_cast<uint32_t>(below);
}

}  // namespace

size_t Recognizer::KeyHash::operator()(const std::vector<int32_t>& key) const {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const int32_t x : key) hash = (hash ^ static_cast<uint32_t>(x)) * 0x100000001b3ull;
  return static_cast<size_t>(hash);
}

Recognizer::Recognizer(const FlatGrammar& grammar) : grammar_(grammar) {
  tops_.clear();
  complete_ = false;
  visited_.clear();
  for (const int32_t start : grammar_.alternatives(grammar_.root)) expand(start, -1);
  if (finish_expansion() != initial())
    throw GrammarError("grammar: matches nothing");  // (flatten rules this out)
}

int32_t Recognizer::intern_node(int32_t position, int32_t below) {
  const auto [it, added] =
      node_index_.try_emplace(pair_key(position, below), static_cast<int32_t>(nodes_.size()));
  if (added) nodes_.push_back({position, below});
  return it->second;
}

StateId Recognizer::intern_state(std::vector<int32_t> key) {
  const auto [it, added] =
      state_index_.try_emplace(std::move(key), static_cast<StateId>(state_keys_.size()));
  if (added) {
    state_keys_.push_back(&it->first);
    transitions_.resize(transitions_.size() + 256, kUnknown);
  }
  return it->second;
}

void Recognizer::expand(int32_t position, int32_t below) {
  pending_.emplace_back(position, below);
  while (!pending_.empty()) {
    const auto [at, under] = pending_.back();
    pending_.pop_back();
    if (!visited_.insert(pair_key(at, under)).second) continue;
    if (visited_.size() > kMaxExpansionSteps)
      throw GrammarError("grammar: too ambiguous (more than " + std::to_string(kMaxExpansionSteps) +
                         " parse steps for one byte)");
    const Element element = grammar_.code[static_cast<size_t>(at)];
    if (element.kind == Element::Kind::Bytes) {
      tops_.push_back(intern_node(at, under));
    } else if (element.kind == Element::Kind::Rule) {
      const bool tail_call = grammar_.code[static_cast<size_t>(at) + 1].kind == Element::Kind::End;
      const int32_t return_to = tail_call ? under : intern_node(at + 1, under);
      for (const int32_t start : grammar_.alternatives(element.index))
        pending_.emplace_back(start, return_to);
    } else if (under < 0) {
      complete_ = true;
    } else {
      pending_.emplace_back(nodes_[static_cast<size_t>(under)].position,
                            nodes_[static_cast<size_t>(under)].below);
    }
  }
}

StateId Recognizer::finish_expansion() {
  std::sort(tops_.begin(), tops_.end());
  tops_.erase(std::unique(tops_.begin(), tops_.end()), tops_.end());
  if (tops_.size() > kMaxParses)
    throw GrammarError("grammar: too ambiguous (more than " + std::to_string(kMaxParses) +
                       " parses alive at once, e.g. anyOf branches that match the same text)");
  if (tops_.empty() && !complete_) return kDead;
  std::vector<int32_t> key = tops_;
  key.push_back(complete_ ? 1 : 0);
  return intern_state(std::move(key));
}

StateId Recognizer::compute_next(StateId state, uint8_t byte) {
  tops_.clear();
  complete_ = false;
  visited_.clear();
  for (const int32_t top : tops(state)) {
    const Node node = nodes_[static_cast<size_t>(top)];
    const Element element = grammar_.code[static_cast<size_t>(node.position)];
    if (grammar_.byte_sets[static_cast<size_t>(element.index)].contains(byte))
      expand(node.position + 1, node.below);
  }
  const StateId next = finish_expansion();
  transitions_[static_cast<size_t>(state) * 256 + byte] = next;
  return next;
}

PortableState Recognizer::portable(StateId state) const {
  PortableState out;
  out.complete = complete(state);
  for (const int32_t top : tops(state)) {
    std::vector<int32_t> positions;
    for (int32_t node = top; node >= 0; node = nodes_[static_cast<size_t>(node)].below)
      positions.push_back(nodes_[static_cast<size_t>(node)].position);
    out.parses.push_back(std::move(positions));
  }
  return out;
}

StateId Recognizer::intern(const PortableState& state) {
  std::vector<int32_t> key;
  for (const std::vector<int32_t>& positions : state.parses) {
    int32_t node = -1;
    for (auto it = positions.rbegin(); it != positions.rend(); ++it) node = intern_node(*it, node);
    key.push_back(node);
  }
  std::sort(key.begin(), key.end());
  key.push_back(state.complete ? 1 : 0);
  return intern_state(std::move(key));
}

size_t Recognizer::memory_bytes() const {
  // Hash-table entries cost about their payload plus a node and a bucket pointer.
  constexpr size_t kEntryOverhead = 32;
  size_t bytes =
      nodes_.size() * (sizeof(Node) + sizeof(uint64_t) + sizeof(int32_t) + kEntryOverhead);
  for (const std::vector<int32_t>* key : state_keys_)
    bytes += key->capacity() * sizeof(int32_t) + sizeof(std::vector<int32_t>) + kEntryOverhead;
  return bytes + transitions_.capacity() * sizeof(StateId);
}

}  // namespace mlaserve::grammar
