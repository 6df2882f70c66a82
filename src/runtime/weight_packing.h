// `--weight-packing auto`: oneDNN's packed copies of the bf16/float32 weights make prefill
// GEMMs faster but hold every such weight twice. Auto keeps them where the host has the memory:
// the ranks of a host share its MemAvailable, so each host's first rank decides from the sums of
// its ranks' needs and tells the others.
#pragma once

#include <cstdint>
#include <filesystem>

#include "model/config.h"
#include "model/sharding.h"
#include "model/weight_loader.h"

namespace mlaserve::runtime {

// The packed copies stay when a host's ranks need, with them, at most this share of the
// host's MemAvailable (the rest: step buffers, the radix cache's bookkeeping, the OS).
constexpr double kPackingMemoryShare = 0.9;

// Whether a host with `available` bytes packs: `values` and `other` (KV cache) its ranks hold
// anyway, `packed` the copies. Unknown memory (available < 0) packs.
bool packing_fits(double values, double other, double packed, double available);

// Sets kernels::use_weight_packing for this rank before the model loads. other_bytes: what this
// rank allocates besides its weights (its KV cache). Logs the decision on each host's first
// rank. Collective over MPI_COMM_WORLD.
void choose_weight_packing(const std::filesystem::path& model_dir, const model::ModelConfig& cfg,
                           const model::WeightFormat& format, const model::RankLayout& layout,
                           bool with_mtp, int64_t other_bytes);

}  // namespace mlaserve::runtime
