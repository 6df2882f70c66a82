// DeepSeek-V4's hybrid attention for one layer: MQA over the query's window of raw rows and
// the compressed entries it may see, with a per-head sink in the softmax denominator.
// Shapes: n new tokens at positions [first, first + n), nh heads of d, rows of d.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "core/numeric.h"
#include "core/scratch.h"
#include "kernels/parallel.h"
#include "models/deepseek_v4/compressor.h"
#include "models/deepseek_v4/model.h"

namespace mlaserve::models::deepseek_v4 {

namespace {

// The lightning indexer's choice for queries t of a sequence's step (q [n, heads, dim], weights
// [n, heads]): of the entries query t sees, visible(t), the min(topk, visible(t)) of highest
// score Σ_h w_h · relu(q_h · key_e), ties to the earlier entry, ascending, into picks[t]. Scored by
// kernels::indexer_topk (V3.2's indexer kernel: the same score), whose causal model has query i
// of m see one entry more than query i - 1. With one entry per 4 positions, every 4th query of a
// step sees one more than the one 4 before it: each residue class of positions mod 4 is such a
// run, scored in one call (a prompt's keys are then tiled once per class, not once per query).
void select_entries(const float* q, const float* weights, const PooledRows& keys,
                    const std::function<int64_t(int64_t)>& visible, int64_t n, int64_t heads,
                    int64_t dim, int64_t topk, std::vector<std::vector<int32_t>>& picks) {
  thread_local std::vector<int32_t> selected, counts;
  thread_local std::vector<float> class_q, class_w;
  for (int64_t first = 0; first < std::min<int64_t>(4, n); ++first) {
    const int64_t m = (n - first + 3) / 4;  // queries first, first + 4, ...
    const int64_t last = first + 4 * (m - 1);
    float* cq = take(class_q, m * heads * dim);
    float* cw = take(class_w, m * heads);
    for (int64_t i = 0; i < m; ++i) {
      std::copy_n(q + (first + 4 * i) * heads * dim, heads * dim, cq + i * heads * dim);
      std::copy_n(weights + (first + 4 * i) * heads, heads, cw + i * heads);
    }
    int32_t* chosen = take(selected, m * topk);
    int32_t* count = take(counts, m);
    // Query i of the run sees visible(last) - (m - 1 - i) entries, as the kernel's causal model.
    kernels::indexer_topk({m, heads, dim, visible(last), topk}, cq, cw, keys.view(), keys.ids(),
                          chosen, count);
    for (int64_t i = 0; i < m; ++i)
      picks[static_cast<size_t>(first + 4 * i)].assign(chosen + i * topk,
                                                       chosen + i * topk + count[i]);
  }
}

// A new row as the cache will hold it, so that the step's queries read what later steps will
// (prefill, chunks and decode then see the same rows).
void round_to(KvDtype dtype, float* row, int64_t dim) {
  if (dtype == KvDtype::Float32) return;
  for (int64_t k = 0; k < dim; ++k) row[k] = bf16_to_f32(f32_to_bf16(row[k]));
}

}  // namespace

// This rank's heads of the layer's attention for the step's rows x [n, H], into out [n, H]
// complete: every rank of the attention group computes the replicated projections, rows, entries
// and selection itself (dp_linear may split the projections' tokens), its heads' attention and
// its output groups' partial sums, completed over the group (sharding.h).
void DeepseekV4Model::attention(const LayerWeights& lw, int64_t layer, const float* x,
                                std::span<const SequenceRows> seqs, int64_t n,
                                model::StepComm& comm, float* out) const {
  const AttentionWeights& w = lw.attn;
  const int64_t nh = shards_.heads().size(), d = cfg_.head_dim, ql = cfg_.q_lora_rank;
  const auto eps = static_cast<float>(cfg_.rms_norm_eps);
  const Rope& rope = layer_rope(layer);
  StepBuffers& b = buf_;
  const auto project = [&](const kernels::Weight& weight, std::vector<float>& buf) {
    float* y = take(buf, n * weight.rows());
    model::replicated_linear(comm, x, n, cfg_.hidden_size, weight.rows(), y, b.token_shard,
                             [&](const float* rows, int64_t m, float* ys) {
                               linear(FlopKind::Projections, rows, m, weight, ys);
                             });
    return y;
  };
  // q: [n, nh, d] from the q latent, each head RMS-normalised (no weight), RoPE on its last dims.
  StepProjections p;
  p.qr = project(w.wq_a, b.qr);
  kernels::rms_norm(p.qr, w.q_norm.data(), n, ql, eps, p.qr);
  float* q = take(b.q, n * nh * d);
  linear(FlopKind::Queries, p.qr, n, w.wq_b, q);
  thread_local std::vector<float> unit;
  unit.assign(static_cast<size_t>(d), 1.0f);
  kernels::rms_norm(q, unit.data(), n * nh, d, eps, q);
  // kv: [n, d], one row per token, key and value of every head.
  float* kv = project(w.wkv, b.kv);
  p.kv = kv;
  kernels::rms_norm(kv, w.kv_norm.data(), n, d, eps, kv);
  // The compressors' and the indexer's projections of the step's rows.
  if (w.compressor) {
    p.compressor_kv = project(w.compressor->wkv, b.compressor_kv);
    p.compressor_score = project(w.compressor->wgate, b.compressor_score);
  }
  if (w.indexer) {
    const int64_t ih = cfg_.index_n_heads, id = cfg_.index_head_dim;
    p.index_kv = project(w.indexer->compressor.wkv, b.index_kv);
    p.index_score = project(w.indexer->compressor.wgate, b.index_score);
    p.index_w = project(w.indexer->weights_proj, b.index_w);
    p.index_q = take(b.index_q, n * ih * id);
    linear(FlopKind::Projections, p.qr, n, w.indexer->wq_b, p.index_q);
    const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(id * ih)));
    for (int64_t i = 0; i < n * ih; ++i) p.index_w[i] *= scale;
  }
  // Each sequence's compressors take its new tokens and each query gathers the rows it reads.
  // (Kept across steps like the scratch: emptied, their capacity stays.)
  // (A reference, so that the pool's threads below read this thread's lists.)
  thread_local std::vector<std::vector<const float*>> rows_buf;
  std::vector<std::vector<const float*>>& rows = rows_buf;
  if (rows.size() < static_cast<size_t>(n)) rows.resize(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) rows[static_cast<size_t>(t)].clear();
  // Each row's RoPE angles at its position in this layer's base (computed once per step).
  p.angles = layer_angles(layer);
  // Each sequence's stored rows (ring, entries) as float32, for its queries to read.
  thread_local std::vector<std::vector<float>> decoded;
  if (decoded.size() < seqs.size()) decoded.resize(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    const SequenceRows& s = seqs[i];
    for (int64_t t = s.row; t < s.row + s.n; ++t) {
      const float* cs = p.angles + t * rope.angle_floats();
      rope.rotate(q + t * nh * d, nh, d, d, cs);
      rope.rotate(kv + t * d, 1, d, d, cs);
      round_to(s.cache->layer(layer).window.dtype(), kv + t * d, d);
    }
    gather_rows(w, layer, s, p, decoded[i], rows);
  }
  // Every query of the step at once: attention with the sinks, the output de-rotated at the
  // query's position.
  float* o = take(b.o, n * nh * d);
  for (int64_t t = 0; t < n; ++t)  // q·row and p·row over every row a query reads
    flops_[static_cast<size_t>(FlopKind::Attention)] +=
        4.0 * static_cast<double>(nh * d) *
        static_cast<double>(rows[static_cast<size_t>(t)].size());
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  kernels::for_each_item(n, n > 1, [&](int64_t t) {
    const auto& r = rows[static_cast<size_t>(t)];
    float* ot = o + t * nh * d;
    kernels::sink_attention({nh, d, static_cast<int64_t>(r.size()), scale}, q + t * nh * d,
                            r.data(), w.sink.data(), ot);
    rope.rotate(ot, nh, d, d, p.angles + t * rope.angle_floats(), true);
  });
  // The new rows join the windows only now: the queries above read the rows they replace
  // (logged, where the rows are provisional).
  const int64_t W = cfg_.sliding_window;
  thread_local std::vector<float> replaced;
  replaced.resize(static_cast<size_t>(d));
  for (const SequenceRows& s : seqs) {
    LayerCache& cache = s.cache->layer(layer);
    UndoLayer* undo = s.cache->undo_layer(layer);
    for (int64_t t = 0; t < s.n; ++t) {
      const int64_t slot = (s.first + t) % W;
      if (undo) {
        cache.window.read(slot, 1, replaced.data());
        undo->replaced.append(replaced.data());
      }
      cache.window.put(slot, kv + (s.row + t) * d);
    }
  }

  // Grouped low-rank output: z_g = wo_a[g] · o_g for each of this rank's groups of heads,
  // out = wo_b · z (its columns of those groups: partial sums over the attention group).
  const auto groups = static_cast<int64_t>(w.wo_a.size());
  const int64_t group_in = shards_.heads_per_group * d, rank = cfg_.o_lora_rank;
  float* og = take(b.group_in, n * group_in);
  float* zg = take(b.group_out, n * rank);
  float* z = take(b.z, n * groups * rank);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t t = 0; t < n; ++t)
      std::copy_n(o + t * nh * d + g * group_in, group_in, og + t * group_in);
    linear(FlopKind::Output, og, n, w.wo_a[static_cast<size_t>(g)], zg);
    for (int64_t t = 0; t < n; ++t) std::copy_n(zg + t * rank, rank, z + (t * groups + g) * rank);
  }
  linear(FlopKind::Output, z, n, w.wo_b, out);
  comm.sum_over_attn_tp(out, n * cfg_.hidden_size);
}

