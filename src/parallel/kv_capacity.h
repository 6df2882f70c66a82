// How many tokens of latent KV cache a memory budget holds. The latent (kv_lora_rank +
// qk_rope_head_dim values per token per layer) has one head, so pure TP stores every token on
// every rank; DP attention partitions tokens across the groups, which multiplies an instance's
// capacity by dp at the same per-rank budget.
#pragma once

#include <cstdint>

#include "core/kv_dtype.h"
#include "model/config.h"
#include "parallel/topology.h"

namespace mlaserve::parallel {

struct KvCapacity {
  // layers * (kv_lora_rank + qk_rope_head_dim + index_head_dim under V3.2) values of the dtype
  int64_t bytes_per_token = 0;
  int64_t index_bytes_per_token = 0;  // of which V3.2's index keys (0 without an indexer)
  int64_t per_rank_tokens = 0;        // slots in this rank's pool
  int64_t instance_tokens = 0;        // distinct tokens one model instance can hold
};

// mtp_layer: the MTP module's decoder layer keeps a cache row per token too.
KvCapacity kv_capacity(const Topology& topology, const model::ModelConfig& config, KvDtype kv_dtype,
                       int64_t budget_bytes_per_rank, bool mtp_layer = false);

}  // namespace mlaserve::parallel
