#include "tools/model_options.h"

#include "core/error.h"

namespace mlaserve::tools {

void ModelOptions::add_to(CLI::App& cmd, bool model_required) {
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
         "--kernels", kernels,
         "fast (AVX-512 / oneDNN) or reference (the plain scalar kernels, to check the fast path "
         "end to end; slow)")
      ->check(CLI::IsMember({"fast", "reference"}))
      ->each(
          [](const std::string& choice) { kernels::use_reference_kernels(choice == "reference"); })
      ->capture_default_str();
}

kernels::WeightType ModelOptions::weight_type() const {
  return dtype == "float32" || dtype == "fp32" ? kernels::WeightType::F32
                                               : kernels::WeightType::BF16;
}

}  // namespace mlaserve::tools
