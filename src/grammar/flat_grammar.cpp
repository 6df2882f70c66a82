#include "grammar/flat_grammar.h"

#include <algorithm>
#include <optional>

#include "grammar/grammar.h"

namespace mlaserve::grammar {
namespace {

using Rules = std::vector<std::vector<Alternative>>;

// Rules of one alternative up to this many symbols are copied into the alternatives that use them.
constexpr size_t kMaxInlinedLength = 32;

class Inliner {
 public:
  explicit Inliner(const RuleSet& rules)
      : rules_(rules),
        inlined_(static_cast<size_t>(rules.rule_count())),
        on_path_(static_cast<size_t>(rules.rule_count())) {}

  // The rule's alternatives with the rules of one alternative that they use inlined (except a
  // rule within its own expansion).
  const std::vector<Alternative>& inlined(RuleSet::Rule rule) {
    std::optional<std::vector<Alternative>>& slot = inlined_[static_cast<size_t>(rule)];
    if (slot) return *slot;
    on_path_[static_cast<size_t>(rule)] = true;
    std::vector<Alternative> result;
    for (const Alternative& alternative : rules_.alternatives(rule)) {
      Alternative out;
      for (const Symbol symbol : alternative) append(out, symbol);
      result.push_back(std::move(out));
    }
    on_path_[static_cast<size_t>(rule)] = false;
    slot = std::move(result);
    return *slot;
  }

 private:
  void append(Alternative& out, Symbol symbol) {
    if (symbol.kind == Symbol::Kind::Rule && rules_.alternatives(symbol.index).size() == 1 &&
        !on_path_[static_cast<size_t>(symbol.index)]) {
      const Alternative& body = inlined(symbol.index)[0];
      if (body.size() <= kMaxInlinedLength) {
        out.insert(out.end(), body.begin(), body.end());
        return;
      }
    }
    out.push_back(symbol);
  }

