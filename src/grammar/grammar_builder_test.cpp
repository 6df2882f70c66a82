// Composed grammars (tool calls), and one grammar shared by matchers on several threads.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "grammar/grammar.h"
#include "grammar/grammar_test_util.h"

namespace mlaserve::grammar {
namespace {

using testing::Match;
using testing::match;

// <tool_call>{"name": NAME, "arguments": ARGS}</tool_call>, one or more separated by "\n".
GrammarPtr tool_calls() {
  GrammarBuilder b;
  const auto call = [&](const std::string& name, const char* parameters) {
    return b.sequence({b.literal(R"({"name": ")" + name + R"(", "arguments": )"),
                       b.json_schema(nlohmann::ordered_json::parse(parameters)), b.literal("}")});
  };
  const GrammarBuilder::Rule functions = b.choice(
      {call("get_weather", R"({"type": "object", "properties": {"city": {"type": "string"}},
                               "required": ["city"], "additionalProperties": false})"),
       call("get_time", R"({"type": "object", "properties": {}, "additionalProperties": false})")});
  const GrammarBuilder::Rule one =
      b.sequence({b.literal("<tool_call>"), functions, b.literal("</tool_call>")});
  return std::move(b).build(b.one_or_more(one, b.literal("\n")));
}

TEST(GrammarBuilder, ToolCalls) {
  const GrammarPtr grammar = tool_calls();
  const std::string weather =
      R"(<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>)";
  const std::string time = R"(<tool_call>{"name": "get_time", "arguments": {}}</tool_call>)";
  EXPECT_EQ(match(grammar, weather), Match::Complete);
  EXPECT_EQ(match(grammar, weather + "\n" + time + "\n" + weather), Match::Complete);
  EXPECT_EQ(match(grammar, weather + "\n"), Match::Prefix);
  EXPECT_EQ(match(grammar, R"(<tool_call>{"name": "get_)"), Match::Prefix);
  EXPECT_EQ(match(grammar, R"(<tool_call>{"name": "get_date)"), Match::Rejected);
  EXPECT_EQ(match(grammar, R"(<tool_call>{"name": "get_time", "arguments": {"city": "x"}})"),
            Match::Rejected);
  EXPECT_EQ(match(grammar, weather + weather), Match::Rejected);
  EXPECT_EQ(match(grammar, ""), Match::Prefix);
}

TEST(GrammarBuilder, JsonObjectAndErrors) {
  GrammarBuilder b;
  const GrammarPtr grammar =
      std::move(b).build(b.sequence({b.literal("x="), b.json_object(), b.literal(";")}));
  EXPECT_EQ(match(grammar, R"(x={"a":[1]};)"), Match::Complete);
  EXPECT_EQ(match(grammar, "x=[];"), Match::Rejected);

  GrammarBuilder other;
  EXPECT_THROW(other.sequence({42}), GrammarError);
  EXPECT_THROW(other.choice({}), GrammarError);
  try {
    other.json_schema(nlohmann::json::parse(R"({"type": "string", "format": "date"})"));
    ADD_FAILURE() << "compiled";
  } catch (const GrammarError& e) {
    EXPECT_EQ(e.keyword(), "format");
  }
}

// Threads share one grammar (and its caches); each walks its own matchers, and every mask must
// equal the one a single-threaded matcher computes for the same text.
TEST(GrammarMatcher, OneGrammarOnManyThreads) {
  const GrammarPtr grammar = tool_calls();
  const auto vocabulary = testing::brown_tiny_vocabulary();
  const std::string text =
      R"(<tool_call>{"name": "get_weather", "arguments": {"city": "Zürich, \"CH\""}}</tool_call>)";
  const std::vector<int32_t> ids = mlaserve::testing::brown_tiny_tokenizer().encode(text, false);
  std::vector<std::vector<uint64_t>> expected;
  {
    GrammarMatcher matcher(tool_calls(), vocabulary);
    for (const int32_t id : ids) {
      expected.emplace_back(static_cast<size_t>(vocabulary->mask_words()));
      matcher.fill_mask(expected.back());
      ASSERT_TRUE(matcher.accept_token(id));
    }
  }
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      std::vector<uint64_t> mask(static_cast<size_t>(vocabulary->mask_words()));
      for (int round = 0; round < 10; ++round) {
        GrammarMatcher matcher(grammar, vocabulary);
        for (size_t i = 0; i < ids.size(); ++i) {
          matcher.fill_mask(mask);
          if (mask != expected[i] || !matcher.accept_token(ids[i])) ++mismatches;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace mlaserve::grammar
