// The pre-tokenizer: cuts ordinary text into the pieces ("words") that BPE encodes one by one.
#pragma once

#include <deque>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tokenizer/regex.h"

namespace mlaserve::tokenizer {

// What a Split step does with the text its pattern matches (HF SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct SplitStep {
  Regex pattern;
  SplitBehavior behavior;
  bool invert;  // the pattern describes the pieces rather than the delimiters
};

// HF ByteLevel: optionally prefixes a space and splits with the GPT-2 regex. Its byte-to-character
// mapping is not done here: the BPE model works on raw bytes and maps them to symbol ids itself.
struct ByteLevelStep {
  bool add_prefix_space;
  std::vector<Regex> gpt2_split;  // empty when use_regex is false, else the one GPT-2 regex
};

class PreTokenizer {
 public:
  // Builds the steps from tokenizer.json's "pre_tokenizer". Supported: Sequence, Split (Regex or
  // String pattern) and ByteLevel, which must come last since only byte-level BPE is supported.
  static PreTokenizer from_json(const nlohmann::json& config);
  // tiktoken's split: the pieces are the matches of `pattern` (written for Oniguruma, see
  // Regex::from_oniguruma), and text that no match covers is dropped, as tiktoken drops it.
  static PreTokenizer from_matches(std::string_view pattern);

  using PieceSink = std::function<void(std::string_view piece)>;

  // Passes the pieces of `text` to `sink`, in order. They point into `text`, or into `arena` when
  // a step adds characters (ByteLevel's prefix space).
  void split(std::string_view text, const PieceSink& sink, std::deque<std::string>& arena) const;

 private:
  using Step = std::variant<SplitStep, ByteLevelStep>;
  struct StepScratch;

  // Runs `piece` through steps_[step] and the steps after it, depth first, so that no step ever
  // holds the pieces of a whole long text.
  void split_from(size_t step, std::string_view piece, std::vector<StepScratch>& scratch,
                  const PieceSink& sink, std::deque<std::string>& arena) const;

  std::vector<Step> steps_;
};

}  // namespace mlaserve::tokenizer
