// Structured output: the grammars a request's output must match (OpenAI's response_format,
// SGLang's json_schema and regex sampling params, forced tool calls), compiled once per distinct
// spec and shared by the requests that use it, and the engine constraint that walks one.
#pragma once

#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "sched/generation.h"
#include "tokenizer/tokenizer.h"

namespace mlaserve::server {

// Makes one request's constraint (a fresh position in a shared grammar) per engine request.
using ConstraintFactory = std::function<std::shared_ptr<sched::TokenConstraint>()>;

// The grammars compiled for requests, by spec. Thread-safe: handler threads compile and look up
// grammars at once.
class CompiledGrammars {
 public:
  // `marker_tokens`: texts that are tokens of their own and that grammars write as that token
  // only (token_literal).
  CompiledGrammars(const tokenizer::Tokenizer& tokenizer,
                   std::span<const std::string_view> marker_tokens);

  // The grammar for `key` (a canonical text of the spec), compiled by `compile` on first use. A
  // grammar::GrammarError becomes a 400 that names `param`.
  grammar::GrammarPtr get(const std::string& key,
                          const std::function<grammar::GrammarPtr()>& compile,
                          const std::string& param);
  // Constraints that walk `grammar` over this tokenizer's vocabulary.
  ConstraintFactory constraints(grammar::GrammarPtr grammar);
  // What a grammar literal says for a marker token: a byte that never occurs in UTF-8 (0xF8 and
  // up), which the vocabulary gives to the marker's token and to no other, so the constrained
  // output writes the marker as its one token rather than spelled out in pieces. (The output's
  // text is the token's own, so the parser sees the real marker.)
  std::string token_literal(std::string_view marker) const;

 private:
  // Built on first use: every token's bytes (special tokens, hidden from the text, excluded).
  std::shared_ptr<const grammar::TokenVocabulary> vocabulary();

  // Distinct specs kept; a request whose spec was evicted compiles it again.
  static constexpr size_t kCapacity = 64;

  const tokenizer::Tokenizer& tokenizer_;
  std::vector<std::string_view> marker_tokens_;  // marker i is byte 0xF8 + i
  std::mutex mutex_;
  std::shared_ptr<const grammar::TokenVocabulary> vocabulary_;
  std::list<std::string> recent_;  // most recently used first
  struct Entry {
    grammar::GrammarPtr grammar;
    std::list<std::string>::iterator position;
  };
  std::unordered_map<std::string, Entry> entries_;
};

// The request body once more, with object keys in the order the client wrote them (the server's
// nlohmann::json keeps them sorted): a schema's properties are generated in that order. Parsed on
// first use, after the sorted parse has validated the body.
class OrderedBody {
 public:
  explicit OrderedBody(const std::string& text) : text_(text) {}
  // The value at a JSON pointer that the sorted body has shown to exist.
  const nlohmann::ordered_json& at(const std::string& pointer) const;

 private:
  const std::string& text_;
  mutable std::optional<nlohmann::ordered_json> parsed_;
};

// A structured-output format: any JSON object, or JSON valid for a schema (OpenAI chat's
// response_format, the Responses API's text.format).
struct OutputFormat {
  nlohmann::ordered_json schema;  // in the client's key order; null: any JSON object
};

// OpenAI's "response_format" ({"type": "text" | "json_object" | "json_schema", "json_schema":
// {"name", "schema", "strict"}}) of a body: nullopt for text or when absent; 400 if malformed.
std::optional<OutputFormat> response_format(const nlohmann::json& body, const OrderedBody& ordered);
// Adds `format` to `builder`.
grammar::GrammarBuilder::Rule add_output_format(const OutputFormat& format,
                                                grammar::GrammarBuilder& builder);
// The canonical text of a format, for grammar keys: the schema alone decides the grammar.
std::string output_format_key(const OutputFormat& format);
// The grammar of `format`, or null without one; grammar errors name `param`.
grammar::GrammarPtr output_format_grammar(const std::optional<OutputFormat>& format,
                                          CompiledGrammars& grammars, const std::string& param);
// /generate's sampling_params "json_schema" (the schema as a JSON string, as SGLang takes it) or
// "regex": the grammar, or null when neither is given.
grammar::GrammarPtr native_grammar(const nlohmann::json& params, CompiledGrammars& grammars);

}  // namespace mlaserve::server
