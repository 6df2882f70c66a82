#include "tokenizer/tokenizer_json.h"

#include "core/error.h"

namespace mlaserve::tokenizer {
namespace {

using nlohmann::json;

BpeMerge split_merge_string(std::string& merge) {
  const size_t space = merge.find(' ');
  if (space == std::string::npos || merge.find(' ', space + 1) != std::string::npos) {
    fail("BPE merge \"{}\" is neither \"left right\" nor [\"left\", \"right\"]", merge);
  }
  return {merge.substr(0, space), merge.substr(space + 1)};
}

// SAX events -> a JSON document, except inside model.vocab and model.merges.
class Reader : public nlohmann::json_sax<json> {
 public:
  explicit Reader(TokenizerJson& out) : out_(out) {}

  bool null() override { return value(nullptr); }
  bool boolean(bool v) override { return value(v); }
  bool number_integer(number_integer_t v) override {
    return mode_ == Mode::kVocab ? vocab_id(v) : value(v);
  }
  bool number_unsigned(number_unsigned_t v) override {
    return mode_ == Mode::kVocab ? vocab_id(static_cast<int64_t>(std::min<uint64_t>(v, INT64_MAX)))
                                 : value(v);
  }
  bool number_float(number_float_t v, const string_t&) override { return value(v); }
  bool binary(binary_t& v) override { return value(std::move(v)); }

  bool string(string_t& v) override {
    if (mode_ == Mode::kMerges) {
      out_.merges->push_back(split_merge_string(v));
    } else if (mode_ == Mode::kMergePair) {
      pair_.push_back(std::move(v));
    } else {
      return value(std::move(v));
    }
    return true;
  }

  bool key(string_t& v) override {
    key_ = std::move(v);
    return true;
  }

  bool start_object(std::size_t) override {
    if (mode_ == Mode::kDocument && in_model() && key_ == "vocab") {
      mode_ = Mode::kVocab;
      out_.vocab.emplace();
      return true;
    }
    return open(json::object());
  }

  bool start_array(std::size_t) override {
    if (mode_ == Mode::kDocument && in_model() && key_ == "merges") {
      mode_ = Mode::kMerges;
      out_.merges.emplace();
      return true;
    }
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kMergePair;
      pair_.clear();
      return true;
    }
    return open(json::array());
  }

  bool end_object() override {
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kDocument;
      return true;
    }
    return close();
  }

  bool end_array() override {
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kDocument;
      return true;
    }
    if (mode_ == Mode::kMergePair) {
      if (pair_.size() != 2)
        fail("BPE merge with {} parts, expected [\"left\", \"right\"]", pair_.size());
      out_.merges->push_back({std::move(pair_[0]), std::move(pair_[1])});
      mode_ = Mode::kMerges;
      return true;
    }
    return close();
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    fail("not valid JSON: {}", e.what());
  }

 private:
  enum class Mode { kDocument, kVocab, kMerges, kMergePair };

  // The innermost open container is the top-level "model" object.
  bool in_model() const { return open_.size() == 2 && keys_.back() == "model"; }

  bool vocab_id(int64_t id) {
    if (id < 0 || id > INT32_MAX) fail("model.vocab: token '{}' has id {}, out of range", key_, id);
    out_.vocab->emplace_back(std::move(key_), static_cast<int32_t>(id));
    return true;
  }

  // Places a value in the innermost open container (or as the document) and returns it.
  json& place(json item) {
    if (open_.empty()) return out_.document = std::move(item);
    json& parent = *open_.back();
    if (parent.is_object()) return parent[key_] = std::move(item);
    parent.push_back(std::move(item));
    return parent.back();
  }

  bool value(json item) {
    if (mode_ == Mode::kVocab) fail("model.vocab: the id of token '{}' must be an integer", key_);
    if (mode_ != Mode::kDocument)
      fail("model.merges: a merge must be a string or a pair of strings");
    place(std::move(item));
    return true;
  }

  bool open(json container) {
    if (mode_ != Mode::kDocument) return value(std::move(container));
    const bool in_object = !open_.empty() && open_.back()->is_object();
    std::string key_in_parent = in_object ? key_ : std::string();
    open_.push_back(&place(std::move(container)));
    keys_.push_back(std::move(key_in_parent));
    return true;
  }

  bool close() {
    open_.pop_back();
    keys_.pop_back();
    return true;
  }

  TokenizerJson& out_;
  Mode mode_ = Mode::kDocument;
  std::vector<json*> open_;        // containers being filled, innermost last
  std::vector<std::string> keys_;  // the key each open container sits under ("" in arrays)
  std::string key_;                // the last key read
  std::vector<std::string> pair_;  // a merge written as a pair, while it is read
};

}  // namespace

TokenizerJson parse_tokenizer_json(std::string_view text) {
  TokenizerJson out;
  Reader reader(out);
  json::sax_parse(text, &reader);
  return out;
}

}  // namespace mlaserve::tokenizer
