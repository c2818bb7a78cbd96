#include "lib/experts/seeded.h"

#include <cmath>

#include "lib/core/splitmix64.h"

namespace moepack::experts {

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
