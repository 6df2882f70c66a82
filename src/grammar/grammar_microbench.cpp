// Cost of constrained decoding on DeepSeek-V3's vocabulary (129,280 ids): token masks computed
// (cold: a fresh grammar; warm: transitions known, mask not cached) and cached, in four states
// of a schema's document (a bounded string has a state per length, so each of its masks is
// computed); accept_token; a whole document token by token; compiling the schema.
// Run from the repository root:
//   build/src/grammar/mlaserve_grammar_microbench
#include <benchmark/benchmark.h>

#include <bit>
#include <map>

#include "grammar/compiled_grammar.h"
#include "grammar/grammar.h"
#include "grammar/grammar_test_util.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"

namespace mlaserve::grammar {
namespace {

// A moderately complex schema: nested objects, arrays, enums, anyOf, a recursive $ref.
const nlohmann::ordered_json& order_schema() {
  static const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(R"({
    "type": "object",
    "properties": {
      "name": {"type": "string"},
      "nickname": {"type": "string", "maxLength": 200},
      "age": {"type": "integer"},
      "email": {"type": ["string", "null"]},
      "status": {"enum": ["pending", "paid", "shipped", "delivered", "cancelled"]},
      "total": {"type": "number"},
      "items": {"type": "array", "minItems": 1, "items": {
        "type": "object",
        "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer"},
                       "price": {"type": "number"}, "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["sku", "quantity"], "additionalProperties": false}},
      "address": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/address"}]},
      "notes": {"type": "array", "items": {"$ref": "#/$defs/note"}, "maxItems": 10}
    },
    "required": ["name", "age", "status", "items"],
    "additionalProperties": false,
    "$defs": {
      "address": {"type": "object", "properties": {"street": {"type": "string"},
        "city": {"type": "string"}, "zip": {"type": "string", "minLength": 5, "maxLength": 10},
        "country": {"enum": ["FR", "DE", "US", "GB", "JP"]}}, "required": ["city"]},
      "note": {"type": "object", "properties": {"text": {"type": "string"},
        "replies": {"type": "array", "items": {"$ref": "#/$defs/note"}}}, "required": ["text"]}
    }})");
  return schema;
}

// One line, as the grammar's whitespace rule (json_rules.h) wants it.
const std::string kDocument =
    R"({"name": "Alice Martin", "nickname": "Ali", "age": 42, "email": null, "status": "paid", )"
    R"("total": 1234.5, "items": [{"sku": "A-1001", "quantity": 2, "price": 99.99, "tags": )"
    R"(["gift"]}, {"sku": "B-2002", "quantity": 1}], "address": {"street": "1 rue de la Paix", )"
    R"("city": "Paris", "zip": "75002", "country": "FR"}, "notes": [{"text": "Leave at the )"
    R"(door.", "replies": []}]})";

// The bytes that lead to each measured state.
const std::map<std::string, std::string> kPrefixes = {
    {"object_start", "{"},
    {"in_string", R"({"name": "Alice Ma)"},
    {"in_bounded_string", R"({"name": "Alice", "nickname": "Al)"},
    {"after_number", R"({"name": "Alice", "age": 42)"}};

std::shared_ptr<const TokenVocabulary> vocabulary() {
  return testing::deepseek_v3_vocabulary();
}

GrammarMatcher matcher_at(const GrammarPtr& grammar, const std::string& state) {
  GrammarMatcher matcher(grammar, vocabulary());
  if (!matcher.accept_bytes(kPrefixes.at(state))) std::abort();
  return matcher;
}

void report_allowed(benchmark::State& state, const std::vector<uint64_t>& mask) {
  int64_t allowed = 0;
  for (const uint64_t word : mask) allowed += std::popcount(word);
  state.counters["allowed"] = static_cast<double>(allowed);
}

// A fresh grammar every iteration (compiled outside the timing): transitions and mask computed.
void BM_FillMaskCold(benchmark::State& state, const std::string& at) {
  std::vector<uint64_t> mask(static_cast<size_t>(vocabulary()->mask_words()));
  for (auto _ : state) {
    state.PauseTiming();
    GrammarMatcher matcher = matcher_at(json_schema_grammar(order_schema()), at);
    state.ResumeTiming();
    matcher.fill_mask(mask);
  }
  report_allowed(state, mask);
}

