// splitmix64 (Steele, Lea, Flood 2014): the mixing function and the generator built on it. Used
// where the project needs cheap, reproducible, counter-based randomness of its own (the loader's
// masks and order, synthetic batches, per-rank seeds) rather than LibTorch's generators.
#pragma once

#include <cstdint>

namespace roformer::core {

inline constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;

// splitmix64's finalizer: a good 64-bit mixing bijection.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// splitmix64 generator: one add and a mix per draw.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}
  uint64_t next() { return mix64(state_ += kGoldenGamma); }
  // Uniform in [0, n) for n < 2^32 (Lemire's multiply-shift; bias below 2^-32 * n).
  uint32_t bounded(uint32_t n) { return static_cast<uint32_t>(((next() >> 32) * n) >> 32); }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1), 53 bits

 private:
  uint64_t state_;
};

}  // namespace roformer::core
