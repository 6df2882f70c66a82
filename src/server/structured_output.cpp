#include "server/structured_output.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "server/api_error.h"
#include "server/json_fields.h"

namespace mlaserve::server {

namespace {

// A request's position in its grammar, as the engine sees it. The engine's mask may be wider
// than the tokenizer's vocabulary (models pad their vocabulary): the extra ids stay disallowed.
class GrammarConstraint final : public sched::TokenConstraint {
 public:
  GrammarConstraint(grammar::GrammarPtr grammar,
                    std::shared_ptr<const grammar::TokenVocabulary> vocabulary)
      : matcher_(std::move(grammar), vocabulary),
        words_(static_cast<size_t>(vocabulary->mask_words())) {}

  void fill_allowed(std::span<uint64_t> allowed) override {
    if (allowed.size() >= words_) {
      matcher_.fill_mask(allowed.first(words_));  // sets or clears every bit of its words
      std::fill(allowed.begin() + static_cast<std::ptrdiff_t>(words_), allowed.end(), 0);
      return;
    }
    scratch_.resize(words_);
    matcher_.fill_mask(scratch_);
    std::copy_n(scratch_.begin(), allowed.size(), allowed.begin());
  }
  bool can_end() const override { return matcher_.can_end(); }
  bool must_end() const override { return matcher_.must_end(); }
  // End-of-sequence tokens have no bytes in the grammar; the matcher refuses and stays put.
  void accept(int32_t token) override { (void)matcher_.accept_token(token); }