// The trie walk alone: every transition it needs is already in the tables.
void BM_FillMaskWarm(benchmark::State& state, const std::string& at) {
  RuleSet rules;
  JsonRules json(rules);
  const FlatGrammar flat = flatten(rules, compile_json_schema(json, rules, order_schema()));
  Recognizer recognizer(flat);
  StateId start = recognizer.initial();
  for (const char c : kPrefixes.at(at)) start = recognizer.next(start, static_cast<uint8_t>(c));
  std::vector<uint64_t> mask(static_cast<size_t>(vocabulary()->mask_words()));
  compute_token_mask(recognizer, start, vocabulary()->trie(), mask);
  for (auto _ : state) compute_token_mask(recognizer, start, vocabulary()->trie(), mask);
  report_allowed(state, mask);
}

void BM_FillMaskCached(benchmark::State& state, const std::string& at) {
  GrammarMatcher matcher = matcher_at(json_schema_grammar(order_schema()), at);
  std::vector<uint64_t> mask(static_cast<size_t>(vocabulary()->mask_words()));
  for (auto _ : state) matcher.fill_mask(mask);
  report_allowed(state, mask);
}

// " the" inside a string, over and over: the state after it is the state before it.
void BM_AcceptToken(benchmark::State& state) {
  GrammarMatcher matcher(json_schema_grammar(nlohmann::json::parse(R"({"type": "string"})")),
                         vocabulary());
  if (!matcher.accept_bytes("\"")) std::abort();
  const int32_t the = mlaserve::testing::deepseek_v3_tokenizer().encode(" the", false).at(0);
  for (auto _ : state) benchmark::DoNotOptimize(matcher.accept_token(the));
}

// kDocument token by token (fill_mask, then accept_token), on a fresh grammar every iteration
// (cold: the first request with this schema) or on one grammar (warm); time per token.
void run_document(benchmark::State& state, bool cold) {
  const std::vector<int32_t> ids =
      mlaserve::testing::deepseek_v3_tokenizer().encode(kDocument, false);
  std::vector<uint64_t> mask(static_cast<size_t>(vocabulary()->mask_words()));
  GrammarPtr grammar = json_schema_grammar(order_schema());
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      grammar = json_schema_grammar(order_schema());
      state.ResumeTiming();
    }
    GrammarMatcher matcher(grammar, vocabulary());
    for (const int32_t id : ids) {
      matcher.fill_mask(mask);
      if (!matcher.accept_token(id)) std::abort();
    }
  }
  state.counters["tokens"] = static_cast<double>(ids.size());
  state.counters["per_token"] = benchmark::Counter(
      static_cast<double>(ids.size()),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_DocumentCold(benchmark::State& state) {
  run_document(state, true);
}
void BM_DocumentWarm(benchmark::State& state) {
  run_document(state, false);
}

void BM_CompileSchema(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(json_schema_grammar(order_schema()));
}

// Loads the vocabulary before any timing.
void BM_LoadVocabulary(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(vocabulary());
}

BENCHMARK(BM_LoadVocabulary)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_FillMaskCold, object_start, "object_start")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_FillMaskCold, in_string, "in_string")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_FillMaskCold, in_bounded_string, "in_bounded_string")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_FillMaskCold, after_number, "after_number")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_FillMaskWarm, object_start, "object_start")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_FillMaskWarm, in_string, "in_string")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_FillMaskWarm, in_bounded_string, "in_bounded_string")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_FillMaskWarm, after_number, "after_number")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_FillMaskCached, object_start, "object_start")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_FillMaskCached, in_string, "in_string")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_FillMaskCached, in_bounded_string, "in_bounded_string")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_FillMaskCached, after_number, "after_number")->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AcceptToken);
BENCHMARK(BM_DocumentCold)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DocumentWarm)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CompileSchema)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace mlaserve::grammar
