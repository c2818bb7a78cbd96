#include "lib/core/hash.h"

#include <xxhash.h>

#include <cstdio>

namespace moepack {
namespace {
std::string to_hex(XXH128_hash_t h) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, h);
  static const char* kDigits = "0123456789abcdef";
  std::string out(32, '0');
  for (int i = 0; i < 16; ++i) {
    out[2 * i] = kDigits[c.digest[i] >> 4];
    out[2 * i + 1] = kDigits[c.digest[i] & 0xF];
  }
  return out;
}
}  // namespace

std::string xxh3_128_hex(std::span<const uint8_t> bytes) { return to_hex(XXH3_128bits(bytes.data(), bytes.size())); }

struct Xxh3Stream::State {
  XXH3_state_t* s = XXH3_createState();
  ~State() { XXH3_freeState(s); }
};

Xxh3Stream::Xxh3Stream() : state_(std::make_unique<State>()) { XXH3_128bits_reset(state_->s); }
Xxh3Stream::~Xxh3Stream() = default;
void Xxh3Stream::update(std::span<const uint8_t> bytes) { XXH3_128bits_update(state_->s, bytes.data(), bytes.size()); }
std::string Xxh3Stream::hex() const { return to_hex(XXH3_128bits_digest(state_->s)); }

}  // namespace moepack
