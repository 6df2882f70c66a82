#include "tokenizer/pre_tokenizer.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace mlaserve::tokenizer {
namespace {

using nlohmann::json;

// GPT-2's pre-tokenization regex, which HF ByteLevel applies when use_regex is true.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// A stretch of a piece, and whether it is a delimiter (after `invert` is applied).
struct Span {
  size_t begin;
  size_t end;
  bool delimiter;
};

SplitBehavior parse_behavior(const json& value) {
  const std::string name = value.get<std::string>();
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  fail("pre_tokenizer Split: unknown behavior '{}'", name);
}

SplitStep parse_split(const json& config) {
  const json& pattern = config.at("pattern");
  const bool invert = config.value("invert", false);
  const SplitBehavior behavior = parse_behavior(config.at("behavior"));
  if (pattern.contains("Regex")) {
    return {Regex::from_oniguruma(pattern["Regex"].get<std::string>()), behavior, invert};
  }
  if (pattern.contains("String")) {
    return {Regex::literal(pattern["String"].get<std::string>()), behavior, invert};
  }
  fail("pre_tokenizer Split: pattern must be {{\"Regex\": ...}} or {{\"String\": ...}}, got {}",
       pattern.dump());
}

ByteLevelStep parse_byte_level(const json& config) {
  ByteLevelStep step{config.value("add_prefix_space", false), {}};
  if (config.value("use_regex", true))
    step.gpt2_split.push_back(Regex::from_oniguruma(kGpt2Pattern));
  return step;
}

template <typename Step>
void append_steps(const json& config, std::vector<Step>& steps) {
  const std::string type = config.at("type").get<std::string>();
  if (type == "Sequence") {
    for (const json& child : config.at("pretokenizers")) append_steps(child, steps);
  } else if (type == "Split") {
    steps.emplace_back(parse_split(config));
  } else if (type == "ByteLevel") {
    steps.emplace_back(parse_byte_level(config));
  } else {
    fail("pre_tokenizer type '{}' is not supported (supported: Sequence, Split, ByteLevel)", type);
  }
}

// Covers `piece` with alternating delimiter and non-delimiter spans.
void find_spans(const Regex& pattern, bool invert, std::string_view piece,
                std::vector<Match>& matches, std::vector<Span>& spans) {
  matches.clear();
  spans.clear();
  pattern.find_all(piece, matches);
  size_t covered = 0;
  for (const Match& match : matches) {
    if (match.begin > covered) spans.push_back({covered, match.begin, invert});
    spans.push_back({match.begin, match.end, !invert});
    covered = match.end;
  }
  if (covered < piece.size()) spans.push_back({covered, piece.size(), invert});
}

// Groups the spans into output pieces according to the behavior (HF SplitDelimiterBehavior).
void group_spans(SplitBehavior behavior, const std::vector<Span>& spans, std::string_view piece,
                 std::vector<std::string_view>& out) {
  size_t group_begin = 0;
  bool open = false;  // a group is being built and ends at the current span
  auto emit = [&](size_t end) {
    if (end > group_begin) out.push_back(piece.substr(group_begin, end - group_begin));
    open = false;
  };
  for (size_t i = 0; i < spans.size(); ++i) {
    const Span& span = spans[i];
    const bool previous_delimiter = i > 0 && spans[i - 1].delimiter;
    const bool joins_previous =
        open &&
        ((behavior == SplitBehavior::kMergedWithPrevious && span.delimiter &&
          !previous_delimiter) ||
         (behavior == SplitBehavior::kMergedWithNext && !span.delimiter && previous_delimiter) ||
         (behavior == SplitBehavior::kContiguous && span.delimiter == previous_delimiter));
    if (!joins_previous) {
      if (open) emit(span.begin);
      if (behavior == SplitBehavior::kRemoved && span.delimiter) continue;
      group_begin = span.begin;
      open = true;
    }
  }
  if (open) emit(piece.size());
}

}  // namespace

PreTokenizer PreTokenizer::from_json(const json& config) {
  if (config.is_null()) fail("pre_tokenizer is null; only byte-level BPE (ByteLevel) is supported");
  PreTokenizer pre_tokenizer;
  append_steps(config, pre_tokenizer.steps_);
  if (pre_tokenizer.steps_.empty() ||
      !std::holds_alternative<ByteLevelStep>(pre_tokenizer.steps_.back())) {
    fail("pre_tokenizer must end with a ByteLevel step: only byte-level BPE is supported");
  }
  for (size_t i = 0; i + 1 < pre_tokenizer.steps_.size(); ++i) {
    if (std::holds_alternative<ByteLevelStep>(pre_tokenizer.steps_[i])) {
      fail("pre_tokenizer: a ByteLevel step before other steps is not supported");
    }
  }
  return pre_tokenizer;
}

PreTokenizer PreTokenizer::from_matches(std::string_view pattern) {
  PreTokenizer pre_tokenizer;
  // Inverted, the matches are the pieces and the gaps between them the delimiters, removed.
  pre_tokenizer.steps_.emplace_back(
      SplitStep{Regex::from_oniguruma(pattern), SplitBehavior::kRemoved, /*invert=*/true});
  return pre_tokenizer;
}

struct PreTokenizer::StepScratch {
  std::vector<Match> matches;
  std::vector<Span> spans;
  std::vector<std::string_view> pieces;
};

void PreTokenizer::split(std::string_view text, const PieceSink& sink,
                         std::deque<std::string>& arena) const {
  std::vector<StepScratch> scratch(steps_.size());
  split_from(0, text, scratch, sink, arena);
}

void PreTokenizer::split_from(size_t step, std::string_view piece,
                              std::vector<StepScratch>& scratch, const PieceSink& sink,
                              std::deque<std::string>& arena) const {
  if (step == steps_.size()) {
    sink(piece);
    return;
  }
  StepScratch& own = scratch[step];
  own.pieces.clear();
  if (const auto* split = std::get_if<SplitStep>(&steps_[step])) {
    find_spans(split->pattern, split->invert, piece, own.matches, own.spans);
    group_spans(split->behavior, own.spans, piece, own.pieces);
  } else {
    const auto& byte_level = std::get<ByteLevelStep>(steps_[step]);
    if (byte_level.add_prefix_space && !piece.starts_with(' ')) {
      std::string& spaced = arena.emplace_back(1, ' ');
      piece = spaced.append(piece);
    }
    if (byte_level.gpt2_split.empty()) {
      own.pieces.push_back(piece);
    } else {
      find_spans(byte_level.gpt2_split.front(), false, piece, own.matches, own.spans);
      group_spans(SplitBehavior::kIsolated, own.spans, piece, own.pieces);
    }
  }
  // Deeper steps use their own scratch, so own.pieces stays intact while they run.
  for (const std::string_view sub_piece : own.pieces) {
    split_from(step + 1, sub_piece, scratch, sink, arena);
  }
}

}  // namespace mlaserve::tokenizer
