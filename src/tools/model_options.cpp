#include "tools/model_options.h"

#include "core/error.h"
#include "kernels/cpu_isa.h"
#include "models/deepseek_v4/sharding.h"
#include "runtime/weight_packing.h"

namespace mlaserve::tools {
namespace {

void use_kernels(const std::string& choice) {
  kernels::use_reference_kernels(choice == "reference");
  if (choice == "bf16" && !kernels::cpu_has_avx512_bf16())
    throw CLI::ValidationError("--kernels",
                               "bf16 needs a CPU with AVX512_BF16; this one has none "
                               "(use auto or f32)");
  if (choice == "bf16")
    kernels::use_gemm_choice({kernels::GemmPath::Bf16Dot, kernels::GemmPath::Bf16Dot});
  if (choice == "f32")
    kernels::use_gemm_choice({kernels::GemmPath::F32Widened, kernels::GemmPath::F32Widened});
}

}  // namespace

void ModelOptions::add_to(CLI::App& cmd, bool model_required, bool runs_model) {
  auto* model =
      cmd.add_option("--model", model_dir,
                     model_required ? "HF model directory (config.json + *.safetensors)"
                                    : "HF model directory (config.json + *.safetensors); default: "
                                      "the built-in demo model, models/brown-tiny");
  if (model_required) model->required();
  cmd.add_option("--dtype", dtype,
                 "Weight precision: bfloat16 (bf16 weights, f32 accumulation; fast) or float32 "
                 "(reference precision)")
      ->check(CLI::IsMember({"bfloat16", "bf16", "float32", "fp32"}))
      ->capture_default_str();
  cmd.add_option(
         "--quantization", quantization,
         "How the linear layers inside the model's layers are held in memory: none (in "
         "--dtype; an FP8 checkpoint is dequantized), fp8 (e4m3 with 128x128 block "
         "scales: an FP8 checkpoint's own, or quantized at load), int8 (symmetric, one "
         "scale per output row, quantized at load), int4 (symmetric 4-bit, one scale per "
         "--quantization-group-size values of a row, quantized at load round-to-nearest), "
         "mxfp4 (OCP MX: e2m1 values, a power-of-two scale per 32); auto = fp8 for an FP8 "
         "checkpoint, none otherwise. FP8/INT8 halve the bytes a decode step streams, "
         "INT4/MXFP4 quarter them (at a larger error: see bench/RESULTS.md). A dense "
         "checkpoint's embedding table is quantized alike (an FP8 checkpoint's BF16 "
         "tensors stay as stored, and a checkpoint's FP4 weights, DeepSeek-V4's experts, stay "
         "MXFP4 under all but none); activations and lm_head (unless --quantize-lm-head) stay "
         "in --dtype, the router and the absorbed attention matrices in float32/--dtype")
      ->check(CLI::IsMember({"auto", "none", "fp8", "int8", "int4", "mxfp4"}))
      ->capture_default_str();
  cmd.add_option("--quantization-group-size", group_size,
                 "Values per scale of --quantization int4 (32, 64 or 128): smaller groups follow "
                 "the weights more closely at 4 more bytes per group (32: 4.5 bits per weight "
                 "with the scale, 128: 4.25)")
      ->check(CLI::IsMember({32, 64, 128}))
      ->capture_default_str();
  cmd.add_flag("--quantize-lm-head", quantize_lm_head,
               "Hold lm_head (the vocabulary projection, and the MTP layer's head) quantized "
               "like the layers (needs --quantization fp8/int8/int4/mxfp4 or an FP8 checkpoint) "
               "instead of in --dtype: a decode step streams it whole, a third "
               "of an FP8 step's bytes on a 32000 x 1024 head (batch-1 decode ~1.4x faster "
               "there), at an error of its own in every logit (brown-tiny's validation NLL "
               "moved by under 0.01 %). Off by default: DeepSeek-V3's FP8 release keeps "
               "lm_head in BF16");
  if (runs_model) {
    cmd.add_option(
           "--kernels", kernels,
           "Which GEMM path prefill and batches of more than a few rows take on bf16 (and "
           "FP8/INT8) weights: auto (a short timed probe at the first start on a CPU picks the "
           "faster for GEMMs under and over 64 rows, cached in $MLASERVE_KERNEL_CACHE or "
           "~/.cache/mlaserve/gemm-paths.json (delete it to measure again) and logged), bf16 (x "
           "rounded to bf16, "
           "vdpbf16ps / AMX through oneDNN; needs AVX512_BF16), f32 (weight panels widened to "
           "float32 in cache, f32 FMA: faster on CPUs whose bf16 dot product has no edge over "
           "two FMAs, and no packed bf16 copy is held) or reference (the plain scalar kernels "
           "everywhere, to check the fast paths end to end; slow)")
        ->check(CLI::IsMember({"auto", "bf16", "f32", "reference"}))
        ->each(use_kernels)
        ->capture_default_str();
    cmd.add_flag_callback(
        "--enable-deterministic-inference", [] { kernels::use_deterministic_kernels(true); },
        "Batch-invariant kernels: every token's result is the same bits whatever else runs in "
        "its batch, however its prompt is chunked and whether its prefix comes from the radix "
        "cache (matmuls of every size on the GEMV kernels, no oneDNN; attention in latent space, "
        "one pass per token). Greedy outputs then equal those of the same request alone");
  }
  cmd.add_option("--weight-packing", weight_packing,
                 "on: each float32 weight, and each bf16 weight while the bf16 GEMM path is "
                 "in use (--kernels), gets a copy in oneDNN's packed layout, which serves every "
                 "product of a bf16 weight when the bf16 path serves both shape classes (the "
                 "row-major values are then dropped: one copy, the fastest kernels) and prefill "
                 "and large batches otherwise (about twice the weight memory); off: one "
                 "row-major copy that every kernel reads (the row-major GEMV then serves up to 32 "
                 "rows), slower in decode and in prefill (a lone 512-token prompt of a "
                 "fine-grained MoE measured ~25 % slower); auto: on where the host's MemAvailable "
                 "holds its ranks' weights, packed copies and KV caches with a tenth to spare, "
                 "else off (logged). FP8/INT8 weights are never packed")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->each([](const std::string& choice) { kernels::use_weight_packing(choice != "off"); })
      ->capture_default_str();
  cmd.add_option("--kv-cache-dtype", kv_cache_dtype,
                 "How the latent KV cache stores its rows: bfloat16 (half the memory of float32, "
                 "so twice the tokens), float32, fp8_e4m3 (a quarter, with one float32 scale "
                 "per row; not for DeepSeek-V4, whose windows and compressed entries are "
                 "bfloat16 or float32) or auto (bfloat16; float32 under --dtype float32)")
      ->check(CLI::IsMember({"auto", "bfloat16", "float32", "fp8_e4m3"}))
      ->capture_default_str();
}

model::WeightFormat ModelOptions::weight_format() const {
  const kernels::WeightType type =
      dtype == "float32" || dtype == "fp32" ? kernels::WeightType::F32 : kernels::WeightType::BF16;
  const model::Quantization q = quantization == "none"    ? model::Quantization::None
                                : quantization == "fp8"   ? model::Quantization::Fp8
                                : quantization == "int8"  ? model::Quantization::Int8
                                : quantization == "int4"  ? model::Quantization::Int4
                                : quantization == "mxfp4" ? model::Quantization::Mxfp4
                                                          : model::Quantization::Auto;
  return {type, q, quantize_lm_head, group_size};
}

void ModelOptions::choose_weight_packing(const model::ModelConfig& cfg,
                                         const model::RankLayout& layout, bool with_mtp,
                                         int64_t other_bytes) const {
  if (weight_packing != "auto") return;
  runtime::choose_weight_packing(model_dir, cfg, weight_format(), layout, with_mtp, other_bytes);
}

models::ModelCard ModelOptions::read_card(const parallel::Topology& topo, bool with_mtp,
                                          int64_t other_bytes) const {
  models::ModelCard card = models::read_model_card(model_dir);
  check_card(card, topo, with_mtp, other_bytes);
  return card;
}

void ModelOptions::check_card(const models::ModelCard& card, const parallel::Topology& topo,
                              bool with_mtp, int64_t other_bytes) const {
  if (card.deepseek_v4) models::deepseek_v4::check_layout(*card.deepseek_v4, topo.layout);
  if (!card.deepseek) return;
  parallel::check_model_fits(topo, *card.deepseek);
  choose_weight_packing(*card.deepseek, topo.layout, with_mtp, other_bytes);
}

std::unique_ptr<model::Model> ModelOptions::load(const models::ModelCard& card,
                                                 const parallel::Topology& topo,
                                                 bool with_mtp) const {
  return models::load_model(card, model_dir, weight_format(), topo.layout, with_mtp);
}

KvDtype ModelOptions::kv_dtype() const {
  if (kv_cache_dtype == "float32") return KvDtype::Float32;
  if (kv_cache_dtype == "bfloat16") return KvDtype::BFloat16;
  if (kv_cache_dtype == "fp8_e4m3") return KvDtype::Fp8E4m3;
  return weight_format().dtype == kernels::WeightType::F32 ? KvDtype::Float32 : KvDtype::BFloat16;
}

}  // namespace mlaserve::tools
