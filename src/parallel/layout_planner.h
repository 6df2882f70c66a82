// Which parallel layout to run a model with on a given set of machines, from config.json alone:
// every layout the ranks allow (plain TP, replicas, DP attention, each with or without EP-MoE),
// what each holds per rank (the family's model::ModelSizing), the KV cache that is left, the
// bytes a decode step streams per token, and the bytes it exchanges. `mlaserve plan` prints them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/kv_dtype.h"
#include "model/config.h"
#include "model/footprint.h"
#include "model/sizing.h"
#include "parallel/topology.h"

namespace mlaserve::parallel {

struct Machines {
  int hosts = 1;
  int sockets_per_host = 1;  // one rank per socket (NUMA node)
  double mem_per_host_bytes = 0;
  // Of each rank's memory, kept free for activations, communication buffers and the OS.
  double reserve_fraction = 0.10;
  // What a rank streams from its memory, and what one rank sends to another host, in bytes/s.
  // Traffic between ranks of one host is counted at the memory bandwidth.
  double mem_bandwidth = 100e9;
  double network_bandwidth = 3e9;  // 25 Gbit/s Ethernet

  int ranks() const { return hosts * sockets_per_host; }
  double usable_bytes_per_rank() const {
    return mem_per_host_bytes / sockets_per_host * (1.0 - reserve_fraction);
  }
};

struct Workload {
  int64_t context = 4096;    // tokens each request may hold in the KV cache
  int64_t concurrency = 1;   // requests decoding at once over the whole job
  bool speculative = false;  // NEXTN: the MTP layer is loaded too, with its own latent KV layer
};

struct LayoutPlan {
  ParallelOptions options;
  bool fits = false;
  std::string why_not;             // when it does not fit, or the layout is invalid for the model
  int64_t weight_value_bytes = 0;  // busiest rank, values only (rank reports say the same)
  int64_t resident_weight_bytes = 0;  // busiest rank, with the packed copies (an estimate)
  int64_t kv_bytes_per_rank = 0;      // what is left for --kv-cache-memory
  int64_t kv_tokens = 0;              // the job's latent KV capacity, over instances and groups
  int64_t kv_tokens_per_group = 0;    // the longest context one DP group / replica can hold
  // Bytes the busiest rank streams per decoded token at the workload's concurrency: a decode
  // step reads each weight once for the whole batch, and touches the routed experts that its
  // tokens pick. Decode is bound by memory bandwidth, so this is time per token per rank.
  double decode_bytes_per_token = 0;
  // Bytes one rank sends per decoded token over all layers (ring algorithms; an estimate).
  double comm_bytes_per_token = 0;
  bool attention_spans_hosts = false;  // an attention TP group's ranks are on several hosts
  // decode_bytes_per_token over the memory bandwidth plus comm_bytes_per_token over the link
  // its collectives cross (the network when the instance spans hosts).
  double seconds_per_token = 0;
};

// Every layout of machines.ranks() ranks for the model `model` describes, fitting ones first,
// best first: least estimated time per decoded token (within 2 %), then attention kept inside a
// host, then most KV cache.
std::vector<LayoutPlan> plan_layouts(const model::ModelSizing& model, const Machines& machines,
                                     const Workload& workload);
// The same for a DeepSeek-V2/V3 config (model::deepseek_sizing).
std::vector<LayoutPlan> plan_layouts(const model::ModelConfig& cfg,
                                     const model::WeightFormat& format, KvDtype kv_dtype,
                                     const model::StoredFp8& stored_fp8, const Machines& machines,
                                     const Workload& workload);

}  // namespace mlaserve::parallel
