// DeepSeek-V4: the config's checks, the hyper-connections' Sinkhorn, and the forward against the
// independent float64 reference (tests/reference/deepseek_v4_reference.py) on random models of
// every layer kind (window-only, CSA, HCA), hash and score routing, FP8 blocks and FP4 experts,
// with prompts long enough that windows, compressed entries and the indexer's top-k all matter.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <numeric>

#include "model/safetensors.h"
#include "models/deepseek_v4/config.h"
#include "models/deepseek_v4/footprint.h"
#include "models/deepseek_v4/hyper_connections.h"
#include "models/deepseek_v4/kv_store.h"
#include "models/deepseek_v4/model.h"
#include "models/deepseek_v4/random_model.h"
#include "support/command.h"
#include "support/files.h"

namespace mlaserve::models::deepseek_v4 {
namespace {

using nlohmann::json;

json tiny_config() {
  std::ifstream in("tests/data/configs/v4-tiny.json");
  return json::parse(in);
}

// tiny_config() as DeepSeek ships V4: FP8 blocks with E8M0 scales, FP4 experts.
json as_released(json c) {
  c["quantization_config"] = {{"quant_method", "fp8"},
                              {"fmt", "e4m3"},
                              {"scale_fmt", "ue8m0"},
                              {"weight_block_size", {128, 128}}};
  c["expert_dtype"] = "fp4";
  return c;
}

std::string config_error(const json& c) {
  try {
    V4Config::from_json(c, "config.json");
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(V4Config, ReadsTheTinyModel) {
  const V4Config c = V4Config::from_json(tiny_config(), "config.json");
  EXPECT_EQ(c.layer_kind(0), LayerKind::Window);
  EXPECT_EQ(c.layer_kind(1), LayerKind::Csa);
  EXPECT_EQ(c.layer_kind(2), LayerKind::Hca);
  EXPECT_TRUE(c.hash_routed(0));
  EXPECT_FALSE(c.hash_routed(1));
  EXPECT_EQ(c.router.scoring, kernels::RouterScoring::SqrtSoftplus);
}

TEST(V4Config, RejectsRatiosOtherThanTheThreeKinds) {
  json c = tiny_config();
  c["compress_ratios"] = {0, 4, 64, 4};
  {
    const std::string e = config_error(c);
    EXPECT_NE(e.find("compress_ratios[2] is 64"), std::string::npos) << e;
  }
}

TEST(V4Config, RejectsRatiosThatDisagreeWithTheLayers) {
  json c = tiny_config();
  c["compress_ratios"] = {0, 4, 128};
  const std::string e = config_error(c);
  EXPECT_NE(e.find("lists 3 ratios for 4 layers"), std::string::npos) << e;
  // The release lists the MTP block's ratio too.
  c["compress_ratios"] = {0, 4, 128, 4, 0};
  c["num_nextn_predict_layers"] = 1;
  EXPECT_EQ(config_error(c), "");
}

TEST(V4Config, NeedsTheIndexerForCsaLayers) {
  json c = tiny_config();
  c.erase("index_topk");
  EXPECT_NE(config_error(c).find("index_topk"), std::string::npos);
  c["compress_ratios"] = {0, 128, 128, 0};  // no CSA layer: no indexer needed
  EXPECT_EQ(config_error(c), "");
}

TEST(V4Config, RejectsAnotherExpertFormat) {
  json c = tiny_config();
  c["expert_dtype"] = "int4";
  EXPECT_NE(config_error(c).find("expert_dtype 'int4' is not supported"), std::string::npos);
}

// KV per token as DeepSeek-V4-Flash's layout implies it, in bf16: CSA (512 + 128) / 4 values =
// 320 B, HCA 512 / 128 = 8 B, window-only layers none beyond their fixed window.
TEST(V4Config, KvPerTokenOfV4Flash) {
  std::ifstream in("tests/data/configs/deepseek-v4-flash/config.json");
  const V4Config c = V4Config::from_json(json::parse(in), "deepseek-v4-flash");
  int64_t csa = 0, hca = 0, window = 0;
  double bytes = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const LayerKind kind = c.layer_kind(l);
    csa += kind == LayerKind::Csa;
    hca += kind == LayerKind::Hca;
    window += kind == LayerKind::Window;
    const double b = 2 * c.kv_values_per_token(l);
    EXPECT_EQ(b, kind == LayerKind::Csa ? 320.0 : kind == LayerKind::Hca ? 8.0 : 0.0) << l;
    bytes += b;
  }
  EXPECT_EQ(csa, 21);
  EXPECT_EQ(hca, 20);
  EXPECT_EQ(window, 2);
  EXPECT_EQ(bytes, 21 * 320.0 + 20 * 8.0);       // 6.7 KiB per token, where V3's MLA keeps 70 KiB
  EXPECT_EQ(2 * c.window_values(), 128 * 1024);  // each layer's window: 128 rows of 1 KiB
}

TEST(HyperConnections, SinkhornMakesTheMixDoublyStochastic) {
  std::vector<float> m = {3.0f, -1.0f, 0.5f, 2.0f, 0.0f, 1.0f, -2.0f, 0.3f,
                          1.5f, 0.2f,  0.1f, -1.f, 4.0f, 0.7f, 0.0f,  -0.5f};
  sinkhorn(m.data(), 4, 20, 1e-6f);
  for (int i = 0; i < 4; ++i) {
    float row = 0, column = 0;
    for (int j = 0; j < 4; ++j) {
      row += m[static_cast<size_t>(i * 4 + j)];
      column += m[static_cast<size_t>(j * 4 + i)];
      EXPECT_GT(m[static_cast<size_t>(i * 4 + j)], 0.0f);
    }
    EXPECT_NEAR(row, 1.0f, 1e-3f);
    EXPECT_NEAR(column, 1.0f, 1e-5f);  // the last step normalises columns
  }
}

std::vector<int32_t> prompt(int64_t n, int64_t vocab, uint64_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  uint64_t s = seed;
  for (auto& id : ids) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(vocab - 2)) + 2;
  }
  return ids;
}

double relative_l2(const float* got, const std::vector<double>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return std::sqrt(diff / norm);
}

class V4Forward : public ::testing::Test {
 protected:
  // A random model of tiny_config() in `format` (released: FP8 + FP4 experts; else bf16), with
  // an MTP block (a CSA layer) if `mtp`.
  std::filesystem::path make(bool released, bool mtp = false) {
    const auto dir = tmp_ / fmt::format("{}{}", released ? "released" : "bf16", mtp ? "-mtp" : "");
    json config = released ? as_released(tiny_config()) : tiny_config();
    if (mtp) {
      config["num_nextn_predict_layers"] = 1;
      config["compress_ratios"].push_back(4);
    }
    write_random_model(config, dir, 1);
    return dir;
  }
  testing::TempDir tmp_;
  int tmp_counter_ = 0;
};

// Prompts of 1, 37 and 200 tokens: the window (8) slides, CSA selects 4 of up to 50 entries,
// HCA's first entry appears at position 127.
TEST_F(V4Forward, MatchesTheFloat64Reference) {
  for (const bool released : {true, false}) {
    const auto dir = make(released);
    const DeepseekV4Model model(dir, model::WeightFormat(kernels::WeightType::F32));
    json input = {{"prompts", json::array()}};
    std::vector<std::vector<int32_t>> prompts;
    for (const int64_t n : {1, 37, 200}) {
      prompts.push_back(prompt(n, model.config().vocab_size, static_cast<uint64_t>(n)));
      input["prompts"].push_back({{"ids", prompts.back()}});
    }
    const json ref =
        testing::run_float64_reference(dir, input, 0, tmp_, "deepseek_v4_reference.py");
    ASSERT_FALSE(ref.empty());
    for (size_t p = 0; p < prompts.size(); ++p) {
      SequenceCache cache = model.new_cache();
      const std::vector<float> logits = model.forward(prompts[p], cache);
      const auto want = ref["prompts"][p]["last_logits"].get<std::vector<double>>();
      const float* last = logits.data() + logits.size() - want.size();
      EXPECT_LT(relative_l2(last, want), 1e-4)
          << (released ? "released" : "bf16") << " model, prompt of " << prompts[p].size();
    }
  }
}

// Decoding a token at a time, or in chunks, gives the logits of prefilling the whole text: the
// compressors' unfinished windows and the window ring carry over exactly.
TEST_F(V4Forward, DecodeAndChunksEqualPrefill) {
  const DeepseekV4Model model(make(true), model::WeightFormat(kernels::WeightType::F32));
  const std::vector<int32_t> ids = prompt(140, model.config().vocab_size, 5);
  const int64_t V = model.config().vocab_size;
  for (const KvDtype dtype : {KvDtype::Float32, KvDtype::BFloat16}) {
    SequenceCache whole = model.new_cache(dtype);
    const std::vector<float> want = model.forward(ids, whole);
    for (const size_t chunk : {size_t{1}, size_t{13}}) {
      SequenceCache cache = model.new_cache(dtype);
      std::vector<float> got;
      for (size_t begin = 0; begin < ids.size(); begin += chunk) {
        const std::vector<int32_t> part(
            ids.begin() + static_cast<int64_t>(begin),
            ids.begin() + static_cast<int64_t>(std::min(ids.size(), begin + chunk)));
        const std::vector<float> l = model.forward(part, cache);
        got.insert(got.end(), l.begin(), l.end());
      }
      ASSERT_EQ(got.size(), want.size());
      for (size_t t = 0; t < ids.size(); ++t) {
        const std::vector<double> row(want.begin() + static_cast<int64_t>(t) * V,
                                      want.begin() + static_cast<int64_t>(t + 1) * V);
        EXPECT_LT(relative_l2(got.data() + t * static_cast<size_t>(V), row), 1e-5)
            << kv_dtype_name(dtype) << " cache, chunks of " << chunk << ", position " << t;
      }
    }
  }
}

// The store's prefix snapshots: a request restored from one continues exactly as the sequence it
// was taken from, the two share the prefix's compressed entries (the pools hold them once), and
// the pools empty when the requests and the snapshot go.
TEST_F(V4Forward, SnapshotsContinueAsTheirSequenceAndShareItsEntries) {
  DeepseekV4Model model(make(true), model::WeightFormat(kernels::WeightType::F32));
  const std::vector<int32_t> ids = prompt(171, model.config().vocab_size, 21);
  std::vector<int32_t> slots(ids.size());
  std::iota(slots.begin(), slots.end(), 0);
  const std::unique_ptr<model::KvStore> kv = model.new_kv_store(1000, KvDtype::Float32);
  auto& store = static_cast<V4KvStore&>(*kv);
  model::SingleRankComm comm;
  // Request id runs tokens [first, first + n) after the first ones; the last row's logits.
  auto run = [&](uint64_t id, int64_t first, int64_t n) {
    model::StepInput in;
    in.tokens.assign(ids.begin() + first, ids.begin() + first + n);
    for (int64_t t = 0; t < n; ++t) in.positions.push_back(static_cast<int32_t>(first + t));
    in.seqs.push_back({n, first, std::span(slots).first(static_cast<size_t>(first + n)), id});
    in.logit_rows = {n - 1};
    return model.forward(in, store, comm);
  };
  run(1, 0, 150);
  store.snapshot(1, 150, slots[149], false);
  const int64_t prefix_rows = store.pooled_rows();
  EXPECT_GT(prefix_rows, 0);
  const std::vector<float> want = run(1, 150, 20);
  const int64_t own_rows = store.pooled_rows() - prefix_rows;
  EXPECT_GT(own_rows, 0);
  const std::vector<float> got = run(2, 150, 20);  // from the snapshot
  EXPECT_EQ(got, want);
  EXPECT_EQ(store.pooled_rows(), prefix_rows + 2 * own_rows);  // the prefix's rows once
  store.snapshot(2, 170, slots[169], true);  // request 2's state itself becomes a snapshot
  EXPECT_EQ(store.sequences(), 1u);
  EXPECT_EQ(store.snapshots(), 2u);
  EXPECT_EQ(run(3, 170, 1), run(1, 170, 1));  // request 3 continues from request 2's state
  store.release(1);
  store.release(3);
  store.drop_snapshot(slots[149]);
  store.drop_snapshot(slots[169]);
  EXPECT_EQ(store.pooled_rows(), 0);
  EXPECT_THROW(run(4, 150, 1), std::exception);  // no state, no snapshot
}

// Speculative drafts: a verify step's rows are provisional, and a step that runs the sequence
// after fewer tokens takes the rest back. For every count kept (the step's first row and 0 to 6
// drafts, across CSA's 4-token entries and the 8-row window ring, from two phases of both), the
// 130 tokens after (past the entries whose windows hold kept rows: CSA's next two, HCA's at
// position 255) give the logits of a sequence that never ran the rejected rows, and hold as
// many pooled rows; a snapshot of a request holding provisional rows keeps only those it names.
TEST_F(V4Forward, ProvisionalRowsTakenBackLeaveTheSequenceAsBefore) {
  DeepseekV4Model model(make(true), model::WeightFormat(kernels::WeightType::F32));
  const int64_t V = model.config().vocab_size;
  const std::vector<int32_t> ids = prompt(300, V, 31), wrong = prompt(6, V, 32);
  std::vector<int32_t> slots(300);
  std::iota(slots.begin(), slots.end(), 0);
  const std::unique_ptr<model::KvStore> kv = model.new_kv_store(1000, KvDtype::Float32);
  auto& store = static_cast<V4KvStore&>(*kv);
  model::SingleRankComm comm;
  // Request id runs `tokens` after its first `first` tokens; every row's logits.
  auto run = [&](uint64_t id, int64_t first, const std::vector<int32_t>& tokens, bool provisional) {
    const auto n = static_cast<int64_t>(tokens.size());
    model::StepInput in;
    in.tokens = tokens;
    for (int64_t t = 0; t < n; ++t) in.positions.push_back(static_cast<int32_t>(first + t));
    in.seqs.push_back(
        {n, first, std::span(slots).first(static_cast<size_t>(first + n)), id, provisional});
    in.logit_rows.resize(static_cast<size_t>(n));
    std::iota(in.logit_rows.begin(), in.logit_rows.end(), 0);
    return model.forward(in, store, comm);
  };
  const auto part = [&](int64_t begin, int64_t end) {
    return std::vector<int32_t>(ids.begin() + begin, ids.begin() + end);
  };
  uint64_t id = 0;
  for (const int64_t base : {129, 134}) {
    for (int64_t kept = 0; kept <= 6; ++kept) {
      SCOPED_TRACE(fmt::format("after {} tokens, {} drafts kept", base, kept));
      // Speculating: the prompt, a verify step (its drafts right up to `kept`), then 130 tokens.
      const uint64_t spec = ++id, plain = ++id;
      run(spec, 0, part(0, base), false);
      std::vector<int32_t> verify = part(base, base + 1 + kept);
      verify.insert(verify.end(), wrong.begin(), wrong.begin() + (6 - kept));
      run(spec, base, verify, true);
      const int64_t after = base + 1 + kept;
      const std::vector<float> got = run(spec, after, part(after, after + 130), false);
      const int64_t spec_rows = store.pooled_rows();
      // Never speculating: the kept tokens, then the same 130.
      run(plain, 0, part(0, after), false);
      const std::vector<float> want = run(plain, after, part(after, after + 130), false);
      EXPECT_EQ(store.pooled_rows(), 2 * spec_rows);
      for (int64_t t = 0; t < 130; ++t) {
        const std::vector<double> row(want.begin() + t * V, want.begin() + (t + 1) * V);
        EXPECT_LT(relative_l2(got.data() + t * V, row), 1e-5) << "row " << t;
      }
      store.release(spec);
      store.release(plain);
    }
  }
  EXPECT_EQ(store.pooled_rows(), 0);
  // A snapshot of the kept tokens of a request whose last step was provisional.
  run(++id, 0, part(0, 130), false);
  run(id, 130, {ids[130], ids[131], wrong[0], wrong[1]}, true);
  store.snapshot(id, 132, slots[131], true);
  const std::vector<float> restored = run(++id, 132, part(132, 134), false);
  const std::vector<float> plain = run(++id, 132, part(132, 134), false);  // snapshot again
  EXPECT_EQ(restored, plain);
  run(++id, 0, part(0, 132), false);
  const std::vector<float> want = run(id, 132, part(132, 134), false);
  for (int64_t t = 0; t < 2; ++t) {
    const std::vector<double> row(want.begin() + t * V, want.begin() + (t + 1) * V);
    EXPECT_LT(relative_l2(restored.data() + t * V, row), 1e-5) << "row " << t;
  }
}

// A bf16 cache (the rows a server keeps by default) moves the logits little from float32's.
TEST_F(V4Forward, Bf16CacheStaysNearFloat32) {
  const DeepseekV4Model model(make(true), model::WeightFormat(kernels::WeightType::F32));
  const std::vector<int32_t> ids = prompt(200, model.config().vocab_size, 9);
  SequenceCache exact = model.new_cache(KvDtype::Float32),
                rounded = model.new_cache(KvDtype::BFloat16);
  const std::vector<float> want = model.forward(ids, exact), got = model.forward(ids, rounded);
  const std::vector<double> last(want.end() - model.config().vocab_size, want.end());
  const double error = relative_l2(got.data() + got.size() - last.size(), last);
  EXPECT_LT(error, 1e-2);
  EXPECT_GT(error, 0.0);  // the rows were rounded
}

// A step of several sequences (a decode, a chunk after a cached prefix, a first prefill) gives
// each the logits it gets alone: the batch shares the linear layers and the MoE, never a row of
// attention state.
TEST_F(V4Forward, ABatchOfSequencesEqualsEachAlone) {
  const DeepseekV4Model model(make(true), model::WeightFormat(kernels::WeightType::F32));
  const int64_t V = model.config().vocab_size;
  const std::vector<int32_t> a = prompt(60, V, 11), b = prompt(150, V, 12), c = prompt(9, V, 13);
  // Alone: each sequence's prefix, then its step's tokens.
  struct Case {
    const std::vector<int32_t>* ids;
    size_t cached;
  };
  const std::vector<Case> cases = {{&a, 59}, {&b, 130}, {&c, 0}};
  std::vector<std::vector<float>> alone;
  std::vector<SequenceCache> caches;
  for (const Case& k : cases) {
    SequenceCache cache = model.new_cache();
    if (k.cached > 0)
      model.forward({k.ids->begin(), k.ids->begin() + static_cast<int64_t>(k.cached)}, cache);
    caches.push_back(cache);  // a copy: the batched run starts from the same state
    alone.push_back(
        model.forward({k.ids->begin() + static_cast<int64_t>(k.cached), k.ids->end()}, cache));
  }
  std::vector<SequenceInput> step;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& ids = *cases[i].ids;
    step.push_back({std::span(ids).subspan(cases[i].cached), &caches[i]});
  }
  const std::vector<float> batched = model.forward(step);
  size_t row = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    for (size_t t = 0; t < alone[i].size() / static_cast<size_t>(V); ++t, ++row) {
      const std::vector<double> want(alone[i].begin() + static_cast<int64_t>(t) * V,
                                     alone[i].begin() + static_cast<int64_t>(t + 1) * V);
      EXPECT_LT(relative_l2(batched.data() + row * static_cast<size_t>(V), want), 1e-5)
          << "sequence " << i << ", new token " << t;
    }
  }
  EXPECT_EQ(row * static_cast<size_t>(V), batched.size());
}

