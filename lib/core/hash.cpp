#include "lib/core/hash.h"

// xxHash compiled into this file (XXH_INLINE_ALL: its functions are static here, under their own
// prefix), so that the block loop can also be built for AVX-512 and AVX2 and chosen at run time:
// about 2.5x the speed of the baseline (SSE2) loop from the L2 cache for AVX-512, and convert
// hashes every byte it writes and every source byte, verify every byte of the artifact. Both loops give the same value (the algorithm's accumulators do
// not depend on the instruction set); the tests pin it.
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 reports the AVX-512 intrinsics' own undefined-vector idiom (_mm512_undefined_epi32
// inside _mm512_shuffle_epi32 / _mm512_mul_epu32) as maybe-uninitialized; not about this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MOEPACK_XXH3_AVX512 1
#define XXH_DISPATCH_AVX512 1
#define XXH_TARGET_AVX512 __attribute__((target("avx512f")))
#define XXH_DISPATCH_AVX2 1
#define XXH_TARGET_AVX2 __attribute__((target("avx2")))
#define XXH_ACC_ALIGN 64  // the AVX-512 loop's alignment of the accumulators and secret
#endif
#define XXH_INLINE_ALL
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

#ifdef MOEPACK_XXH3_AVX512
__attribute__((target("avx512f"))) void update_avx512(XXH3_state_t* s, const uint8_t* bytes, size_t n) {
  XXH3_update(s, bytes, n, XXH3_accumulate_512_avx512, XXH3_scrambleAcc_avx512);
}
bool have_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}
__attribute__((target("avx2"))) void update_avx2(XXH3_state_t* s, const uint8_t* bytes, size_t n) {
  XXH3_update(s, bytes, n, XXH3_accumulate_512_avx2, XXH3_scrambleAcc_avx2);
}
bool have_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}
#endif

void update(XXH3_state_t* s, std::span<const uint8_t> bytes) {
#ifdef MOEPACK_XXH3_AVX512
  if (have_avx512()) return update_avx512(s, bytes.data(), bytes.size());
  if (have_avx2()) return update_avx2(s, bytes.data(), bytes.size());
#endif
  XXH3_128bits_update(s, bytes.data(), bytes.size());
}
}  // namespace

std::string xxh3_128_hex(std::span<const uint8_t> bytes) {
  // Short inputs take XXH3's own short paths; long ones the (dispatched) block loop, whose
  // streaming value equals the one-shot value.
  if (bytes.size() <= 4096) return to_hex(XXH3_128bits(bytes.data(), bytes.size()));
  Xxh3Stream s;
  s.update(bytes);
  return s.hex();
}

struct Xxh3Stream::State {
  XXH3_state_t* s = XXH3_createState();
  ~State() { XXH3_freeState(s); }
};

Xxh3Stream::Xxh3Stream() : state_(std::make_unique<State>()) { XXH3_128bits_reset(state_->s); }
Xxh3Stream::~Xxh3Stream() = default;
void Xxh3Stream::update(std::span<const uint8_t> bytes) { moepack::update(state_->s, bytes); }
std::string Xxh3Stream::hex() const { return to_hex(XXH3_128bits_digest(state_->s)); }

}  // namespace moepack
