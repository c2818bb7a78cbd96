// SplitMix64 (Steele, Lea, Flood 2014): one 64-bit state, full period, integer mixing only, so
// the same numbers on every machine and standard library. The one definition behind the sample
// generator's streams (lib/synth) and verify's seeded tokens (lib/experts/seeded.h).
#pragma once

#include <cstdint>

namespace moepack {

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace moepack