// The footprint the planner computes from the config alone is what the loader holds, for the
// released formats (FP8 blocks, FP4 experts) and for a bf16 checkpoint, in float32 and bf16,
// with and without the MTP block.
// In the checkpoint's formats and quantized at load (INT8, INT4 at groups of 64, MXFP4).
TEST_F(V4Forward, FootprintFromTheConfigEqualsTheLoadedWeights) {
  using kernels::WeightType;
  using model::Quantization;
  const std::vector<model::WeightFormat> formats = {
      {WeightType::F32},
      {WeightType::BF16},
      {WeightType::BF16, Quantization::Int8},
      {WeightType::BF16, Quantization::Int4, false, 64},
      {WeightType::BF16, Quantization::Mxfp4}};
  for (const bool released : {true, false}) {
    for (const bool mtp : {false, true}) {
      const auto dir = make(released, mtp);
      for (const model::WeightFormat& requested : formats) {
        const DeepseekV4Model model(dir, requested, model::RankLayout::single(), mtp);
        const model::WeightFormat format =
            model::resolve_weight_format(requested, model.config().fp8_block_quantized);
        EXPECT_EQ(weight_value_bytes(model.config(), format, model::RankLayout::single(), mtp),
                  model.weight_value_bytes())
            << (released ? "released" : "bf16") << (mtp ? " model with its MTP block" : " model")
            << " in " << kernels::weight_type_name(requested.dtype) << " "
            << model::quantization_name(requested.quantization);
      }
    }
  }
}

