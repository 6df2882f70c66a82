// Random tensors for made models (tests and benchmarks): a seeded normal stream per tensor name,
// so a tensor's values depend only on the seed and its name, and the safetensors entries to
// write. Each family's model writer adds its own storage formats on top.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <numbers>
#include <string>
#include <vector>

#include "core/numeric.h"
#include "model/safetensors.h"

namespace mlaserve::model {

// splitmix64: a small, fast, well-mixed generator; each tensor gets its own stream.
struct Random {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }
  float normal() {  // Box-Muller
    return static_cast<float>(std::sqrt(-2.0 * std::log(uniform())) *
                              std::cos(2 * std::numbers::pi * uniform()));
  }
};

inline uint64_t hash_name(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

class RandomTensors {
 public:
  explicit RandomTensors(uint64_t seed) : seed_(seed) {}

  // n values N(0, std²) from the stream of `name`.
  std::vector<float> normal_values(const std::string& name, int64_t n, double std) const {
    Random rng{hash_name(name, seed_)};
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = static_cast<float>(rng.normal() * std);
    return v;
  }
  void bf16_tensor(const std::string& name, std::vector<int64_t> shape,
                   const std::vector<float>& v) {
    TensorToWrite t{name, StorageType::BF16, std::move(shape), std::vector<uint8_t>(v.size() * 2)};
    auto* out = reinterpret_cast<bf16*>(t.bytes.data());
    for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_bf16(v[i]);
    add(std::move(t));
  }
  void f32_tensor(const std::string& name, std::vector<int64_t> shape,
                  const std::vector<float>& v) {
    TensorToWrite t{name, StorageType::F32, std::move(shape), std::vector<uint8_t>(v.size() * 4)};
    std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
    add(std::move(t));
  }
  void f32_vector(const std::string& name, const std::vector<float>& v) {
    f32_tensor(name, {static_cast<int64_t>(v.size())}, v);
  }
  void ones(const std::string& name, int64_t n) {
    bf16_tensor(name, {n}, std::vector<float>(static_cast<size_t>(n), 1.0f));
  }
  // FP8 e4m3 in 128x128 blocks, the block's scale fitting its largest magnitude to 448:
  // DeepSeek-V3's `<name>_scale_inv` (F32, the exact ratio), or DeepSeek-V4's `<module>.scale`
  // (F8_E8M0: the power of two at or above the ratio).
  enum class Fp8Scales { F32Inverse, E8M0 };
  void fp8_blocks(const std::string& name, int64_t rows, int64_t cols, const std::vector<float>& w,
                  Fp8Scales format);
  void add(TensorToWrite t) { tensors_.push_back(std::move(t)); }
  const std::vector<TensorToWrite>& tensors() const { return tensors_; }

 private:
  uint64_t seed_;
  std::vector<TensorToWrite> tensors_;
};

}  // namespace mlaserve::model
