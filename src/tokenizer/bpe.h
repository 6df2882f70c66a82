// The byte-level BPE model (tokenizer.json "model" of type BPE): turns one pre-tokenized piece of
// raw bytes into vocabulary ids by applying the merge rules in rank order.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/merge_table.h"
#include "tokenizer/tiktoken_model.h"
#include "tokenizer/token_id_map.h"
#include "tokenizer/tokenizer_json.h"
#include "tokenizer/word_cache.h"

namespace mlaserve::tokenizer {

class BpeModel {
 public:
  // `options` is tokenizer.json's "model" without its vocab and merges. Errors name what is
  // unsupported (another model type, dropout, subword prefixes/suffixes, byte fallback) or
  // inconsistent (a merge of unknown tokens).
  BpeModel(const nlohmann::json& options, const std::vector<std::pair<std::string, int32_t>>& vocab,
           const std::vector<BpeMerge>& merges);
  // tiktoken's ranks: a token's id is its rank; two adjacent tokens merge into the token their
  // bytes make, lowest rank first (tiktoken's byte-pair merge, which is BPE with a merge rule
  // for every split of a token into two tokens, ranked by the token); a piece that is itself a
  // token is that token. Every single byte must be a token.
  explicit BpeModel(const std::vector<RankedToken>& ranks);

  // Appends the ids of `piece` (raw bytes, one pre-tokenized word) to `ids`. Thread-safe.
  void encode(std::string_view piece, std::vector<int32_t>& ids) const;

  // Token strings are spelled in the byte-level alphabet (e.g. "Ġthe"), tiktoken's too (as
  // Kimi's tokenizer spells them for convert_ids_to_tokens).
  const TokenIdMap& vocabulary() const { return vocabulary_; }

 private:
  void read_merges(const std::vector<BpeMerge>& merges);
  void derive_merges(const std::vector<RankedToken>& ranks);
  void find_byte_ids();
  void apply_merges(std::string_view piece, std::vector<int32_t>& ids) const;
  void append_initial_symbols(std::string_view piece, std::vector<int32_t>& symbols) const;

  TokenIdMap vocabulary_;
  MergeTable merges_{0};
  std::array<int32_t, 256> byte_ids_{};  // id of each byte's one-character token, -1 if none
  std::optional<int32_t> unk_id_;        // stands for bytes without a token, if set
  bool fuse_unk_ = false;                // consecutive unknown bytes give one unk id
  bool ignore_merges_ = false;           // a piece that is itself in the vocabulary is one token
  std::unique_ptr<WordCache> cache_ = std::make_unique<WordCache>();
};

}  // namespace mlaserve::tokenizer