// Under a layout each rank's share from the config equals what its loader holds: attention TP
// (heads by output group, the vocabulary), TP-MoE in 32-column blocks (FP8 and FP4 split off
// their scale blocks' edges), EP-MoE with whole experts.
TEST_F(V4Forward, FootprintOfEachRankEqualsItsLoadedShare) {
  json c = as_released(tiny_config());
  c["moe_intermediate_size"] = 96;  // three 32-column blocks over two ranks: 2 and 1
  const auto dir = tmp_ / "sliced";
  write_random_model(c, dir, 2);
  const model::WeightFormat format(kernels::WeightType::BF16);
  for (const bool ep : {false, true}) {
    for (int rank = 0; rank < 2; ++rank) {
      // --tp 2: one attention group of both ranks.
      const model::RankLayout layout{2, rank, 1, 0, 2, rank, ep};
      const DeepseekV4Model model(dir, format, layout);
      EXPECT_EQ(
          weight_value_bytes(model.config(), model::resolve_weight_format(format, true), layout),
          model.weight_value_bytes())
          << "rank " << rank << (ep ? " ep" : " tp");
    }
  }
}

// reserve_step_buffers claims what the largest step uses: a step of that size (a 64-token
// prompt with every row's logits, then a batch of three sequences) grows no buffer past it.
TEST_F(V4Forward, ReservedStepBuffersHoldTheLargestStep) {
  DeepseekV4Model model(make(true), model::WeightFormat(kernels::WeightType::F32));
  const int64_t V = model.config().vocab_size;
  const size_t reserved = model.reserve_step_buffers(64, 64, 64);
  EXPECT_GT(reserved, size_t{0});
  SequenceCache one = model.new_cache();
  model.forward(prompt(64, V, 3), one);
  std::vector<SequenceCache> caches(3, model.new_cache());
  const std::vector<std::vector<int32_t>> prompts = {prompt(30, V, 4), prompt(20, V, 5),
                                                     prompt(14, V, 6)};
  std::vector<SequenceInput> batch;
  for (size_t i = 0; i < 3; ++i) batch.push_back({prompts[i], &caches[i]});
  model.forward(batch);
  EXPECT_EQ(model.reserve_step_buffers(64, 64, 64), reserved);
}

