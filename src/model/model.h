// The seam between the runtime and a model family. The Worker drives any family through Model:
// one forward step over a batch of sequences (StepInput), the exchanges of its parallel layout
// through StepComm, and the KV the family keeps between steps in a KvStore it makes itself
// (DeepSeek-V2/V3's latent rows per token slot, DeepSeek-V4's windows and compressed entries).
// models/registry.h picks the family from config.json's model_type.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/kv_dtype.h"
#include "model/step_comm.h"

namespace mlaserve::model {

// One sequence's part of a forward step: its new tokens follow n_cached tokens already in the
// KV store; kv_slots lists the pool slots of all n_cached + n_new tokens in order (families that
// keep per-token rows address them so); id names the request (families that keep per-sequence
// state find it so). provisional: a later step may take back rows of this one (speculative
// drafts) by running the sequence after fewer tokens than this step leaves; families that keep
// per-sequence state log what the rows change (DeepSeek-V4), the others need nothing (a
// token's rows are its slot's).
struct SequenceStep {
  int64_t n_new = 0;
  int64_t n_cached = 0;
  std::span<const int32_t> kv_slots;
  uint64_t id = 0;
  bool provisional = false;
};

struct StepInput {
  std::vector<int32_t> tokens;     // [T] new tokens of all sequences, concatenated
  std::vector<int32_t> positions;  // [T]
  std::vector<SequenceStep> seqs;
  std::vector<int64_t> logit_rows;  // rows of [T] whose logits are wanted
};

// What the runtime and the server need to know of any model.
struct ModelInfo {
  std::string model_type;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t max_position_embeddings = 0;
  std::vector<int64_t> eos_token_ids;
  int64_t bos_token_id = 0;
  // Floats per row of the hidden state the MTP module reads (Model::forward's final_hidden):
  // hidden_size, or DeepSeek-V4's hc_mult residual streams of it.
  int64_t mtp_input_width = 0;
};

// A family's config as ModelInfo (each family's config names these fields alike).
template <typename Config>
ModelInfo model_info(std::string model_type, const Config& c) {
  return {std::move(model_type), c.vocab_size,   c.hidden_size, c.max_position_embeddings,
          c.eos_token_ids,       c.bos_token_id, c.hidden_size};
}

// The KV a model keeps between steps, for every sequence of its group. release(): the request
// ended, its state may go (a family addressing rows by slot has nothing to do: the scheduler
// frees the slots).
//
// Prefix snapshots, for families whose state after a prefix is not one row per token (a slot's
// rows are all a prefix needs otherwise): snapshot() keeps request id's state after its first
// n_tokens tokens (what it holds now) under `key`, the KV slot of the prefix's last token (with
// release, the request's state itself becomes the snapshot); a later step that runs a sequence
// after a cached prefix whose last slot names a snapshot continues from it. drop_snapshot():
// the scheduler no longer holds the prefix.
class KvStore {
 public:
  virtual ~KvStore() = default;
  virtual int64_t capacity_tokens() const = 0;
  virtual KvDtype dtype() const = 0;
  virtual void release(uint64_t /*id*/) {}
  virtual void snapshot(uint64_t /*id*/, int64_t /*n_tokens*/, int32_t /*key*/, bool /*release*/) {}
  virtual void drop_snapshot(int32_t /*key*/) {}
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelInfo& info() const = 0;
  // The KV store of one rank: room for capacity_tokens tokens in `dtype`.
  virtual std::unique_ptr<KvStore> new_kv_store(int64_t capacity_tokens, KvDtype dtype) const = 0;

  // Runs the step's tokens through every layer, adding them to kv, and returns the logits
  // [input.logit_rows.size(), vocab]. Every rank of the layout calls it with its group's input;
  // comm carries the exchanges. final_hidden, if given, receives every row's last hidden state,
  // what the MTP module reads ([T, info().mtp_input_width]: V2/V3's after the final norm, V4's
  // residual streams).
  virtual std::vector<float> forward(const StepInput& input, KvStore& kv, StepComm& comm,
                                     std::vector<float>* final_hidden = nullptr) = 0;

  // The multi-token-prediction module (see DeepseekModel::mtp_forward).
  virtual bool has_mtp() const { return false; }
  virtual std::vector<float> mtp_forward(const StepInput& input, const float* final_hidden,
                                         KvStore& kv, StepComm& comm,
                                         std::vector<float>* head_hidden = nullptr);

  // Claims the memory of the largest step the scheduler can plan (see
  // DeepseekModel::reserve_step_buffers); returns the bytes it holds.
  virtual size_t reserve_step_buffers(int64_t group_tokens, int64_t mlp_tokens,
                                      int64_t logit_rows) = 0;

  virtual size_t weight_value_bytes() const = 0;     // values and scales
  virtual size_t resident_weight_bytes() const = 0;  // with the kernels' packed copies
  virtual std::string weight_format_description() const = 0;
  // FLOPs this rank spent, by the family's own kinds of work (rank reports, benchmarks).
  virtual std::vector<std::pair<std::string, double>> flop_counts() const = 0;
};

}  // namespace mlaserve::model
