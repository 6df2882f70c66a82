#include "bench_serving/vocabulary.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace mlaserve::bench_serving {

namespace {

using nlohmann::json;

// Collects the ids in model.vocab and in added_tokens[].id, ignoring the rest of the file.
class TokenIdCollector : public nlohmann::json_sax<json> {
 public:
  std::vector<int64_t> vocab_ids;
  std::set<int64_t> added_ids;

  bool number_integer(number_integer_t value) override { return take(value); }
  bool number_unsigned(number_unsigned_t value) override {
    return take(static_cast<int64_t>(value));
  }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return open(); }
  bool start_array(std::size_t) override { return open(); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& name) override {
    key_ = name;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    fail("tokenizer.json: {}", e.what());
  }

 private:
  // Each open container is named by the key it is the value of ("" inside arrays).
  bool open() {
    path_.push_back(key_);
    key_.clear();
    return true;
  }
  bool close() {
    path_.pop_back();
    key_.clear();
    return true;
  }
  bool at(std::initializer_list<std::string_view> path) const {
    return std::equal(path_.begin(), path_.end(), path.begin(), path.end());
  }
  bool take(int64_t value) {
    if (at({"", "model", "vocab"})) vocab_ids.push_back(value);
    if (at({"", "added_tokens", ""}) && key_ == "id") added_ids.insert(value);
    return true;
  }
  std::vector<std::string> path_;
  std::string key_;
};

bool decodes_to_whole_characters(const tokenizer::Tokenizer& tokenizer, int32_t id) {
  const std::string_view bytes = tokenizer.id_to_bytes(id);
  return !bytes.empty() && !tokenizer::utf8::first_invalid_offset(bytes).has_value();
}

}  // namespace

std::vector<int32_t> prompt_token_ids(const std::filesystem::path& dir,
                                      const tokenizer::Tokenizer& tokenizer) {
  const std::filesystem::path path = dir / "tokenizer.json";
  std::ifstream file(path, std::ios::binary);
  if (!file) fail("cannot open {}", path.string());
  TokenIdCollector collector;
  json::sax_parse(file, &collector);
  std::vector<int32_t> ids;
  for (const int64_t id : collector.vocab_ids) {
    if (id < 0 || id >= tokenizer.vocab_size() || collector.added_ids.contains(id)) continue;
    if (decodes_to_whole_characters(tokenizer, static_cast<int32_t>(id))) {
      ids.push_back(static_cast<int32_t>(id));
    }
  }
  std::sort(ids.begin(), ids.end());
  if (ids.empty()) fail("{}: no vocabulary tokens to build prompts from", path.string());
  return ids;
}

}  // namespace mlaserve::bench_serving
