// Seeded inputs for running experts (verify's tokens, bench's activations and router logits):
// standard normal values from splitmix64 and Box-Muller, the same numbers on every machine for
// one seed.
#pragma once

#include <cstdint>
#include <vector>

namespace moepack::experts {

std::vector<float> seeded_normal(uint64_t seed, uint64_t count);
// Integers in [0, bound) (token ids for hash-routed layers); bound > 0.
std::vector<int64_t> seeded_indices(uint64_t seed, uint64_t count, uint64_t bound);

}  // namespace moepack::experts
