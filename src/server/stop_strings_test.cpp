// StopStringMatcher and TextStream on their own.
#include <gtest/gtest.h>

#include "server/server_test_util.h"
#include "server/stop_strings.h"
#include "server/text_stream.h"

namespace mlaserve::server::testing {
namespace {

TEST(StopStringMatcherTest, ReleasesTextThatCannotStartAStop) {
  StopStringMatcher matcher({"STOP"});
  EXPECT_EQ(matcher.push("hello "), "hello ");
  EXPECT_EQ(matcher.push("wor"), "wor");
  EXPECT_EQ(matcher.finish(), "");
  EXPECT_FALSE(matcher.matched());
}

TEST(StopStringMatcherTest, HoldsBackAPossibleStartUntilDecided) {
  StopStringMatcher matcher({"STOP"});
  EXPECT_EQ(matcher.push("abc ST"), "abc ");
  EXPECT_EQ(matcher.push("O"), "");
  EXPECT_EQ(matcher.push("x"), "STOx");  // not a stop after all
  EXPECT_EQ(matcher.push("S"), "");
  EXPECT_EQ(matcher.finish(), "S");
}

TEST(StopStringMatcherTest, MatchAcrossPiecesCutsTheText) {
  StopStringMatcher matcher({"STOP"});
  EXPECT_EQ(matcher.push("one S"), "one ");
  EXPECT_EQ(matcher.push("TO"), "");
  EXPECT_EQ(matcher.push("P and more"), "");
  EXPECT_EQ(matcher.matched(), "STOP");
  EXPECT_EQ(matcher.push("later"), "");
  EXPECT_EQ(matcher.finish(), "");
}

TEST(StopStringMatcherTest, EarliestOfSeveralStopsWins) {
  StopStringMatcher matcher({"world", "lo w"});
  EXPECT_EQ(matcher.push("hello world"), "hel");
  EXPECT_EQ(matcher.matched(), "lo w");
}

TEST(StopStringMatcherTest, StopInsideOnePiece) {
  StopStringMatcher matcher({"\n\n"});
  EXPECT_EQ(matcher.push("line\n\nnext"), "line");
  EXPECT_EQ(matcher.matched(), "\n\n");
}

TEST(StopStringMatcherTest, HeldTailIsTheLongestPossibleStart) {
  StopStringMatcher matcher({"aab"});
  EXPECT_EQ(matcher.push("xaa"), "x");
  EXPECT_EQ(matcher.push("a"), "a");  // "aaa": only "aa" can still begin "aab"
  EXPECT_EQ(matcher.push("b"), "");
  EXPECT_EQ(matcher.matched(), "aab");
}

TEST(StopStringMatcherTest, MultibyteStopHoldsWholeCharacters) {
  StopStringMatcher matcher({"日本"});
  EXPECT_EQ(matcher.push("a日"), "a");
  EXPECT_EQ(matcher.push("x"), "日x");
}

TEST(TextStreamTest, HoldsBackUnfinishedCharacters) {
  const tokenizer::Tokenizer& tokenizer = brown_tiny_tokenizer();
  TextStream stream(tokenizer, true, {});
  // "é" is bytes C3 A9: the byte-level symbols "Ã" and "©".
  EXPECT_EQ(stream.push(id_of("Ã")), "");
  EXPECT_EQ(stream.push(id_of("©")), "é");
  EXPECT_EQ(stream.push(id_of("Ã")), "");
  EXPECT_EQ(stream.finish(), "\xEF\xBF\xBD");  // an unfinished character at the end
  EXPECT_EQ(stream.decoded_code_points(), 1u);
}

TEST(TextStreamTest, SkipsSpecialTokensAndMatchesStops) {
  const tokenizer::Tokenizer& tokenizer = brown_tiny_tokenizer();
  TextStream stream(tokenizer, true, {"here"});
  EXPECT_EQ(stream.push(*tokenizer.bos_id()), "");
  EXPECT_EQ(stream.push(id_of("Ġthe")), " t");
  EXPECT_EQ(stream.push(id_of("re")), "");
  EXPECT_EQ(stream.matched_stop(), "here");
  EXPECT_EQ(stream.push(id_of("Ġa")), "");
  EXPECT_EQ(stream.finish(), "");
}

}  // namespace
}  // namespace mlaserve::server::testing
