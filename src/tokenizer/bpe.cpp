#include "tokenizer/bpe.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/byte_level.h"

namespace mlaserve::tokenizer {
namespace {

using nlohmann::json;

void check_supported_options(const json& model) {
  const std::string type = model.value("type", "BPE");
  if (type != "BPE") fail("tokenizer model type '{}' is not supported (only BPE)", type);
  if (model.contains("dropout") && !model["dropout"].is_null()) {
    fail("BPE dropout is not supported (encoding would not be deterministic)");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && !model[key].is_null() && model[key] != "") {
      fail("BPE option '{}' is not supported in byte-level BPE", key);
    }
  }
  if (model.value("byte_fallback", false)) fail("BPE byte_fallback is not supported");
}

// A symbol of the word being merged; merged-away symbols keep id -1. Symbols form a doubly
// linked list so that a merge is O(1).
struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
};

// A possible merge of the symbol at `left` with its right neighbour, as it was when queued.
struct Candidate {
  int32_t rank;
  int32_t left;
  int32_t left_id;
  int32_t right_id;
  int32_t merged_id;
  // Heap order: lowest rank first, then leftmost.
  bool operator<(const Candidate& other) const {
    return rank != other.rank ? rank > other.rank : left > other.left;
  }
};

}  // namespace

BpeModel::BpeModel(const json& options, const std::vector<std::pair<std::string, int32_t>>& vocab,
                   const std::vector<BpeMerge>& merges) {
  check_supported_options(options);
  for (const auto& [token, id] : vocab) vocabulary_.insert(token, id);
  find_byte_ids();
  if (options.contains("unk_token") && !options["unk_token"].is_null()) {
    const std::string unk = options["unk_token"].get<std::string>();
    unk_id_ = vocabulary_.find(unk);
    if (!unk_id_) fail("BPE unk_token '{}' is not in the vocabulary", unk);
  }
  fuse_unk_ = options.value("fuse_unk", false);
  ignore_merges_ = options.value("ignore_merges", false);
  read_merges(merges);
}

BpeModel::BpeModel(const std::vector<RankedToken>& ranks) : ignore_merges_(true) {
  for (const RankedToken& token : ranks) {
    vocabulary_.insert(byte_level::bytes_to_symbols(token.bytes), token.rank);
  }
  find_byte_ids();
  for (unsigned byte = 0; byte < 256; ++byte) {
    if (byte_ids_[byte] < 0) fail("the ranks have no token for the byte 0x{:02X}", byte);
  }
  derive_merges(ranks);
}

void BpeModel::find_byte_ids() {
  for (unsigned byte = 0; byte < 256; ++byte) {
    const std::string symbol =
        byte_level::bytes_to_symbols(std::string(1, static_cast<char>(byte)));
    byte_ids_[byte] = vocabulary_.find(symbol).value_or(-1);
  }
}

void BpeModel::derive_merges(const std::vector<RankedToken>& ranks) {
  TokenIdMap rank_of_bytes;  // the raw bytes' ids, so that splits need no byte-level spelling
  size_t splits = 0;
  for (const RankedToken& token : ranks) {
    rank_of_bytes.insert(token.bytes, token.rank);
    splits += token.bytes.size();  // at least the splits (size - 1)
  }
  merges_ = MergeTable(splits);
  for (const RankedToken& token : ranks) {
    const std::string_view bytes = token.bytes;
    for (size_t cut = 1; cut < bytes.size(); ++cut) {
      const auto left = rank_of_bytes.find(bytes.substr(0, cut));
      const auto right = rank_of_bytes.find(bytes.substr(cut));
      if (left && right) merges_.insert(*left, *right, {token.rank, token.rank});
    }
  }
}

void BpeModel::read_merges(const std::vector<BpeMerge>& merges) {
  merges_ = MergeTable(merges.size());
  auto id_of = [&](std::string_view token, const BpeMerge& merge) {
    const std::optional<int32_t> id = vocabulary_.find(token);
    if (!id) {
      fail("BPE merge \"{} {}\" uses '{}', which is not in the vocabulary", merge.left, merge.right,
           token);
    }
    return *id;
  };
  std::string merged;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const BpeMerge& merge = merges[rank];
    const int32_t left_id = id_of(merge.left, merge);
    const int32_t right_id = id_of(merge.right, merge);
    merged.assign(merge.left).append(merge.right);
    merges_.insert(left_id, right_id, {static_cast<int32_t>(rank), id_of(merged, merge)});
  }
}

void BpeModel::encode(std::string_view piece, std::vector<int32_t>& ids) const {
  if (ignore_merges_) {
    if (const auto whole = vocabulary_.find(byte_level::bytes_to_symbols(piece))) {
      ids.push_back(*whole);
      return;
    }
  }
  if (cache_->lookup(piece, ids)) return;
  const size_t first = ids.size();
  apply_merges(piece, ids);
  cache_->store(piece, std::span<const int32_t>(ids).subspan(first));
}

void BpeModel::append_initial_symbols(std::string_view piece, std::vector<int32_t>& symbols) const {
  bool previous_unknown = false;
  for (const char byte : piece) {
    const int32_t id = byte_ids_[static_cast<uint8_t>(byte)];
    if (id >= 0) {
      symbols.push_back(id);
      previous_unknown = false;
    } else if (unk_id_ && !(fuse_unk_ && previous_unknown)) {
      symbols.push_back(*unk_id_);
      previous_unknown = true;
    }
    // Without an unk token, HF drops a symbol that is not in the vocabulary.
  }
}

void BpeModel::apply_merges(std::string_view piece, std::vector<int32_t>& ids) const {
  thread_local std::vector<int32_t> initial;
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> queue;
  initial.clear();
  append_initial_symbols(piece, initial);
  const auto count = static_cast<int32_t>(initial.size());
  symbols.resize(initial.size());
  for (int32_t i = 0; i < count; ++i) symbols[i] = {initial[i], i - 1, i + 1 < count ? i + 1 : -1};

  queue.clear();
  auto enqueue = [&](int32_t left) {
    if (left < 0 || symbols[left].next < 0) return;
    const int32_t right_id = symbols[symbols[left].next].id;
    if (const auto rule = merges_.find(symbols[left].id, right_id)) {
      queue.push_back({rule->rank, left, symbols[left].id, right_id, rule->merged_id});
      std::push_heap(queue.begin(), queue.end());
    }
  };
  for (int32_t i = 0; i + 1 < count; ++i) enqueue(i);

  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end());
    const Candidate candidate = queue.back();
    queue.pop_back();
    Symbol& left = symbols[candidate.left];
    // Skip candidates that earlier merges made stale.
    if (left.id != candidate.left_id || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    if (right.id != candidate.right_id) continue;
    left.id = candidate.merged_id;
    right.id = -1;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = candidate.left;
    enqueue(left.prev);
    enqueue(candidate.left);
  }
  for (int32_t i = count > 0 ? 0 : -1; i >= 0; i = symbols[i].next) ids.push_back(symbols[i].id);
}

}  // namespace mlaserve::tokenizer
