// Malformed or unsupported tokenizer files, and misuse, are clear mlaserve::Errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tokenizer/tiny_tokenizer_test_util.h"

namespace mlaserve::tokenizer {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::tiny_tokenizer_json;
using testing::TinyTokenizerDir;

TEST(TokenizerErrors, TinyTokenizerLoads) {
  const TinyTokenizerDir dir;
  const Tokenizer tok = dir.load(tiny_tokenizer_json());
  EXPECT_EQ(tok.encode("abc<s>", false), (std::vector<int32_t>{256, 'c', 257}));
  EXPECT_EQ(tok.vocab_size(), 258);
}

TEST(TokenizerErrors, MissingTokenizerJson) {
  const TinyTokenizerDir dir;
  EXPECT_THAT(
      [&] {
        try {
          Tokenizer::load(dir.path());
        } catch (const Error& e) {
          return std::string(e.what());
        }
        return std::string();
      }(),
      HasSubstr("has no tokenizer.json"));
}

TEST(TokenizerErrors, MalformedJson) {
  const TinyTokenizerDir dir;
  dir.write("tokenizer.json", "{\"model\": [1, 2");
  try {
    Tokenizer::load(dir.path());
    FAIL() << "loaded a truncated tokenizer.json";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("tokenizer.json: not valid JSON"));
  }
}

// A number beyond double (1e400) is the JSON library's out_of_range, not its parse_error: it
// must still be an Error naming the file (found by safetensors_fuzz in the loader's twin).
TEST(TokenizerErrors, NumberBeyondDoubleIsMalformedJson) {
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
    const TinyTokenizerDir dir;
    dir.write("tokenizer.json", tiny_tokenizer_json().dump());
    dir.write(file, "{\"x\": 1e400}");
    try {
      Tokenizer::load(dir.path());
      FAIL() << "loaded " << file << " with 1e400";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(file));
    }
  }
}

TEST(TokenizerErrors, MissingModel) {
  json tokenizer = tiny_tokenizer_json();
  tokenizer.erase("model");
  EXPECT_THAT(TinyTokenizerDir().load_error(tokenizer), HasSubstr("has no model.vocab"));
  tokenizer = tiny_tokenizer_json();
  tokenizer["model"].erase("type");
  tokenizer["post_processor"] = {{"type", "TemplateProcessing"}};  // lacks "single"
  EXPECT_THAT(TinyTokenizerDir().load_error(tokenizer), HasSubstr("malformed"));
}

TEST(TokenizerErrors, MalformedVocabOrMerges) {
  json tokenizer = tiny_tokenizer_json();
  tokenizer["model"]["vocab"]["x"] = "seven";
  EXPECT_THAT(TinyTokenizerDir().load_error(tokenizer),
              HasSubstr("model.vocab: the id of token 'x' must be an integer"));
  tokenizer["model"]["vocab"]["x"] = -3;
  EXPECT_THAT(TinyTokenizerDir().load_error(tokenizer),
              HasSubstr("token 'x' has id -3, out of range"));
  tokenizer = tiny_tokenizer_json();
  tokenizer["model"]["merges"] = json::array({json::array({"a", "b", "c"})});
  EXPECT_THAT(TinyTokenizerDir().load_error(tokenizer), HasSubstr("BPE merge with 3 parts"));
  tokenizer["model"]["merges"] = json::array({7});
  EXPECT_THAT(TinyTokenizerDir().load_error(tokenizer),
              HasSubstr("a merge must be a string or a pair of strings"));
}

TEST(TokenizerErrors, UnknownPreTokenizerType) {
  json tokenizer = tiny_tokenizer_json();
  tokenizer["pre_tokenizer"] = {
      {"type", "Sequence"}, {"pretokenizers", {{{"type", "Whitespace"}}, {{"type", "ByteLevel"}}}}};
  EXPECT_THAT(TinyTokenizerDir().load_error(tokenizer),
              HasSubstr("pre_tokenizer type 'Whitespace' is not supported"));
}

TEST(TokenizerErrors, PreTokenizerWithoutByteLevel) {
  json tokenizer = tiny_tokenizer_json();
  tokenizer["pre_tokenizer"] = {{"type", "Split"},
                                {"pattern", {{"Regex", "a"}}},
                                {"behavior", "Isolated"},
                                {"invert", false}};
  EXPECT_THAT(TinyTokenizerDir().load_error(tokenizer),
              HasSubstr("must end with a ByteLevel step"));
}

TEST(TokenizerErrors, BadSplitRegexAndBehavior) {
  json tokenizer = tiny_tokenizer_json();
  json split = {{"type", "Split"}, {"pattern", {{"Regex", "(a"}}}, {"behavior", "Isolated"}};
  tokenizer["pre_tokenizer"] = {{"type", "Sequence"},
                                {"pretokenizers", {split, {{"type", "ByteLevel"}}}}};
  EXPECT_THAT(TinyTokenizerDir().load_error(tokenizer), HasSubstr("regex '(a' does not compile"));
  split["pattern"] = {{"Regex", "a"}};
  split["behavior"] = "Sideways";
  tokenizer["pre_tokenizer"]["pretokenizers"][0] = split;
  EXPECT_THAT(TinyTokenizerDir().load_error(tokenizer), HasSubstr("unknown behavior 'Sideways'"));
}

