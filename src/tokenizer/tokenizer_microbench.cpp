// Tokenizer throughput on the DeepSeek-V3 tokenizer: load time, and encode MB/s on a few MB of
// three kinds of text. Run from the repository root:
//   build/src/tokenizer/mlaserve_tokenizer_microbench
#include <benchmark/benchmark.h>

#include <random>

#include "tokenizer/tokenizer_test_util.h"

namespace mlaserve::tokenizer {
namespace {

constexpr size_t kTextBytes = 4 << 20;

std::string repeat_to_size(const std::vector<std::string>& parts, const std::string& separator) {
  std::string text;
  for (size_t i = 0; text.size() < kTextBytes; i = (i + 1) % parts.size())
    text += parts[i] + separator;
  return text;
}

// All 60 golden cases (prose, code, numbers, CJK, emoji, odd Unicode, added tokens), repeated.
std::string mixed_case_text() {
  const nlohmann::json file = testing::read_json("tests/data/tokenizer/cases.json");
  std::vector<std::string> texts;
  for (const auto& golden : file.at("cases")) {
    texts.push_back(testing::from_hex(golden.at("text_utf8_hex").get<std::string>()));
  }
  return repeat_to_size(texts, "\n");
}

// English prose: brown-tiny's held-out Brown Corpus documents, decoded and repeated.
std::string prose_text() {
  const auto tokens =
      testing::read_json(std::string(testing::kBrownTinyTokenizerDir) + "/reference_tokens.json")
          .at("heldout_tokens")
          .get<std::vector<int32_t>>();
  return repeat_to_size({testing::brown_tiny_tokenizer().decode(tokens, true)}, "\n\n");
}

// Random lowercase words: almost every word is new, so the word cache rarely helps and the
// merge loop is measured.
std::string random_word_text() {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> length(3, 10);
  std::uniform_int_distribution<int> letter('a', 'z');
  std::string text;
  while (text.size() < kTextBytes) {
    for (int i = length(rng); i > 0; --i) text += static_cast<char>(letter(rng));
    text += ' ';
  }
  return text;
}

void encode_benchmark(benchmark::State& state, const std::string& text) {
  const Tokenizer& tok = testing::deepseek_v3_tokenizer();
  size_t ids = 0;
  for (auto _ : state) {
    const std::vector<int32_t> encoded = tok.encode(text, false);
    ids = encoded.size();
    benchmark::DoNotOptimize(encoded.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["bytes_per_token"] = static_cast<double>(text.size()) / static_cast<double>(ids);
}

void BM_EncodeMixedCases(benchmark::State& state) {
  encode_benchmark(state, mixed_case_text());
}
void BM_EncodeProse(benchmark::State& state) {
  encode_benchmark(state, prose_text());
}
void BM_EncodeRandomWords(benchmark::State& state) {
  encode_benchmark(state, random_word_text());
}

void BM_DecodeStreamingProse(benchmark::State& state) {
  const Tokenizer& tok = testing::deepseek_v3_tokenizer();
  const std::string text = prose_text();
  const std::vector<int32_t> ids = tok.encode(text, false);
  for (auto _ : state) benchmark::DoNotOptimize(testing::decode_streaming(tok, ids, false));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}

void BM_LoadDeepSeekV3(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(Tokenizer::load(testing::kDeepSeekV3TokenizerDir));
}

BENCHMARK(BM_EncodeMixedCases)->Unit(benchmark::kMillisecond)->MinTime(3);
BENCHMARK(BM_EncodeProse)->Unit(benchmark::kMillisecond)->MinTime(3);
BENCHMARK(BM_EncodeRandomWords)->Unit(benchmark::kMillisecond)->MinTime(3);
BENCHMARK(BM_DecodeStreamingProse)->Unit(benchmark::kMillisecond)->MinTime(2);
BENCHMARK(BM_LoadDeepSeekV3)->Unit(benchmark::kMillisecond)->MinTime(3);

}  // namespace
}  // namespace mlaserve::tokenizer
