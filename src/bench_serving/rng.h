// A seeded random source whose draws are the same with every standard library: mt19937_64 is
// fully specified, and the distributions here are written out rather than taken from <random>,
// whose distributions differ between implementations.
#pragma once

#include <cstdint>
#include <random>

namespace mlaserve::bench_serving {

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}

  // Uniform in [low, high], both included; rejection sampling keeps it unbiased.
  int64_t uniform_int(int64_t low, int64_t high);
  // Uniform in [0, 1), with 53 random bits.
  double uniform01();
  // Exponential with mean 1/rate: the gaps between the arrivals of a Poisson process.
  double exponential(double rate);

 private:
  std::mt19937_64 engine_;
};

}  // namespace mlaserve::bench_serving