TEST(TokenizerErrors, UnsupportedNormalizer) {
  json tokenizer = tiny_tokenizer_json();
  tokenizer["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}}}};
  EXPECT_THAT(TinyTokenizerDir().load_error(tokenizer),
              HasSubstr("normalizer type 'NFC' is not supported"));
}

TEST(TokenizerErrors, UnsupportedModelAndDecoder) {
  json tokenizer = tiny_tokenizer_json();
  tokenizer["model"]["type"] = "WordPiece";
  EXPECT_THAT(TinyTokenizerDir().load_error(tokenizer),
              HasSubstr("model type 'WordPiece' is not supported"));
  tokenizer = tiny_tokenizer_json();
  tokenizer["decoder"] = {{"type", "Metaspace"}};
  EXPECT_THAT(TinyTokenizerDir().load_error(tokenizer),
              HasSubstr("decoder type 'Metaspace' is not supported"));
  tokenizer = tiny_tokenizer_json();
  tokenizer["model"]["dropout"] = 0.1;
  EXPECT_THAT(TinyTokenizerDir().load_error(tokenizer), HasSubstr("dropout"));
}

TEST(TokenizerErrors, MergeOfUnknownToken) {
  json tokenizer = tiny_tokenizer_json();
  tokenizer["model"]["merges"] = {"a zz"};
  EXPECT_THAT(TinyTokenizerDir().load_error(tokenizer),
              HasSubstr("uses 'zz', which is not in the vocabulary"));
  tokenizer["model"]["merges"] = {"abc"};
  EXPECT_THAT(TinyTokenizerDir().load_error(tokenizer), HasSubstr("neither \"left right\""));
}

TEST(TokenizerErrors, ConfigAddsBosThatDoesNotExist) {
  EXPECT_THAT(TinyTokenizerDir().load_error(tiny_tokenizer_json(), {{"add_bos_token", true}}),
              HasSubstr("sets add_bos_token but has no bos_token"));
  EXPECT_THAT(TinyTokenizerDir().load_error(tiny_tokenizer_json(),
                                            {{"add_bos_token", true}, {"bos_token", "<nope>"}}),
              HasSubstr("token '<nope>' is not in the vocabulary"));
}

TEST(TokenizerErrors, InvalidUtf8TextAndUnknownIds) {
  const TinyTokenizerDir dir;
  const Tokenizer tok = dir.load(tiny_tokenizer_json());
  EXPECT_THROW(tok.encode("ok \xC3(", false), Error);
  const std::vector<int32_t> out_of_range = {1, 258};
  EXPECT_THROW(tok.decode(out_of_range, false), Error);
  EXPECT_THROW(tok.id_to_token(-1), Error);
  IncrementalDecoder decoder(tok, false);
  EXPECT_THROW(decoder.push(999), Error);
}

TEST(TokenizerErrors, ChatTemplateMissingOrUnsupported) {
  const TinyTokenizerDir dir;
  const Tokenizer without = dir.load(tiny_tokenizer_json());
  EXPECT_FALSE(without.has_chat_template());
  EXPECT_THROW(without.apply_chat_template(json::array(), true), Error);
  // A template outside the subset does not stop encoding; using it names the construct.
  const Tokenizer unsupported =
      dir.load(tiny_tokenizer_json(), {{"chat_template", "{% call m() %}{% endcall %}"}});
  EXPECT_EQ(unsupported.encode("ab", false), std::vector<int32_t>{256});
  EXPECT_TRUE(unsupported.has_chat_template());
  try {
    unsupported.apply_chat_template(json::array(), true);
    FAIL() << "rendered an unsupported template";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("unsupported statement '{% call %}'"));
  }
}

// Not an error case, but it needs a template of its own: a request's tools reach the template as
// the variable `tools`, and the template's text is there to inspect.
TEST(TokenizerChat, ToolsReachTheTemplate) {
  const TinyTokenizerDir dir;
  const std::string source =
      "{% for tool in tools %}[{{ tool['function']['name'] }}]{% endfor %}"
      "{{ messages[0]['content'] }}";
  const Tokenizer tok = dir.load(tiny_tokenizer_json(), {{"chat_template", source}});
  const json messages = json::array({{{"role", "user"}, {"content", "hi"}}});
  const json tools = json::array({{{"type", "function"}, {"function", {{"name", "a"}}}},
                                  {{"type", "function"}, {"function", {{"name", "b"}}}}});
  EXPECT_EQ(tok.apply_chat_template(messages, false, &tools), "[a][b]hi");
  EXPECT_EQ(tok.chat_template_source(), source);
  EXPECT_EQ(dir.load(tiny_tokenizer_json()).chat_template_source(), "");
}

}  // namespace
}  // namespace mlaserve::tokenizer
