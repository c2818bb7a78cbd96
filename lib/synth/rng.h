// The generator's own pseudo-random numbers. Samples must be byte-identical across machines and
// standard libraries, so nothing here uses <random>'s distributions (their algorithms are
// implementation-defined) or transcendental functions (libm results may differ in the last ulp):
// only integer mixing and exactly rounded float arithmetic.
#pragma once

#include <cstdint>
#include <string_view>

#include "lib/core/splitmix64.h"

namespace moepack::synth {

// SplitMix64, good enough to seed (lib/core/splitmix64.h).
using moepack::splitmix64;

// A 64-bit seed for a named stream under a global seed: FNV-1a of the key, mixed with the seed
// through SplitMix64. Streams of different keys are independent, so adding a tensor to a family
// never changes the values of another one.
uint64_t derive_seed(uint64_t seed, std::string_view key);

// xoshiro256** (Blackman, Vigna 2018), seeded from SplitMix64 as its authors recommend.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next_u64();
  // Uniform in [0, 1) with 24 random bits: exactly representable, no rounding.
  float uniform();
  // Approximately standard normal: the sum of four uniforms, centred and scaled to unit
  // variance (Irwin-Hall). Bounded by ±2·sqrt(3), which keeps outliers mild and deterministic.
  float normal();
  // Uniform integer in [0, n).
  uint64_t below(uint64_t n);

 private:
  uint64_t s_[4];
};

}  // namespace moepack::synth
