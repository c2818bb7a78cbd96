#include "lib/synth/rng.h"

namespace moepack::synth {
namespace {

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

uint64_t derive_seed(uint64_t seed, std::string_view key) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a 64 offset basis
  for (unsigned char c : key) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  uint64_t state = seed ^ h;
  splitmix64(state);
  return splitmix64(state);
}

Rng::Rng(uint64_t seed) {
  uint64_t state = seed;
  for (auto& s : s_) s = splitmix64(state);
}

uint64_t Rng::next_u64() {
  uint64_t result = rotl(s_[1] * 5, 7) * 9;
  uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

float Rng::uniform() { return static_cast<float>(next_u64() >> 40) * 0x1.0p-24f; }

float Rng::normal() {
  // Var(U[0,1)) = 1/12, so four of them have variance 1/3: scale by sqrt(3).
  float sum = uniform() + uniform() + uniform() + uniform();
  return (sum - 2.0f) * 1.7320508f;
}

uint64_t Rng::below(uint64_t n) {
  // Lemire's multiply-shift without the rejection step: the bias is < n / 2^64, irrelevant here
  // and deterministic either way.
  return static_cast<uint64_t>((static_cast<unsigned __int128>(next_u64()) * n) >> 64);
}

}  // namespace moepack::synth