  const RuleSet& rules_;
  std::vector<std::optional<std::vector<Alternative>>> inlined_;
  std::vector<bool> on_path_;
};

// The inlined rules reachable from root, renumbered in breadth-first order (root is 0).
Rules reachable_rules(const RuleSet& rule_set, RuleSet::Rule root) {
  Inliner inliner(rule_set);
  std::vector<int32_t> new_id(static_cast<size_t>(rule_set.rule_count()), -1);
  std::vector<RuleSet::Rule> order = {root};
  new_id[static_cast<size_t>(root)] = 0;
  Rules rules;
  for (size_t i = 0; i < order.size(); ++i) {
    std::vector<Alternative> alternatives = inliner.inlined(order[i]);
    for (Alternative& alternative : alternatives) {
      for (Symbol& symbol : alternative) {
        if (symbol.kind != Symbol::Kind::Rule) continue;
        int32_t& id = new_id[static_cast<size_t>(symbol.index)];
        if (id < 0) {
          id = static_cast<int32_t>(order.size());
          order.push_back(symbol.index);
        }
        symbol.index = id;
      }
    }
    rules.push_back(std::move(alternatives));
  }
  return rules;
}

// The least set of rules such that a rule is in it when one of its alternatives has only
// symbols that hold: byte symbols when bytes_hold(byte set index), rule symbols when their rule
// is in the set. Passes run from the last rule, where breadth-first numbering puts the leaves.
template <typename BytesHold>
std::vector<bool> least_fixed_point(const Rules& rules, BytesHold bytes_hold) {
  std::vector<bool> holds(rules.size());
  const auto symbol_holds = [&](Symbol s) {
    return s.kind == Symbol::Kind::Bytes ? bytes_hold(s.index)
                                         : holds[static_cast<size_t>(s.index)];
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = rules.size(); r-- > 0;) {
      if (holds[r]) continue;
      holds[r] = std::any_of(rules[r].begin(), rules[r].end(), [&](const Alternative& a) {
        return std::all_of(a.begin(), a.end(), symbol_holds);
      });
      changed = changed || holds[r];
    }
  }
  return holds;
}

// Drops the alternatives that can never complete; throws when the root cannot.
void drop_unproductive(Rules& rules, const std::vector<ByteSet>& byte_sets) {
  const std::vector<bool> productive = least_fixed_point(
      rules, [&](int32_t set) { return !byte_sets[static_cast<size_t>(set)].empty(); });
  if (!productive[0])
    throw GrammarError(
        "grammar: matches no complete string (every way through it recurses "
        "forever or needs a byte from an empty set)");
  for (size_t r = 0; r < rules.size(); ++r) {
    std::erase_if(rules[r], [&](const Alternative& alternative) {
      return std::any_of(alternative.begin(), alternative.end(), [&](Symbol s) {
        return s.kind == Symbol::Kind::Bytes ? byte_sets[static_cast<size_t>(s.index)].empty()
                                             : !productive[static_cast<size_t>(s.index)];
      });
    });
  }
}

// The strongly connected component of each node of a graph (Tarjan's algorithm, iterative).
std::vector<int32_t> components(const std::vector<std::vector<int32_t>>& edges) {
  const size_t n = edges.size();
  std::vector<int32_t> index(n, -1), low(n), component(n, -1), stack;
  std::vector<bool> on_stack(n);
  int32_t next_index = 0, next_component = 0;
  struct Frame {
    int32_t node;
    size_t next_edge;
  };
  std::vector<Frame> frames;
  const auto visit = [&](int32_t v) {
    index[v] = low[v] = next_index++;
    stack.push_back(v);
    on_stack[v] = true;
    frames.push_back({v, 0});
  };
  for (int32_t start = 0; start < static_cast<int32_t>(n); ++start) {
    if (index[start] >= 0) continue;
    visit(start);
    while (!frames.empty()) {
      const int32_t v = frames.back().node;
      if (frames.back().next_edge < edges[v].size()) {
        const int32_t w = edges[v][frames.back().next_edge++];
        if (index[w] < 0) {
          visit(w);
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      frames.pop_back();
      if (!frames.empty()) low[frames.back().node] = std::min(low[frames.back().node], low[v]);
      if (low[v] != index[v]) continue;
      for (int32_t w = -1; w != v;) {
        w = stack.back();
        stack.pop_back();
        on_stack[w] = false;
        component[w] = next_component;
      }
      ++next_component;
    }
  }
  return component;
}

// Throws when a rule can reach itself without reading a byte through a call that is not a tail
// call: each round would push a return position, so the recognizer's expansion would not end.
// (A cycle of tail calls is fine: it revisits the same parse.)
void check_left_recursion(const Rules& rules) {
  const std::vector<bool> nullable = least_fixed_point(rules, [](int32_t) { return false; });
  std::vector<std::vector<int32_t>> left_calls(rules.size());
  std::vector<std::pair<int32_t, int32_t>> pushing_calls;  // (caller, callee), not tail calls
  for (size_t r = 0; r < rules.size(); ++r) {
    for (const Alternative& alternative : rules[r]) {
      for (size_t i = 0; i < alternative.size(); ++i) {
        const Symbol s = alternative[i];
        if (s.kind == Symbol::Kind::Bytes) break;
        left_calls[r].push_back(s.index);
        if (i + 1 < alternative.size())
          pushing_calls.emplace_back(static_cast<int32_t>(r), s.index);
        if (!nullable[static_cast<size_t>(s.index)]) break;
      }
    }
  }
  const std::vector<int32_t> component = components(left_calls);
  for (const auto& [caller, callee] : pushing_calls) {
    if (component[caller] == component[callee])
      throw GrammarError(
          "grammar: left-recursive (a rule can reach itself without reading a "
          "byte)");
  }
}

FlatGrammar lay_out(const Rules& rules, const std::vector<ByteSet>& byte_sets) {
  FlatGrammar flat;
  flat.byte_sets = byte_sets;
  for (const std::vector<Alternative>& alternatives : rules) {
    flat.rule_begin.push_back(static_cast<int32_t>(flat.alternative_starts.size()));
    for (const Alternative& alternative : alternatives) {
      flat.alternative_starts.push_back(static_cast<int32_t>(flat.code.size()));
      for (const Symbol s : alternative) {
        flat.code.push_back(
            {s.kind == Symbol::Kind::Bytes ? Element::Kind::Bytes : Element::Kind::Rule, s.index});
      }
      flat.code.push_back({Element::Kind::End, 0});
    }
  }
  flat.rule_begin.push_back(static_cast<int32_t>(flat.alternative_starts.size()));
  return flat;
}

}  // namespace

FlatGrammar flatten(const RuleSet& rule_set, RuleSet::Rule root) {
  Rules rules = reachable_rules(rule_set, root);
  drop_unproductive(rules, rule_set.byte_sets());
  check_left_recursion(rules);
  return lay_out(rules, rule_set.byte_sets());
}

}  // namespace mlaserve::grammar