void DeepseekV4Model::gather_rows(const AttentionWeights& w, int64_t layer, const SequenceRows& s,
                                  const StepProjections& step, std::vector<float>& decoded,
                                  std::vector<std::vector<const float*>>& rows) const {
  const int64_t d = cfg_.head_dim, W = cfg_.sliding_window;
  const auto eps = static_cast<float>(cfg_.rms_norm_eps);
  const LayerKind kind = cfg_.layer_kind(layer);
  const Rope& rope = layer_rope(layer);
  LayerCache& cache = s.cache->layer(layer);
  UndoLayer* undo = s.cache->undo_layer(layer);
  const float* kv = step.kv + s.row * d;
  // The raw row of a position the sequence's queries may see: a new one, or the ring's
  // (positions from first - W + 1 on, which the new rows overwrite only after every query has
  // read them).
  auto raw_row = [&](int64_t pos) -> const float* {
    return pos >= s.first ? kv + (pos - s.first) * d : decoded.data() + (pos % W) * d;
  };
  if (w.compressor) {
    const int64_t width = w.compressor->width();
    compress(*w.compressor, rope, eps, step.compressor_kv + s.row * width,
             step.compressor_score + s.row * width, s.n, s.first, cache.kv_state, cache.entries,
             undo ? CompressorLog{&undo->kv_states, &undo->entries} : CompressorLog{});
  }
  const int64_t ih = cfg_.index_n_heads, id = cfg_.index_head_dim;
  float* index_q = nullptr;
  const float* index_w = nullptr;
  if (w.indexer) {
    const int64_t width = w.indexer->compressor.width();
    compress(w.indexer->compressor, rope, eps, step.index_kv + s.row * width,
             step.index_score + s.row * width, s.n, s.first, cache.index_state, cache.index_keys,
             undo ? CompressorLog{&undo->index_states, &undo->index_keys} : CompressorLog{});
    index_q = step.index_q + s.row * ih * id;
    index_w = step.index_w + s.row * ih;
    for (int64_t t = 0; t < s.n; ++t)
      rope.rotate(index_q + t * ih * id, ih, id, id,
                  step.angles + (s.row + t) * rope.angle_floats());
  }
  // The compressed entries each query reads: HCA's every visible one, CSA's the indexer's pick.
  thread_local std::vector<std::vector<int32_t>> picks;
  if (picks.size() < static_cast<size_t>(s.n)) picks.resize(static_cast<size_t>(s.n));
  int64_t picked = 0;
  const auto visible = [&](int64_t t) { return (s.first + t + 1) / cfg_.compress_ratio(layer); };
  if (kind == LayerKind::Csa) {
    select_entries(index_q, index_w, cache.index_keys, visible, s.n, ih, id, cfg_.index_topk,
                   picks);
  }
  for (int64_t t = 0; t < s.n && kind != LayerKind::Window; ++t) {
    auto& p = picks[static_cast<size_t>(t)];
    if (kind == LayerKind::Hca) {
      p.resize(static_cast<size_t>(visible(t)));
      std::iota(p.begin(), p.end(), 0);
    }
    picked += static_cast<int64_t>(p.size());
  }
  // The stored rows as float32: the ring's, then the entries, all of them when the queries read
  // more rows than there are (a prompt), else only the picked ones (a decode at depth reads 512
  // of CSA's thousands).
  const int64_t n_entries = cache.entries.rows();
  const bool all = picked >= n_entries;
  decoded.resize(static_cast<size_t>((W + (all ? n_entries : picked)) * d));
  cache.window.read(0, W, decoded.data());
  float* entries = decoded.data() + W * d;
  if (all) cache.entries.read(0, n_entries, entries);
  int64_t slot = 0;
  for (int64_t t = 0; t < s.n; ++t) {
    const int64_t pos = s.first + t;
    auto& r = rows[static_cast<size_t>(s.row + t)];
    for (int64_t p = std::max<int64_t>(0, pos - W + 1); p <= pos; ++p) r.push_back(raw_row(p));
    if (kind == LayerKind::Window) continue;
    for (int32_t e : picks[static_cast<size_t>(t)]) {
      if (all) {
        r.push_back(entries + static_cast<int64_t>(e) * d);
        continue;
      }
      cache.entries.read(e, 1, entries + slot * d);
      r.push_back(entries + slot++ * d);
    }
  }
}

}  // namespace mlaserve::models::deepseek_v4
