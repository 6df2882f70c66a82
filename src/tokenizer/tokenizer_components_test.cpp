// The tokenizer's parts: UTF-8 handling, the byte map, regex translation, Split behaviors,
// added-token options, BPE options and the special tokens that encode adds.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/regex.h"
#include "tokenizer/tiny_tokenizer_test_util.h"
#include "tokenizer/token_id_map.h"
#include "tokenizer/utf8.h"
#include "tokenizer/word_cache.h"

namespace mlaserve::tokenizer {
namespace {

using nlohmann::json;
using testing::tiny_tokenizer_json;
using testing::TinyTokenizerDir;
using Ids = std::vector<int32_t>;

std::string lossy(std::string_view bytes) {
  std::string out;
  utf8::append_lossy(out, bytes);
  return out;
}

TEST(Utf8, LossyDecodingReplacesMaximalSubparts) {
  EXPECT_EQ(lossy("a\xE2\x82\xAC"), "a€");
  EXPECT_EQ(lossy("\xE2\x82"), "\uFFFD");                  // truncated: one replacement
  EXPECT_EQ(lossy("\xF0\x80\x80"), "\uFFFD\uFFFD\uFFFD");  // F0 80 is never valid
  EXPECT_EQ(lossy("\xED\xA0\x80"), "\uFFFD\uFFFD\uFFFD");  // a surrogate
  EXPECT_EQ(lossy("\xC0\xAF x \xFF"), "\uFFFD\uFFFD x \uFFFD");
  EXPECT_EQ(lossy("\xE2\x82("), "\uFFFD(");
}

TEST(Utf8, IncompleteTailAndValidation) {
  EXPECT_EQ(utf8::incomplete_tail_length("ab"), 0u);
  EXPECT_EQ(utf8::incomplete_tail_length("a\xE2\x82"), 2u);
  EXPECT_EQ(utf8::incomplete_tail_length("a\xF0\x9F\x98"), 3u);
  EXPECT_EQ(utf8::incomplete_tail_length("a\xF0\x9F\x98\x80"), 0u);
  EXPECT_EQ(utf8::incomplete_tail_length("a\x82"),
            0u);  // a stray continuation byte never completes
  EXPECT_EQ(utf8::first_invalid_offset("ok €"), std::nullopt);
  EXPECT_EQ(utf8::first_invalid_offset("ok \xC3("), 3u);
}

TEST(ByteLevel, Gpt2ByteMap) {
  EXPECT_EQ(byte_level::byte_to_char(' '), U'Ġ');
  EXPECT_EQ(byte_level::byte_to_char('\n'), U'Ċ');
  EXPECT_EQ(byte_level::byte_to_char('a'), U'a');
  EXPECT_EQ(byte_level::char_to_byte(U'Ġ'), ' ');
  EXPECT_EQ(byte_level::char_to_byte(U'｜'), std::nullopt);
  EXPECT_EQ(byte_level::bytes_to_symbols(" a\n"), "ĠaĊ");
  EXPECT_EQ(byte_level::symbols_to_bytes("ĠaĊ"), " a\n");
  // A token with a character outside the map (an added token) decodes to its own text.
  EXPECT_EQ(byte_level::symbols_to_bytes("<｜User｜>"), "<｜User｜>");
}

TEST(TokenIdMap, KeepsTheFirstIdAndGrows) {
  TokenIdMap map;
  for (int32_t id = 0; id < 1000; ++id) EXPECT_TRUE(map.insert(fmt::format("token{}", id), id));
  EXPECT_FALSE(map.insert("token7", 99));
  EXPECT_EQ(map.find("token7"), 7);
  EXPECT_EQ(map.find("token999"), 999);
  EXPECT_EQ(map.find("token1000"), std::nullopt);
  EXPECT_EQ(map.find(""), std::nullopt);
}

TEST(WordCache, StoresShortWordsAndReplacesOnCollision) {
  WordCache cache;
  Ids ids;
  EXPECT_FALSE(cache.lookup("hello", ids));
  cache.store("hello", Ids{1, 2});
  EXPECT_TRUE(cache.lookup("hello", ids));
  EXPECT_EQ(ids, (Ids{1, 2}));
  // Storing many words evicts some; whatever is found must be what was stored for that word.
  for (int32_t i = 0; i < 100000; ++i) cache.store(fmt::format("w{}", i), Ids{i});
  for (int32_t i = 0; i < 100000; i += 997) {
    ids.clear();
    if (cache.lookup(fmt::format("w{}", i), ids)) {
      EXPECT_EQ(ids, Ids{i});
    }
  }
  const std::string long_word(WordCache::kMaxWordBytes + 1, 'x');
  cache.store(long_word, Ids{5});
  EXPECT_FALSE(cache.lookup(long_word, ids));
}

TEST(Regex, OnigurumaEscapesAreTranslated) {
  EXPECT_EQ(translate_oniguruma(R"(\s+(?!\S))"), R"(\p{White_Space}+(?!\P{White_Space}))");
  EXPECT_EQ(translate_oniguruma(R"([^\s\p{L}]\w)"),
            R"([^\p{White_Space}\p{L}][\p{L}\p{M}\p{Nd}\p{Pc}])");
  EXPECT_EQ(translate_oniguruma(R"([]\[\\]\d)"), R"([]\[\\]\d)");
  EXPECT_THROW(translate_oniguruma(R"([\W])"), Error);
  EXPECT_THROW(translate_oniguruma(R"(\h)"), Error);
  EXPECT_THROW(translate_oniguruma(R"([a[b]])"), Error);
}

std::vector<std::string> matches(const Regex& regex, std::string_view text) {
  std::vector<Match> found;
  regex.find_all(text, found);
  std::vector<std::string> out;
  for (const Match& match : found)
    out.emplace_back(text.substr(match.begin, match.end - match.begin));
  return out;
}

TEST(Regex, WhitespaceFollowsOniguruma) {
  const Regex space = Regex::from_oniguruma(R"(\s)");
  EXPECT_EQ(matches(space, "a\u0085b\u00A0c\u3000"),
            (std::vector<std::string>{"\u0085", "\u00A0", "\u3000"}));
  EXPECT_TRUE(matches(space, "\u180E\uFEFF").empty());  // not White_Space in Unicode 6.3+
}

TEST(Regex, LongWhitespaceRunsMatch) {
  const Regex regex = Regex::from_oniguruma(R"(\s+(?!\S)|\s+)");
  const std::string spaces(1 << 20, ' ');
  EXPECT_EQ(matches(regex, spaces + "x"), (std::vector<std::string>{spaces.substr(1), " "}));
}

std::vector<std::string> split(const std::string& behavior, bool invert, std::string_view text) {
  const json config = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"},
         {"pattern", {{"String", "-"}}},
         {"behavior", behavior},
         {"invert", invert}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  std::vector<std::string> pieces;
  std::deque<std::string> arena;
  PreTokenizer::from_json(config).split(
      text, [&](std::string_view piece) { pieces.emplace_back(piece); }, arena);
  return pieces;
}

// The examples of HF's SplitDelimiterBehavior documentation.
TEST(PreTokenizer, SplitBehaviors) {
  using Pieces = std::vector<std::string>;
  const std::string text = "the-final--countdown";
  EXPECT_EQ(split("Removed", false, text), (Pieces{"the", "final", "countdown"}));
  EXPECT_EQ(split("Isolated", false, text), (Pieces{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(split("MergedWithPrevious", false, text), (Pieces{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(split("MergedWithNext", false, text), (Pieces{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(split("Contiguous", false, text), (Pieces{"the", "-", "final", "--", "countdown"}));
  EXPECT_EQ(split("Removed", true, text), (Pieces{"-", "-", "-"}));
}

TEST(TinyTokenizer, PrefixSpaceAndMergesAsPairs) {
  json tokenizer = tiny_tokenizer_json();
  tokenizer["pre_tokenizer"]["add_prefix_space"] = true;
  tokenizer["model"]["merges"] = json::array({json::array({"a", "b"})});
  const TinyTokenizerDir dir;
  EXPECT_EQ(dir.load(tokenizer).encode("ab", false), (Ids{' ', 256}));
}

TEST(TinyTokenizer, AddedTokenStripsWhitespace) {
  json tokenizer = tiny_tokenizer_json();
  tokenizer["added_tokens"].push_back(
      {{"id", 258}, {"content", "<m>"}, {"lstrip", true}, {"rstrip", true}});
  const TinyTokenizerDir dir;
  const Tokenizer tok = dir.load(tokenizer);
  EXPECT_EQ(tok.encode("c \u3000<m>\t d", false), (Ids{'c', 258, 'd'}));
  EXPECT_EQ(tok.decode(Ids{257, 'c', 258}, true), "c<m>");
}

TEST(TinyTokenizer, IgnoreMergesAndUnknownBytes) {
  json tokenizer = tiny_tokenizer_json();
  tokenizer["model"]["vocab"]["abc"] = 258;
  const TinyTokenizerDir dir;
  EXPECT_EQ(dir.load(tokenizer).encode("abc", false), (Ids{256, 'c'}));
  tokenizer["model"]["ignore_merges"] = true;
  EXPECT_EQ(dir.load(tokenizer).encode("abc", false), (Ids{258}));

  tokenizer = tiny_tokenizer_json();
  tokenizer["model"]["vocab"].erase("z");
  tokenizer["model"]["vocab"]["<unk>"] = 122;                       // takes over the id of "z"
  EXPECT_EQ(dir.load(tokenizer).encode("azz", false), (Ids{'a'}));  // no unk_token: dropped
  tokenizer["model"]["unk_token"] = "<unk>";
  EXPECT_EQ(dir.load(tokenizer).encode("azz", false), (Ids{'a', 122, 122}));
  tokenizer["model"]["fuse_unk"] = true;
  EXPECT_EQ(dir.load(tokenizer).encode("azz", false), (Ids{'a', 122}));
}

TEST(TinyTokenizer, SpecialTokensFromPostProcessorOrConfig) {
  const TinyTokenizerDir dir;
  json tokenizer = tiny_tokenizer_json();
  tokenizer["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single",
       {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {257}}, {"tokens", {"<s>"}}}}}}};
  EXPECT_EQ(dir.load(tokenizer).encode("ab", true), (Ids{257, 256}));
  EXPECT_EQ(dir.load(tokenizer).encode("ab", false), (Ids{256}));
  // tokenizer_config's add_bos_token/add_eos_token replace the post-processor (HF Python).
  const json config = {{"add_bos_token", false}, {"add_eos_token", true}, {"eos_token", "<s>"}};
  EXPECT_EQ(dir.load(tokenizer, config).encode("ab", true), (Ids{256, 257}));
  EXPECT_EQ(dir.load(tokenizer, config).eos_id(), 257);
  tokenizer["post_processor"] = {
      {"type", "RobertaProcessing"}, {"cls", {"<s>", 257}}, {"sep", {"ab", 256}}};
  EXPECT_EQ(dir.load(tokenizer).encode("a", true), (Ids{257, 'a', 256}));
}

TEST(TinyTokenizer, StreamingHoldsBackPartialCharacters) {
  const TinyTokenizerDir dir;
  const Tokenizer tok = dir.load(tiny_tokenizer_json());
  IncrementalDecoder decoder(tok, true);
  EXPECT_EQ(decoder.push(0xE2), "");
  EXPECT_EQ(decoder.push(0x82), "");
  EXPECT_EQ(decoder.push(257), "");  // special, skipped
  EXPECT_EQ(decoder.push(0xAC), "€");
  EXPECT_EQ(decoder.push('a'), "a");
  EXPECT_EQ(decoder.push(0xF0), "");
  EXPECT_EQ(decoder.push('b'), "\uFFFDb");  // the character was broken off
  EXPECT_EQ(decoder.push(0xE2), "");
  EXPECT_EQ(decoder.flush(), "\uFFFD");
  EXPECT_EQ(tok.decode(Ids{0xE2, 0x82}, false), "\uFFFD");
}

}  // namespace
}  // namespace mlaserve::tokenizer
