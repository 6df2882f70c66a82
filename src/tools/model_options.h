// Flags shared by every subcommand that loads a model.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "kernels/ops.h"
#include "model/config.h"
#include "model/sharding.h"
#include "model/weight_loader.h"
#include "models/registry.h"
#include "parallel/topology.h"

namespace mlaserve::tools {

struct ModelOptions {
  std::string model_dir;
  std::string dtype = "bfloat16";
  std::string kernels = "auto";
  std::string quantization = "auto";
  std::string kv_cache_dtype = "auto";
  std::string weight_packing = "auto";
  bool quantize_lm_head = false;
  int64_t group_size = 32;  // --quantization-group-size

  // runs_model false: a command that only reads the config (plan) has no --kernels.
  void add_to(CLI::App& cmd, bool model_required = true, bool runs_model = true);
  // The formats for --dtype, --quantization and --quantize-lm-head. (--kernels takes effect
  // while the flags are parsed.)
  model::WeightFormat weight_format() const;
  // How the latent KV cache stores its rows: --kv-cache-dtype, where auto is bfloat16, or
  // float32 under --dtype float32 (the reference precision keeps an exact cache).
  KvDtype kv_dtype() const;
  // --weight-packing auto: whether the packed copies fit beside everything else on this host
  // (runtime/weight_packing.h), before the model loads. other_bytes: this rank's KV cache.
  // Collective over MPI_COMM_WORLD.
  void choose_weight_packing(const model::ModelConfig& cfg, const model::RankLayout& layout,
                             bool with_mtp, int64_t other_bytes) const;
  // --model's card, checked against the layout: for the DeepSeek-V2/V3 family, that the layout
  // splits it (check_model_fits) and the weight packing chosen (collective, as
  // choose_weight_packing). DeepSeek-V4 checks its layout as it loads.
  models::ModelCard read_card(const parallel::Topology& topo, bool with_mtp,
                              int64_t other_bytes) const;
  void check_card(const models::ModelCard& card, const parallel::Topology& topo, bool with_mtp,
                  int64_t other_bytes) const;
  // This rank's part of the model the card describes.
  std::unique_ptr<model::Model> load(const models::ModelCard& card, const parallel::Topology& topo,
                                     bool with_mtp) const;
};

}  // namespace mlaserve::tools
