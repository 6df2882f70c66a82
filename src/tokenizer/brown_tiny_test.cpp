// The brown-tiny tokenizer (tests/data/brown-tiny-tokenizer): a small byte-level BPE with
// DeepSeek-V3's structure, checked against its README's id layout and chat rendering and
// against the ids that its Python trainer produced (reference_tokens.json).
#include <gtest/gtest.h>

#include <set>

#include "tokenizer/tokenizer_test_util.h"

namespace mlaserve::tokenizer {
namespace {

using testing::brown_tiny_tokenizer;

const nlohmann::json& reference() {
  static const nlohmann::json file =
      testing::read_json(std::string(testing::kBrownTinyTokenizerDir) + "/reference_tokens.json");
  return file;
}

TEST(BrownTiny, IdLayoutMatchesTheReadme) {
  const Tokenizer& tok = brown_tiny_tokenizer();
  EXPECT_EQ(tok.vocab_size(), 4114);
  EXPECT_EQ(tok.bos_id(), 0);
  EXPECT_EQ(tok.eos_id(), 1);
  EXPECT_EQ(tok.token_to_id("<｜▁pad▁｜>"), 2);
  EXPECT_EQ(tok.token_to_id("<｜fim▁hole｜>"), 4099);
  EXPECT_EQ(tok.token_to_id("<｜User｜>"), 4102);
  EXPECT_EQ(tok.token_to_id("<｜Assistant｜>"), 4103);
  EXPECT_EQ(tok.token_to_id("<|EOT|>"), 4104);
  EXPECT_EQ(tok.token_to_id("<｜tool▁sep｜>"), 4113);
  EXPECT_EQ(tok.token_to_id("<｜place▁holder▁no▁0｜>"), std::nullopt);
  EXPECT_TRUE(tok.is_special(0));
  EXPECT_TRUE(tok.is_special(4104));
  EXPECT_FALSE(tok.is_special(4102));
}

TEST(BrownTiny, Ids3To258AreTheBytesInGpt2Order) {
  const Tokenizer& tok = brown_tiny_tokenizer();
  EXPECT_EQ(tok.id_to_token(3), "!");    // the first printable byte comes first
  EXPECT_EQ(tok.id_to_token(258), "Ń");  // byte 0xAD, the last unprintable one, maps to U+0143
  std::set<std::string> bytes;
  for (int32_t id = 3; id <= 258; ++id) {
    ASSERT_EQ(tok.id_to_bytes(id).size(), 1u) << "id " << id;
    bytes.insert(std::string(tok.id_to_bytes(id)));
  }
  EXPECT_EQ(bytes.size(), 256u);
}

TEST(BrownTiny, RendersTheReadmeConversation) {
  const nlohmann::json messages = nlohmann::json::parse(R"([
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello."},
    {"role": "user", "content": "Tell me a story."}])");
  EXPECT_EQ(brown_tiny_tokenizer().apply_chat_template(messages, true),
            "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜>Hello.<｜end▁of▁sentence｜>"
            "<｜User｜>Tell me a story.<｜Assistant｜>");
}

TEST(BrownTiny, EncodesReferencePromptsWithBos) {
  for (const nlohmann::json& prompt : reference().at("prompts")) {
    const auto text = prompt.at("prompt").get<std::string>();
    EXPECT_EQ(brown_tiny_tokenizer().encode(text, true),
              prompt.at("ids").get<std::vector<int32_t>>())
        << text;
  }
}

TEST(BrownTiny, DecodesReferenceContinuations) {
  for (const nlohmann::json& prompt : reference().at("prompts")) {
    const auto ids = prompt.at("greedy_ids").get<std::vector<int32_t>>();
    const auto text = prompt.at("greedy_text").get<std::string>();
    EXPECT_EQ(brown_tiny_tokenizer().decode(ids, false), text);
    EXPECT_EQ(testing::decode_streaming(brown_tiny_tokenizer(), ids, false), text);
  }
}

// The held-out tokens are whole documents, each followed by EOS (the last one is cut short).
// Each whole document must decode to text that encodes back to exactly its ids.
TEST(BrownTiny, HeldOutDocumentsRoundTrip) {
  const auto tokens = reference().at("heldout_tokens").get<std::vector<int32_t>>();
  const int32_t eos = brown_tiny_tokenizer().eos_id().value();
  size_t begin = 0;
  int whole_documents = 0;
  for (size_t end = 0; end < tokens.size(); ++end) {
    if (tokens[end] != eos) continue;
    const std::span<const int32_t> document(tokens.data() + begin, end - begin);
    const std::string text = brown_tiny_tokenizer().decode(document, false);
    const std::vector<int32_t> encoded = brown_tiny_tokenizer().encode(text, false);
    EXPECT_TRUE(std::equal(encoded.begin(), encoded.end(), document.begin(), document.end()))
        << "document " << whole_documents << " (" << document.size() << " tokens)";
    begin = end + 1;
    ++whole_documents;
  }
  EXPECT_EQ(whole_documents, 5);
  EXPECT_EQ(testing::decode_streaming(brown_tiny_tokenizer(), tokens, true),
            brown_tiny_tokenizer().decode(tokens, true));
}

TEST(BrownTiny, RoundTripsAssortedText) {
  for (const std::string text :
       {"The jury said that", "  two  spaces\n\nand lines\r\n", "numbers 1234567 and ①②",
        "Ünïcödé 日本語 😀 \xEF\xBB\xBF", "<｜User｜>Hi<｜Assistant｜>", "tabs\tand\x01control"}) {
    const std::vector<int32_t> ids = brown_tiny_tokenizer().encode(text, false);
    EXPECT_EQ(brown_tiny_tokenizer().decode(ids, false), text);
    EXPECT_EQ(testing::decode_streaming(brown_tiny_tokenizer(), ids, false), text);
  }
}

}  // namespace
}  // namespace mlaserve::tokenizer