// A checkpoint missing a tensor the config implies, or with a scale of the wrong shape, is a
// load error that names it.
TEST_F(V4Forward, LoadErrorsNameTheTensor) {
  const auto dir = make(true);
  // The checkpoint with tensor `name` changed by `edit` (which may drop it by clearing its name).
  auto rewrite = [&](const std::string& name,
                     const std::function<void(model::TensorToWrite&)>& edit) {
    std::vector<model::TensorToWrite> kept;
    const model::SafetensorsFile file(dir / "model.safetensors");
    for (const auto& [tensor, t] : file.tensors()) {
      model::TensorToWrite w{tensor, t.type, t.shape,
                             std::vector<uint8_t>(t.data, t.data + t.nbytes)};
      if (tensor == name) edit(w);
      if (!w.name.empty()) kept.push_back(std::move(w));
    }
    const auto out = tmp_ / ("broken-" + std::to_string(tmp_counter_++));
    std::filesystem::create_directories(out);
    std::filesystem::copy_file(dir / "config.json", out / "config.json");
    model::write_safetensors(out / "model.safetensors", kept);
    try {
      DeepseekV4Model broken(out, model::WeightFormat(kernels::WeightType::F32));
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  for (const std::string name :
       {"layers.1.attn.compressor.wgate.weight", "layers.1.attn.indexer.weights_proj.weight",
        "layers.0.ffn.gate.tid2eid"}) {
    EXPECT_NE(rewrite(name, [](auto& t) { t.name.clear(); }).find(name), std::string::npos) << name;
  }
  const std::string scale = "layers.2.attn.wq_a.scale";
  const std::string reshaped = rewrite(scale, [](auto& t) { t.shape = {t.shape[0] * t.shape[1]}; });
  EXPECT_NE(reshaped.find(scale), std::string::npos) << reshaped;
  // An E8M0 scale byte 0xff is NaN; an expert id past the experts is no expert.
  const std::string nan = rewrite(scale, [](auto& t) { t.bytes[0] = 0xff; });
  EXPECT_NE(nan.find("'" + scale + "' holds the E8M0 NaN code"), std::string::npos) << nan;
  const std::string table = "layers.0.ffn.gate.tid2eid";
  const std::string bad_id = rewrite(table, [](auto& t) { t.bytes[8] = 99; });
  EXPECT_NE(bad_id.find("'" + table + "' names expert 99"), std::string::npos) << bad_id;
  // FP4 scales stored as float32 load when they are powers of two (as E8M0 bytes), else not.
  const std::string fp4_scale = "layers.1.ffn.experts.0.w2.scale";
  const auto as_f32 = [](float value) {
    return [value](model::TensorToWrite& t) {
      t.type = model::StorageType::F32;
      t.bytes.resize(t.bytes.size() * 4);
      for (size_t i = 0; i < t.bytes.size(); i += 4) std::memcpy(&t.bytes[i], &value, 4);
    };
  };
  EXPECT_EQ(rewrite(fp4_scale, as_f32(0.25f)), "");
  const std::string thirds = rewrite(fp4_scale, as_f32(0.3f));
  EXPECT_NE(thirds.find("'" + fp4_scale + "' holds 0.3 for a group of FP4 tensor"),
            std::string::npos)
      << thirds;
}

}  // namespace
}  // namespace mlaserve::models::deepseek_v4