 private:
  grammar::GrammarMatcher matcher_;
  size_t words_;
  std::vector<uint64_t> scratch_;
};

// The field `key` of `object` (400 if it is not an object), or nullptr when absent.
const nlohmann::json* object_field(const nlohmann::json& object, const char* key,
                                   const std::string& param) {
  const nlohmann::json* value = field(object, key);
  if (value && !value->is_object()) {
    throw invalid_request(fmt::format("'{}' must be an object", param), param);
  }
  return value;
}

}  // namespace

// Bytes 0xF8-0xFF never occur in UTF-8, and every grammar's text is UTF-8.
constexpr unsigned kFirstMarkerByte = 0xF8;

CompiledGrammars::CompiledGrammars(const tokenizer::Tokenizer& tokenizer,
                                   std::span<const std::string_view> marker_tokens)
    : tokenizer_(tokenizer), marker_tokens_(marker_tokens.begin(), marker_tokens.end()) {
  if (marker_tokens_.size() > 0x100 - kFirstMarkerByte) fail("too many marker tokens");
}

std::string CompiledGrammars::token_literal(std::string_view marker) const {
  const auto it = std::find(marker_tokens_.begin(), marker_tokens_.end(), marker);
  if (it == marker_tokens_.end()) fail("internal: '{}' is not a marker token", marker);
  return std::string(1, static_cast<char>(kFirstMarkerByte + (it - marker_tokens_.begin())));
}

grammar::GrammarPtr CompiledGrammars::get(const std::string& key,
                                          const std::function<grammar::GrammarPtr()>& compile,
                                          const std::string& param) {
  {
    std::lock_guard lock(mutex_);
    if (auto it = entries_.find(key); it != entries_.end()) {
      recent_.splice(recent_.begin(), recent_, it->second.position);
      return it->second.grammar;
    }
  }
  grammar::GrammarPtr compiled;
  try {
    compiled = compile();  // outside the lock: a big schema must not stall other requests
  } catch (const grammar::GrammarError& error) {
    throw invalid_request(error.what(), param);
  }
  std::lock_guard lock(mutex_);
  if (entries_.count(key) == 0) {
    recent_.push_front(key);
    entries_[key] = {compiled, recent_.begin()};
    if (entries_.size() > kCapacity) {
      entries_.erase(recent_.back());
      recent_.pop_back();
    }
  }
  return compiled;
}

std::shared_ptr<const grammar::TokenVocabulary> CompiledGrammars::vocabulary() {
  std::lock_guard lock(mutex_);
  if (!vocabulary_) {
    const int32_t size = tokenizer_.vocab_size();
    std::vector<std::string> bytes(static_cast<size_t>(size));
    std::vector<bool> excluded(static_cast<size_t>(size));
    for (int32_t id = 0; id < size; ++id) {
      const std::string_view text = tokenizer_.id_to_bytes(id);
      const auto marker = std::find(marker_tokens_.begin(), marker_tokens_.end(), text);
      // A marker token is its marker byte; a token holding such a byte stands for no text.
      bytes[static_cast<size_t>(id)] =
          marker != marker_tokens_.end() ? token_literal(*marker) : std::string(text);
      excluded[static_cast<size_t>(id)] =
          tokenizer_.is_special(id) || id == tokenizer_.eos_id() || id == tokenizer_.bos_id() ||
          (marker == marker_tokens_.end() && std::any_of(text.begin(), text.end(), [](char c) {
             return static_cast<unsigned char>(c) >= kFirstMarkerByte;
           }));
    }
    vocabulary_ = std::make_shared<const grammar::TokenVocabulary>(std::move(bytes), excluded);
  }
  return vocabulary_;
}

ConstraintFactory CompiledGrammars::constraints(grammar::GrammarPtr grammar) {
  return [grammar = std::move(grammar), vocabulary = vocabulary()] {
    return std::make_shared<GrammarConstraint>(grammar, vocabulary);
  };
}

const nlohmann::ordered_json& OrderedBody::at(const std::string& pointer) const {
  if (!parsed_) parsed_ = nlohmann::ordered_json::parse(text_);
  return parsed_->at(nlohmann::ordered_json::json_pointer(pointer));
}

std::optional<OutputFormat> response_format(const nlohmann::json& body,
                                            const OrderedBody& ordered) {
  const nlohmann::json* format = object_field(body, "response_format", "response_format");
  if (!format) return std::nullopt;
  const std::optional<std::string> type = read_string(*format, "type");
  if (!type) throw invalid_request("'response_format.type' is required", "response_format.type");
  if (*type == "text") return std::nullopt;
  if (*type == "json_object") return OutputFormat{};
  if (*type != "json_schema") {
    throw invalid_request(fmt::format("'response_format.type' must be 'text', 'json_object' or "
                                      "'json_schema', got '{}'",
                                      *type),
                          "response_format.type");
  }
  const nlohmann::json* spec = object_field(*format, "json_schema", "response_format.json_schema");
  if (!spec || !field(*spec, "schema")) {
    throw invalid_request("response_format of type 'json_schema' needs 'json_schema.schema'",
                          "response_format.json_schema.schema");
  }
  return OutputFormat{ordered.at("/response_format/json_schema/schema")};
}

grammar::GrammarBuilder::Rule add_output_format(const OutputFormat& format,
                                                grammar::GrammarBuilder& builder) {
  return format.schema.is_null() ? builder.json_object() : builder.json_schema(format.schema);
}

std::string output_format_key(const OutputFormat& format) {
  return format.schema.is_null() ? "json_object" : "json_schema:" + format.schema.dump();
}

grammar::GrammarPtr output_format_grammar(const std::optional<OutputFormat>& format,
                                          CompiledGrammars& grammars, const std::string& param) {
  if (!format) return nullptr;
  return grammars.get(
      output_format_key(*format),
      [&] {
        grammar::GrammarBuilder builder;
        const grammar::GrammarBuilder::Rule root = add_output_format(*format, builder);
        return std::move(builder).build(root);
      },
      param);
}

grammar::GrammarPtr native_grammar(const nlohmann::json& params, CompiledGrammars& grammars) {
  const std::optional<std::string> schema_text = read_string(params, "json_schema");
  const std::optional<std::string> regex = read_string(params, "regex");
  if (schema_text && regex) {
    throw invalid_request("give at most one of 'json_schema' and 'regex'", "regex");
  }
  if (regex) {
    return grammars.get(
        "regex:" + *regex, [&] { return grammar::regex_grammar(*regex); }, "regex");
  }
  if (!schema_text) return nullptr;
  const nlohmann::ordered_json schema =
      parse_ordered_json_text(*schema_text, "'json_schema'", "json_schema");
  return grammars.get(
      "json_schema:" + schema.dump(), [&] { return grammar::json_schema_grammar(schema); },
      "json_schema");
}

}  // namespace mlaserve::server
