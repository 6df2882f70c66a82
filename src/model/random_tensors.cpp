#include "model/random_tensors.h"

#include <algorithm>

#include "model/weight_loader.h"

namespace mlaserve::model {

void RandomTensors::fp8_blocks(const std::string& name, int64_t rows, int64_t cols,
                               const std::vector<float>& w, Fp8Scales format) {
  const int64_t br = (rows + 127) / 128, bc = (cols + 127) / 128;
  std::vector<float> scale(static_cast<size_t>(br * bc), 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float& s = scale[static_cast<size_t>((r / 128) * bc + c / 128)];
      s = std::max(s, std::fabs(w[static_cast<size_t>(r * cols + c)]) / 448.0f);
    }
  for (float& s : scale) {
    s = s > 0 ? s : 1.0f;
    if (format == Fp8Scales::E8M0) s = std::exp2(std::ceil(std::log2(s)));
  }
  TensorToWrite t{name,
                  StorageType::F8_E4M3,
                  {rows, cols},
                  std::vector<uint8_t>(static_cast<size_t>(rows * cols))};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float s = scale[static_cast<size_t>((r / 128) * bc + c / 128)];
      t.bytes[static_cast<size_t>(r * cols + c)] =
          f32_to_fp8_e4m3(w[static_cast<size_t>(r * cols + c)] / s);
    }
  add(std::move(t));
  if (format == Fp8Scales::F32Inverse) {
    f32_tensor(name + "_scale_inv", {br, bc}, scale);
    return;
  }
  TensorToWrite st{module_name(name) + ".scale",
                   StorageType::F8_E8M0,
                   {br, bc},
                   std::vector<uint8_t>(scale.size())};
  for (size_t i = 0; i < scale.size(); ++i) st.bytes[i] = f32_to_e8m0(scale[i]);
  add(std::move(st));
}

}  // namespace mlaserve::model
