// The footprint computed from config.json against the loader's own count of what it holds, for
// every rank of several layouts and every weight format: exact for the values, and the packed
// copies' estimate within the block padding.
#include "model/footprint.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>

#include "model/deepseek.h"
#include "model/random_model.h"

namespace mlaserve::model {
namespace {

using kernels::WeightType;

struct LayoutCase {
  int tp, dp;
  bool ep;
};

// Every rank of tp ranks in dp attention groups (DP-major, as parallel/topology numbers them).
std::vector<RankLayout> ranks_of(const LayoutCase& c) {
  std::vector<RankLayout> ranks;
  for (int r = 0; r < c.tp; ++r) {
    RankLayout l;
    l.tp_size = c.tp, l.tp_rank = r, l.dp_size = c.dp;
    l.attn_tp_size = c.tp / c.dp, l.dp_rank = r / l.attn_tp_size;
    l.attn_tp_rank = r % l.attn_tp_size, l.ep_moe = c.ep;
    ranks.push_back(l);
  }
  return ranks;
}

// The values and the resident bytes must match exactly: the footprint asks oneDNN for the size of
// each packed copy (it pads each matrix to its register blocks: 64 rows by 16 words), and counts
// a copy that replaces the row-major values (kernels::packed_copy_serves_all) by its padding only.
const std::vector<WeightFormat> kEveryFormat = {
    {WeightType::F32, Quantization::None},       {WeightType::BF16, Quantization::None},
    {WeightType::BF16, Quantization::Fp8},       {WeightType::F32, Quantization::Int8},
    {WeightType::BF16, Quantization::Auto},      {WeightType::BF16, Quantization::Fp8, true},
    {WeightType::BF16, Quantization::Int8, true}};

const std::vector<LayoutCase> kEveryLayout = {
    {1, 1, false}, {2, 1, false}, {4, 2, false}, {4, 2, true}};

void expect_footprint_matches_loader(const std::filesystem::path& dir, bool with_mtp = false,
                                     const std::vector<WeightFormat>& formats = kEveryFormat,
                                     const std::vector<LayoutCase>& layouts = kEveryLayout) {
  const ModelConfig cfg = ModelConfig::load(dir);
  const StoredFp8 stored = stored_fp8_of(dir);
  for (const LayoutCase& layout : layouts) {
    for (const WeightFormat& requested : formats) {
      const WeightFormat format = resolve_weight_format(requested, cfg.fp8_block_quantized);
      for (const RankLayout& rank : ranks_of(layout)) {
        SCOPED_TRACE(fmt::format(
            "{} tp {} dp {} ep {} rank {} dtype {} quantization {}{}", dir.string(), layout.tp,
            layout.dp, layout.ep, rank.tp_rank, kernels::weight_type_name(format.dtype),
            quantization_name(format.quantization), format.quantize_lm_head ? " lm_head too" : ""));
        const DeepseekModel model(dir, requested, rank, with_mtp);
        const RankWeights w = rank_weights(cfg, rank, format, stored, with_mtp);
        EXPECT_EQ(static_cast<int64_t>(model.weight_value_bytes()), w.values());
        EXPECT_EQ(static_cast<int64_t>(model.resident_weight_bytes()), w.resident());
      }
    }
  }
}

class Footprint : public ::testing::Test {
 protected:
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path made_model(const std::string& config, RandomWeightFormat format) {
    std::ifstream in("tests/data/configs/" + config);
    dir_ = std::filesystem::temp_directory_path() /
           fmt::format("mlaserve-footprint-{}-{}", ::getpid(), config);
    write_random_model(nlohmann::json::parse(in), dir_, 7, format);
    return dir_;
  }
  std::filesystem::path dir_;
};

TEST_F(Footprint, MatchesTheLoaderOnTheGoldenModels) {
  for (const char* model : {"tiny-v2", "tiny-v3", "tiny-v3-fp8"})
    expect_footprint_matches_loader(std::filesystem::path("tests/data/models") / model);
}

// Dimensions that are not multiples of 128 or of the rank count: shards inside FP8 blocks.
TEST_F(Footprint, MatchesTheLoaderOnOddShapesInFp8) {
  expect_footprint_matches_loader(made_model("odd-v3.json", RandomWeightFormat::FP8));
}

// 4-bit weights quantized at load: INT4's float32 scale per group, MXFP4's E8M0 byte (odd-k2
// splits its K dimensions at multiples of 32 over 2 ranks).
TEST_F(Footprint, MatchesTheLoaderInFourBits) {
  expect_footprint_matches_loader(
      made_model("odd-k2.json", RandomWeightFormat::BF16), false,
      {{WeightType::BF16, Quantization::Int4}, {WeightType::BF16, Quantization::Mxfp4}},
      {{1, 1, false}, {2, 1, false}, {2, 1, true}});
}

// The multi-token-prediction layer, whose embedding and head copies the loader shares.
TEST_F(Footprint, MatchesTheLoaderWithTheMtpLayer) {
  expect_footprint_matches_loader("models/brown-tiny-mtp", /*with_mtp=*/true,
                                  {{WeightType::BF16, Quantization::Fp8}});
}

// DeepSeek-V3.2's indexer (FP8 wq_b and wk, bf16 weights_proj). (Without the MTP layer: the
// footprint counts its embedding and head as the shared copies a release stores, which a made
// model's random ones are not.)
TEST_F(Footprint, MatchesTheLoaderWithTheSparseAttentionIndexer) {
  expect_footprint_matches_loader(made_model("odd-v32.json", RandomWeightFormat::FP8));
}

TEST_F(Footprint, MatchesTheLoaderWithoutQLoraAndWithTiedEmbeddings) {
  expect_footprint_matches_loader(made_model("odd-v2-lite.json", RandomWeightFormat::BF16));
}

// --weight-packing off: the loader and the footprint hold and count every weight once (and with
// packing on, float32 weights do get their packed copy, on any CPU).
TEST_F(Footprint, WithoutPackingEveryWeightIsHeldOnce) {
  const std::filesystem::path dir = "tests/data/models/tiny-v3";
  const ModelConfig cfg = ModelConfig::load(dir);
  const RankLayout rank = ranks_of(LayoutCase{1, 1, false}).front();
  for (const bool packing : {true, false}) {
    kernels::use_weight_packing(packing);
    for (const WeightFormat format : {WeightFormat{WeightType::F32, Quantization::None},
                                      WeightFormat{WeightType::BF16, Quantization::None}}) {
      SCOPED_TRACE(
          fmt::format("packing {} dtype {}", packing, kernels::weight_type_name(format.dtype)));
      const DeepseekModel model(dir, format, rank);
      const RankWeights w = rank_weights(cfg, rank, format, stored_fp8_of(dir));
      if (!packing) {
        EXPECT_EQ(model.resident_weight_bytes(), model.weight_value_bytes());
        EXPECT_EQ(w.resident(), w.values());
      } else if (format.dtype == WeightType::F32) {
        EXPECT_GT(model.resident_weight_bytes(), model.weight_value_bytes());
        EXPECT_GT(w.resident(), w.values());
      }
    }
  }
  kernels::use_weight_packing(true);
}

// With packing on and the bf16 path serving both classes, a bf16 model's packed copies replace
// its row-major values: it holds each weight once (plus oneDNN's padding), as with packing off.
TEST_F(Footprint, PackingHoldsABf16WeightOnceWhereItsCopyServesEveryProduct) {
  if (!kernels::packed_copy_serves_all(WeightType::BF16, 64, 64)) {
    GTEST_SKIP() << "the bf16 GEMM path does not serve both classes on this CPU";
  }
  const std::filesystem::path dir = "models/brown-tiny";
  const RankLayout rank = ranks_of(LayoutCase{1, 1, false}).front();
  const WeightFormat bf16{WeightType::BF16, Quantization::None};
  kernels::use_weight_packing(false);
  const DeepseekModel unpacked(dir, bf16, rank);
  kernels::use_weight_packing(true);
  const DeepseekModel packed(dir, bf16, rank);
  EXPECT_EQ(packed.weight_value_bytes(), unpacked.resident_weight_bytes());
  EXPECT_LT(static_cast<double>(packed.resident_weight_bytes()),
            1.05 * static_cast<double>(unpacked.resident_weight_bytes()));
}

// The model cards' figures: DeepSeek-V3 is 671 B parameters without its MTP layer, served in
// FP8 with a BF16 embedding and lm_head (0.93 B parameters each) and a float32 router (58 MoE
// layers x 256 x 7168); V2-Lite is 15.7 B, in BF16.
TEST(FootprintOfPublishedModels, MatchesTheirParameterCounts) {
  const ModelConfig v3 = ModelConfig::load("tests/data/configs/deepseek-v3");
  const RankWeights w = rank_weights(
      v3, RankLayout::single(), resolve_weight_format(WeightType::BF16, v3.fp8_block_quantized),
      stored_fp8_by_convention);
  const double embedding_params = 129280.0 * 7168, router_params = 58.0 * 256 * 7168;
  EXPECT_EQ(w.embedding, 2 * embedding_params);
  EXPECT_EQ(w.lm_head, 2 * embedding_params);
  EXPECT_EQ(w.router, 4 * router_params);
  // One byte per FP8 parameter, plus 4 bytes per 128x128 block and per row (under 0.2 %).
  const double fp8_bytes =
      static_cast<double>(w.values() - w.embedding - w.lm_head - w.router - w.absorbed);
  EXPECT_NEAR(fp8_bytes, 671e9 - 2 * embedding_params - router_params, 1.5e9);

  const ModelConfig lite = ModelConfig::load("tests/data/configs/deepseek-v2-lite");
  const RankWeights l =
      rank_weights(lite, RankLayout::single(),
                   resolve_weight_format(WeightType::BF16, lite.fp8_block_quantized), {});
  EXPECT_NEAR(static_cast<double>(l.values()) / 2, 15.7e9, 0.2e9);
}

// Kimi-K2-Thinking as released: compressed-tensors int4 (group 32) for its routed experts only
// (`ignore` keeps attention, the shared experts and the dense MLP in bf16). Against the same
// config unquantized, exactly the routed experts change: 60 MoE layers x 384 experts, gate|up
// [4096, 7168] and down [7168, 2048] from 2 bytes per value to half a byte, a float32 scale per
// 32 values and a block index per row.
TEST(FootprintOfPublishedModels, KimiK2ThinkingHoldsItsRoutedExpertsInInt4) {
  const ModelConfig k2 = ModelConfig::load("tests/data/configs/kimi-k2-thinking");
  EXPECT_TRUE(k2.stores_int4("model.layers.7.mlp.experts.300.down_proj"));
  EXPECT_FALSE(k2.stores_int4("model.layers.7.self_attn.q_b_proj"));
  EXPECT_FALSE(k2.stores_int4("model.layers.7.mlp.shared_experts.up_proj"));
  EXPECT_FALSE(k2.stores_int4("model.layers.0.mlp.gate_proj"));
  EXPECT_FALSE(k2.stores_int4("lm_head"));
  EXPECT_FALSE(k2.stores_int4("model.embed_tokens"));
  const WeightFormat format = resolve_weight_format(WeightType::BF16, k2);
  EXPECT_EQ(format.quantization, Quantization::Int4);
  EXPECT_EQ(format.group_size, 32);
  ModelConfig plain = k2;
  plain.int4_group_size = 0;
  const RankWeights int4 = rank_weights(k2, RankLayout::single(), format, {});
  const RankWeights bf16 =
      rank_weights(plain, RankLayout::single(), resolve_weight_format(WeightType::BF16, plain), {});
  const double experts = 60.0 * 384;
  const double gate_up = 4096.0 * 7168, down = 7168.0 * 2048;
  const double int4_bytes = (gate_up + down) / 2 + (gate_up + down) / 32 * 4 + (4096 + 7168) * 4;
  EXPECT_EQ(static_cast<double>(bf16.values() - int4.values()),
            experts * (2 * (gate_up + down) - int4_bytes));
}

}  // namespace
}  // namespace mlaserve::model
