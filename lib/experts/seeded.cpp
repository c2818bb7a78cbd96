#include "lib/experts/seeded.h"

#include <cmath>

namespace moepack::experts {

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::vector<float> seeded_normal(uint64_t seed, uint64_t count) {
  uint64_t state = seed;
  auto bits = [&state] { return splitmix64(state); };
  std::vector<float> v(static_cast<size_t>(count));
  for (auto& x : v) {
    const double u1 = (static_cast<double>(bits() >> 11) + 0.5) / 9007199254740992.0;
    const double u2 = static_cast<double>(bits() >> 11) / 9007199254740992.0;
    x = static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
  }
  return v;
}

std::vector<int64_t> seeded_indices(uint64_t seed, uint64_t count, uint64_t bound) {
  uint64_t state = seed;
  std::vector<int64_t> v(static_cast<size_t>(count));
  // The high 64 bits of a 64x64 product: uniform enough below any bound, with no division.
  for (auto& x : v) x = static_cast<int64_t>((static_cast<unsigned __int128>(splitmix64(state)) * bound) >> 64);
  return v;
}

}  // namespace moepack::experts
