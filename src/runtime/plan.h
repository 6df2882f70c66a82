// The control plane's messages (docs/DESIGN.md "Control plane"): rank 0 decides each step's work
// for every DP group as a StepPlan and broadcasts it; every rank derives its forward input, token
// counts and collective sizes from the same plan, so collectives match by construction.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sampling/sampling.h"

namespace mlaserve::runtime {

struct PlannedSequence {
  uint64_t id = 0;
  int64_t n_cached = 0;             // tokens already in the group's KV pool
  std::vector<int32_t> new_tokens;  // tokens to run now: a prompt (chunk) or the last sampled token
  std::vector<int32_t> kv_slots;    // pool slots of all n_cached + new tokens, in order
  bool all_logits = false;          // logits for every new token, not just the last
  bool return_logits = false;       // send the logits rows back to rank 0 (eval)
  bool sample = true;  // pick a token from the last row (false: a non-final prefill chunk)
  sampling::SamplingParams sampling{.temperature =
                                        0.0f};  // the leader keeps one sampler per request
  int32_t top_logprobs = -1;  // -1: no logprobs; n >= 0: chosen token's logprob and n alternatives
  // The MTP module runs on the first mtp_tokens.size() new tokens: new token j (position i)
  // with mtp_tokens[j] = t_{i+1}; its logits (for t_{i+2}) come back with return_logits.
  std::vector<int32_t> mtp_tokens;
  // NEXTN speculation (every rank of the group makes the same choices): spec_steps > 0
  // drafts that many tokens with the MTP module after this step's token is chosen. With
  // spec_verify, new_tokens = [last token, drafts...] and the step keeps the drafts the main
  // model agrees with, plus its own next token. kv_slots carry spec_steps - 1 more slots after
  // the new tokens', for the chained drafts' MTP latents (scratch, freed after the step).
  int32_t spec_steps = 0;
  bool spec_verify = false;
  // >= 0: after this step the group's KV store keeps the sequence's state as a prefix snapshot
  // named by this slot (KvStore::snapshot).
  int32_t snapshot_key = -1;
  // Structured output: the tokens the leader may pick (bit id % 64 of word id / 64); empty
  // allows every token. Rank 0 computes it from the request's grammar before each sample.
  std::vector<uint64_t> allowed_tokens;

  // One new token over a cached prefix (else it runs a prompt or a prompt chunk).
  bool is_decode() const { return new_tokens.size() == 1 && n_cached > 0; }
  // Drafts the next tokens: speculation on, and this step picks the request's next token.
  bool drafts_next() const { return spec_steps > 0 && sample; }
  // Rows of logits this step returns: every new token's with all_logits or to verify drafts,
  // else the last one's.
  int64_t logit_rows() const {
    return all_logits || spec_verify ? static_cast<int64_t>(new_tokens.size()) : 1;
  }
  // Rows of this step the MTP module runs: every new token when drafting, else mtp_tokens'.
  int64_t n_mtp_rows() const;
  // KV slots of the tokens this step runs (kv_slots may carry scratch slots after them).
  std::span<const int32_t> step_slots() const {
    return std::span(kv_slots).first(static_cast<size_t>(n_cached) + new_tokens.size());
  }
};

// A change to a group's prefix snapshots, made before the step's forward. Drop: snapshot `key`
// goes. Keep: the state of released request id (its n_tokens tokens) becomes snapshot `key`.
// Forget: released request id's state goes (none was kept; a finished request's goes anyway,
// this frees a retracted one's before it runs again).
struct SnapshotOp {
  enum Kind : int32_t { Drop, Keep, Forget };
  uint64_t id = 0;
  int64_t n_tokens = 0;
  int32_t key = -1;
  Kind kind = Drop;
};

struct GroupPlan {
  std::vector<PlannedSequence> seqs;
  std::vector<SnapshotOp> snapshot_ops;
  int64_t n_tokens() const;
  bool extend() const;  // any sequence runs a prompt (more than one token or nothing cached)
  int64_t n_mtp_tokens() const;  // MTP rows of the step's first MTP pass
  int64_t n_drafting() const;    // sequences that draft (one row each in the chained passes)
  bool mtp_extend() const;       // extend() of the MTP module's pass
};

struct StepPlan {
  bool shutdown = false;
  std::vector<GroupPlan> groups;   // one per DP group (attention group, or replica)
  std::vector<uint64_t> released;  // requests that ended: leaders drop their samplers

  std::vector<uint8_t> encode() const;
  static StepPlan decode(std::span<const uint8_t> bytes);
};

// What a group leader sends back for each sequence of the step.
struct SequenceResult {
  uint64_t id = 0;
  int32_t token = -1;  // the sampled (or greedy) next token; -1 when not sampled
  // When top_logprobs >= 0: the logprob of `token`, or of each of `tokens` in order; and, when
  // top_logprobs > 0, that many alternatives per token, token after token.
  std::vector<float> logprobs;
  std::vector<sampling::TokenLogprob> top;
  std::vector<float> logits;      // [rows, vocab] when return_logits
  std::vector<float> mtp_logits;  // [mtp rows, vocab] when return_logits
  std::vector<int32_t> tokens;    // speculation: the accepted drafts then the model's next token
  std::vector<int32_t> drafts;    // speculation: the next step's drafts
};

std::vector<uint8_t> encode_results(const std::vector<SequenceResult>& results);
std::vector<SequenceResult> decode_results(std::span<const uint8_t> bytes);

}  // namespace mlaserve::runtime
