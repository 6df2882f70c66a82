#include "model/step_comm.h"

#include <algorithm>

#include "core/error.h"

namespace mlaserve::model {

void SingleRankComm::attention_to_mlp(const float* attn_partial, float* residual, int64_t n_local,
                                      int64_t hidden, std::vector<float>& mlp_input) {
  const int64_t n = n_local * hidden;
  for (int64_t i = 0; i < n; ++i) residual[i] += attn_partial[i];
  mlp_input.assign(residual, residual + n);
}

void SingleRankComm::mlp_to_attention(const float* mlp_partial, float* residual, int64_t n_local,
                                      int64_t hidden) {
  const int64_t n = n_local * hidden;
  for (int64_t i = 0; i < n; ++i) residual[i] += mlp_partial[i];
}

void embed_vocab_parallel(const kernels::Weight& table, Range rows, int64_t vocab,
                          std::span<const int32_t> tokens, float* x, StepComm& comm) {
  const int64_t H = table.cols();
  for (size_t t = 0; t < tokens.size(); ++t) {
    const int64_t id = tokens[t];
    if (id < 0 || id >= vocab) fail("token id {} is outside the vocabulary [0, {})", id, vocab);
    float* row = x + static_cast<int64_t>(t) * H;
    if (id < rows.begin || id >= rows.end) {
      std::fill(row, row + H, 0.0f);
      continue;
    }
    for (int64_t c = 0; c < H; ++c) row[c] = table.at(id - rows.begin, c);
  }
  comm.sum_over_attn_tp(x, static_cast<int64_t>(tokens.size()) * H);
}

void SingleRankComm::gather_token_rows(const float* shard, int64_t n_tokens, int64_t width,
                                       float* rows) {
  std::copy(shard, shard + n_tokens * width, rows);
}

void SingleRankComm::gather_groups(const float* local, int64_t n_local, int64_t width,
                                   std::vector<float>& all) {
  all.assign(local, local + n_local * width);
}

void SingleRankComm::reduce_to_group(const float* partial, int64_t n_local, int64_t width,
                                     float* out) {
  std::copy(partial, partial + n_local * width, out);
}

void SingleRankComm::gather_vocab(const float* logits_shard, int64_t rows, int64_t vocab,
                                  float* logits) {
  std::copy(logits_shard, logits_shard + rows * vocab, logits);
}

}  // namespace mlaserve::model
