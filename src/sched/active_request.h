// Rank 0's record of one request while the engine serves it.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "cache/radix_cache.h"
#include "sched/generation.h"

namespace mlaserve::sched {

struct ActiveRequest {
  uint64_t id = 0;
  GenerationRequest request;
  EventSink sink;
  int group = 0;
  std::vector<int32_t> generated;
  std::chrono::steady_clock::time_point arrival = std::chrono::steady_clock::now();

  // KV while admitted. The fill sequence is the prompt followed by the generated tokens; slots[i]
  // holds the latent of fill token i. The first n_prefix_slots belong to the radix cache (the
  // reused prefix, locked at prefix_node); the rest belong to this request.
  std::vector<int32_t> slots;
  cache::RadixCache::Node* prefix_node = nullptr;
  int64_t n_prefix_slots = 0;
  // Prefill: fill tokens [n_prefilled, prefill_len) still to run before the next sample. At first
  // admission prefill_len is the prompt; after a retraction it also covers the generated tokens.
  int64_t n_prefilled = 0;
  int64_t prefill_len = 0;
  int64_t cached_tokens = 0;  // prompt tokens reused from the radix cache at first admission
  // Prefix snapshots: where the cached prefix went further than its longest snapshot, or the
  // prompt shares a longer prefix with a waiting request, the prefill stops at the prefix's end
  // (snapshot_at) once, for a snapshot under the radix cache's slot of its last token (-1: r's
  // own, the prefix entering the cache then), so that the next request sharing it continues
  // from there.
  int64_t snapshot_at = 0;
  int32_t snapshot_key = -1;
  uint64_t chunk_planned = 0;  // the scheduler's plan that last ran a prompt chunk of r
  std::chrono::steady_clock::time_point admitted;  // first admission
  int retractions = 0;
  // NEXTN speculation (0: off for this request): tokens drafted per step, the drafts the next
  // decode verifies, the slots a step used beyond the kept tokens (freed before the next plan),
  // and the verify steps run so far.
  int spec_steps = 0;
  std::vector<int32_t> drafts;
  std::vector<int32_t> scratch_slots;
  int64_t spec_verify_ct = 0;

  int64_t prompt_len() const { return static_cast<int64_t>(request.prompt.size()); }
  int64_t n_generated() const { return static_cast<int64_t>(generated.size()); }
  int64_t fill_len() const { return prompt_len() + n_generated(); }
  int32_t fill_token(int64_t i) const {
    return i < prompt_len() ? request.prompt[static_cast<size_t>(i)]
                            : generated[static_cast<size_t>(i - prompt_len())];
  }
  std::vector<int32_t> fill_tokens(int64_t begin, int64_t end) const;

  // A speculative step holds 2 * spec_steps slots past the kept tokens: the drafts it verifies
  // and the chained drafts' MTP latents.
  int64_t kv_tokens_needed() const {
    return prompt_len() + request.max_new_tokens + 2 * spec_steps;
  }
  // Slots one decode step takes: the token (and drafts) it runs, and its scratch.
  int64_t decode_slots() const { return spec_steps > 0 ? 2 * spec_steps : 1; }
  bool prefill_done() const { return n_prefilled == prefill_len; }
  // Fill tokens whose latents are in the KV pool (a prefill has written up to n_prefilled).
  int64_t n_computed() const {
    return prefill_done() ? static_cast<int64_t>(slots.size()) : n_prefilled;
  }
  int64_t remaining_new_tokens() const { return request.max_new_tokens - n_generated(); }
  // Tokens still to compute: the rest of the prefill and of the generation budget.
  int64_t outstanding_tokens() const { return prefill_len - n_prefilled + remaining_new_tokens(); }
};

}  // namespace mlaserve::sched
