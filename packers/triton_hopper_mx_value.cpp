// See triton_hopper_mx_value.h for the drawn layout and the upstream definition.
#include "packers/triton_hopper_mx_value.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace moepack::packers {
namespace {

uint16_t twiddle_lane(const uint8_t (&nibbles)[4]) {
  uint16_t lane = 0;
  for (int slot = 0; slot < 4; ++slot)
    for (int bit = 0; bit < 4; ++bit)
      if ((nibbles[slot] >> bit) & 1)
        lane = static_cast<uint16_t>(lane | (1u << TritonHopperMXValueLayout::kLaneBit[slot][bit]));
  return lane;
}

// The twiddle is linear over bits, so a group's word is the OR of each byte's own contribution:
// one 256-entry table per byte slot (4 KiB) replaces 32 bit tests per byte on the bulk path.
// The tables are built from kLaneBit, the definition the visit uses, so they cannot drift from it.
struct TwiddleTables {
  uint32_t by_slot[4][256];
  TwiddleTables() {
    for (int slot = 0; slot < 4; ++slot)
      for (int byte = 0; byte < 256; ++byte) {
        uint8_t low[4] = {0, 0, 0, 0}, high[4] = {0, 0, 0, 0};
        low[slot] = static_cast<uint8_t>(byte & 0xF);
        high[slot] = static_cast<uint8_t>(byte >> 4);
        by_slot[slot][byte] = static_cast<uint32_t>(twiddle_lane(low)) | (static_cast<uint32_t>(twiddle_lane(high)) << 16);
      }
  }
};
const TwiddleTables& twiddle_tables() {
  static const TwiddleTables tables;
  return tables;
}

// The inverse, also linear over bits: a stored word's byte h (0..3) holds bits of lane h/2
// (low nibbles for h < 2, high nibbles above); untwiddle[h % 2][byte] spreads those bits back to
// their slots, slot s's nibble in the low half of byte s. Built from kLaneBit as well.
struct UntwiddleTables {
  uint32_t by_lane_byte[2][256];
  UntwiddleTables() {
    for (int half = 0; half < 2; ++half)
      for (int byte = 0; byte < 256; ++byte) {
        uint32_t slots = 0;
        for (int slot = 0; slot < 4; ++slot)
          for (int bit = 0; bit < 4; ++bit) {
            const int lane_bit = TritonHopperMXValueLayout::kLaneBit[slot][bit];
            if (lane_bit / 8 == half && ((byte >> (lane_bit % 8)) & 1)) slots |= 1u << (8 * slot + bit);
          }
        by_lane_byte[half][byte] = slots;
      }
  }
};
const UntwiddleTables& untwiddle_tables() {
  static const UntwiddleTables tables;
  return tables;
}

}  // namespace

std::string TritonHopperMXValueLayout::name() const {
  return layout_id::hopper_mx_value();
}

uint32_t TritonHopperMXValueLayout::twiddle(std::array<uint8_t, 4> group) {
  const TwiddleTables& t = twiddle_tables();
  return t.by_slot[0][group[0]] | t.by_slot[1][group[1]] | t.by_slot[2][group[2]] | t.by_slot[3][group[3]];
}

namespace {

// The 64 storage bytes of one (m0, t0, k0, s0): row r = 4*m0 + t0, columns 128*k0 + 64*s0 .. +64.
// They are 16 groups g = 4*t1 + kt whose four bytes are, with A = canonical row n = 16*m0 +
// 2*t0 + s0 and B = row n + 8, both from byte 32*k0: A[8kt+t1] B[8kt+t1] A[8kt+t1+4] B[8kt+t1+4].
// So one tile reads 32 bytes of two rows and writes 64 contiguous bytes; a tile past the end of
// the canonical rows or bytes reads zeros there (the padding, whose twiddle is zero).

// The pack tiles of one expert in storage order, each with its two source rows: a tile past the
// end of the canonical rows or bytes reads zeros there (the padding, whose twiddle is zero), from
// a zero row or a zero-filled copy of the row's tail. Shared by the portable and AVX2 paths
// (a plain class, so an AVX2 function can drive it without a lambda, which would not inherit
// its target).
class PackTiles {
 public:
  explicit PackTiles(const TensorView& canonical)
      : q_(canonical.bytes.data()),
        rows_(canonical.shape[0]),
        bytes_(canonical.shape[1]),
        prows_(round_up(rows_, TritonHopperMXValueLayout::kRowAlign)),
        pbytes_(round_up(bytes_, TritonHopperMXValueLayout::kByteAlign)) {}
  // The next tile: its rows A (n) and B (n + 8), 32 bytes each, and where its 64 stored bytes go.
  bool next(const uint8_t*& a, const uint8_t*& b, uint64_t& out_offset) {
    if (m0_ == prows_ / 16) return false;
    const uint64_t n = 16 * m0_ + 2 * t0_ + s0_, b0 = 32 * k0_;
    const uint64_t valid = std::min<uint64_t>(32, bytes_ - b0);
    a = row(n, b0, valid, a_tail_);
    b = row(n + 8, b0, valid, b_tail_);
    out_offset = (4 * m0_ + t0_) * pbytes_ * 4 + 128 * k0_ + 64 * s0_;
    // The next (m0, t0, k0, s0), s0 fastest.
    if (++s0_ < 2) return true;
    s0_ = 0;
    if (++k0_ < pbytes_ / 32) return true;
    k0_ = 0;
    if (++t0_ < 4) return true;
    t0_ = 0;
    ++m0_;
    return true;
  }

 private:
  const uint8_t* row(uint64_t r, uint64_t b0, uint64_t valid, uint8_t* tail) const {
    if (r >= rows_) return zeros_;
    if (valid == 32) return q_ + r * bytes_ + b0;
    std::memset(tail, 0, 32);
    std::memcpy(tail, q_ + r * bytes_ + b0, static_cast<size_t>(valid));
    return tail;
  }
  const uint8_t* q_;
  uint64_t rows_, bytes_, prows_, pbytes_;
  uint64_t m0_ = 0, t0_ = 0, k0_ = 0, s0_ = 0;
  alignas(32) uint8_t zeros_[32] = {};
  alignas(32) uint8_t a_tail_[32], b_tail_[32];
};

// Portable bulk path: the per-slot tables, tile by tile.
void pack_portable_impl(const TensorView& canonical, std::span<uint8_t> packed) {
  const TwiddleTables& t = twiddle_tables();
  PackTiles tiles(canonical);
  const uint8_t *A = nullptr, *B = nullptr;
  uint64_t offset = 0;
  while (tiles.next(A, B, offset)) {
    uint8_t* out = packed.data() + offset;
    for (int t1 = 0; t1 < 4; ++t1)
      for (int kt = 0; kt < 4; ++kt, out += 4) {
        const int i = 8 * kt + t1;
        const uint32_t word = t.by_slot[0][A[i]] | t.by_slot[1][B[i]] | t.by_slot[2][A[i + 4]] | t.by_slot[3][B[i + 4]];
        std::memcpy(out, &word, 4);  // little-endian storage (index_map.h asserts the host is)
      }
  }
}

// The inverse of pack_portable_impl, tile by tile: each stored word gives back the four bytes
// A[i] B[i] A[i+4] B[i+4]; bytes that land in padding (rows past N, bytes past Kb) are dropped.
void unpack_portable_impl(std::span<const uint8_t> packed, OwnedTensor& canonical) {
  using L = TritonHopperMXValueLayout;
  const uint64_t rows = canonical.shape[0], bytes = canonical.shape[1];
  const uint64_t prows = round_up(rows, L::kRowAlign), pbytes = round_up(bytes, L::kByteAlign), out_cols = pbytes * 4;
  uint8_t* q = canonical.bytes.data();
  const UntwiddleTables& u = untwiddle_tables();
  uint8_t a_tile[32], b_tile[32];
  for (uint64_t m0 = 0; m0 < prows / 16; ++m0)
    for (uint64_t t0 = 0; t0 < 4; ++t0)
      for (uint64_t k0 = 0; k0 < pbytes / 32; ++k0)
        for (uint64_t s0 = 0; s0 < 2; ++s0) {
          const uint64_t n = 16 * m0 + 2 * t0 + s0, b0 = 32 * k0;
          if (n >= rows) continue;  // both rows of the tile are padding (B = n + 8 > n)
          const uint64_t valid = std::min<uint64_t>(32, bytes - b0);
          const bool whole = valid == 32;
          uint8_t* A = whole ? q + n * bytes + b0 : a_tile;
          uint8_t* B = n + 8 < rows && whole ? q + (n + 8) * bytes + b0 : b_tile;
          const uint8_t* in = packed.data() + (4 * m0 + t0) * out_cols + 128 * k0 + 64 * s0;
          for (int t1 = 0; t1 < 4; ++t1)
            for (int kt = 0; kt < 4; ++kt, in += 4) {
              const int i = 8 * kt + t1;
              const uint32_t low = u.by_lane_byte[0][in[0]] | u.by_lane_byte[1][in[1]];
              const uint32_t high = u.by_lane_byte[0][in[2]] | u.by_lane_byte[1][in[3]];
              const uint32_t slots = low | (high << 4);
              A[i] = static_cast<uint8_t>(slots);
              B[i] = static_cast<uint8_t>(slots >> 8);
              A[i + 4] = static_cast<uint8_t>(slots >> 16);
              B[i + 4] = static_cast<uint8_t>(slots >> 24);
            }
          if (A == a_tile) std::memcpy(q + n * bytes + b0, a_tile, static_cast<size_t>(valid));
          if (B == b_tile && n + 8 < rows) std::memcpy(q + (n + 8) * bytes + b0, b_tile, static_cast<size_t>(valid));
        }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define MOEPACK_HOPPER_SIMD 1
// AVX-512 VBMI path: per tile, four vpermb gather the slots' bytes to their output positions,
// the nibble of each position's lane is selected (low nibbles for bytes 0-1 of a word, high for
// 2-3), and four vpermb lookups in 32-entry tables (lane byte 0 / lane byte 1 of a slot's
// contribution, built from kLaneBit) give the bytes, ORed together.
struct SimdTables {
  alignas(64) uint8_t gather[4][64];
  alignas(64) uint8_t lookup[4][64];
  SimdTables() {
    for (int p = 0; p < 64; ++p) {
      const int g = p / 4, kt = g % 4, t1 = g / 4, i = 8 * kt + t1;
      gather[0][p] = static_cast<uint8_t>(i);
      gather[1][p] = static_cast<uint8_t>(32 + i);
      gather[2][p] = static_cast<uint8_t>(i + 4);
      gather[3][p] = static_cast<uint8_t>(32 + i + 4);
    }
    for (int slot = 0; slot < 4; ++slot)
      for (int e = 0; e < 64; ++e) {
        const int half = (e / 16) % 2, v = e % 16;
        uint8_t nibbles[4] = {0, 0, 0, 0};
        nibbles[slot] = static_cast<uint8_t>(v);
        lookup[slot][e] = static_cast<uint8_t>(twiddle_lane(nibbles) >> (8 * half));
      }
  }
};
const SimdTables& simd_tables() {
  static const SimdTables tables;
  return tables;
}

// GCC 12's intrinsics pass an undefined vector as the pass-through of their unmasked forms,
// which -Wmaybe-uninitialized reports inside its own headers; nothing here reads one.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi"))) void pack_avx512_impl(const TensorView& canonical, std::span<uint8_t> packed) {
  using L = TritonHopperMXValueLayout;
  const uint64_t rows = canonical.shape[0], bytes = canonical.shape[1];
  const uint64_t prows = round_up(rows, L::kRowAlign), pbytes = round_up(bytes, L::kByteAlign), out_cols = pbytes * 4;
  const uint8_t* q = canonical.bytes.data();
  const SimdTables& st = simd_tables();
  __m512i gather[4], lookup[4];
  for (int s = 0; s < 4; ++s) {
    gather[s] = _mm512_load_si512(st.gather[s]);
    lookup[s] = _mm512_load_si512(st.lookup[s]);
  }
  const __mmask64 high_nibble = 0xCCCCCCCCCCCCCCCCull;   // bytes 2, 3 of every word: lane 1
  const __m512i odd_half = _mm512_set1_epi16(0x1000);    // bytes 1, 3: the second 16 table entries
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  for (uint64_t m0 = 0; m0 < prows / 16; ++m0)
    for (uint64_t t0 = 0; t0 < 4; ++t0) {
      uint8_t* out_row = packed.data() + (4 * m0 + t0) * out_cols;
      for (uint64_t k0 = 0; k0 < pbytes / 32; ++k0) {
        const uint64_t b0 = 32 * k0, valid = std::min<uint64_t>(32, bytes - b0);
        const __mmask32 mask = valid == 32 ? ~__mmask32{0} : static_cast<__mmask32>((1ull << valid) - 1);
        for (uint64_t s0 = 0; s0 < 2; ++s0) {
          const uint64_t n = 16 * m0 + 2 * t0 + s0;
          // Rows past the end read nothing (mask 0): zeros, as the padding is.
          const __m256i a = _mm256_maskz_loadu_epi8(n < rows ? mask : 0, q + std::min(n, rows - 1) * bytes + b0);
          const __m256i b = _mm256_maskz_loadu_epi8(n + 8 < rows ? mask : 0, q + std::min(n + 8, rows - 1) * bytes + b0);
          const __m512i in = _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
          __m512i word = _mm512_setzero_si512();
          for (int s = 0; s < 4; ++s) {
            const __m512i x = _mm512_permutexvar_epi8(gather[s], in);
            const __m512i nib = _mm512_and_si512(_mm512_mask_blend_epi8(high_nibble, x, _mm512_srli_epi16(x, 4)), low4);
            word = _mm512_or_si512(word, _mm512_permutexvar_epi8(_mm512_or_si512(nib, odd_half), lookup[s]));
          }
          _mm512_storeu_si512(out_row + 128 * k0 + 64 * s0, word);
        }
      }
    }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// AVX2 path, 32 output bytes (8 words) per register: the slot bytes each word needs are moved
// into place by a dword permute (the i = 8kt + t1 bytes of a tile sit in every other dword) and
// an in-lane byte shuffle that repeats each one 4 times; each position takes its low or high
// nibble (bytes 0-1 of a word: lane 0, the low nibbles; 2-3: lane 1), and two 16-entry lookups
// (the slot's contribution to a lane's byte 0 and byte 1, from the same tables as the VBMI path)
// give its bits, ORed over the four slots.
__attribute__((target("avx2"))) void pack_avx2_impl(const TensorView& canonical, std::span<uint8_t> packed) {
  const SimdTables& st = simd_tables();
  __m256i lookup_byte0[4], lookup_byte1[4];
  for (int s = 0; s < 4; ++s) {
    lookup_byte0[s] = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(st.lookup[s])));
    lookup_byte1[s] = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(st.lookup[s] + 16)));
  }
  const __m256i even_dwords = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6), odd_dwords = _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7);
  // Output register r (words 8r .. 8r + 7, t1 = 2r and 2r + 1): lane 0 repeats bytes t1 = 2r of
  // the permuted dwords, lane 1 those of t1 = 2r + 1.
  __m256i select[2];
  for (int r = 0; r < 2; ++r) {
    alignas(32) uint8_t idx[32];
    for (int p = 0; p < 32; ++p) idx[p] = static_cast<uint8_t>(4 * ((p % 16) / 4) + 2 * r + p / 16);
    select[r] = _mm256_load_si256(reinterpret_cast<const __m256i*>(idx));
  }
  alignas(32) uint8_t high_positions[32], odd_positions[32];
  for (int p = 0; p < 32; ++p) {
    high_positions[p] = (p % 4) >= 2 ? 0xFF : 0;
    odd_positions[p] = (p % 2) ? 0xFF : 0;
  }
  const __m256i high_lane = _mm256_load_si256(reinterpret_cast<const __m256i*>(high_positions));
  const __m256i odd_byte = _mm256_load_si256(reinterpret_cast<const __m256i*>(odd_positions));
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  PackTiles tiles(canonical);
  const uint8_t *row_a = nullptr, *row_b = nullptr;
  uint64_t offset = 0;
  while (tiles.next(row_a, row_b, offset)) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row_a));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row_b));
    // Slots: A[i], B[i], A[i + 4], B[i + 4]; i + 4 is the odd dword of i's.
    const __m256i slot_source[4] = {_mm256_permutevar8x32_epi32(a, even_dwords), _mm256_permutevar8x32_epi32(b, even_dwords),
                                    _mm256_permutevar8x32_epi32(a, odd_dwords), _mm256_permutevar8x32_epi32(b, odd_dwords)};
    uint8_t* out = packed.data() + offset;
    for (int r = 0; r < 2; ++r) {
      __m256i word = _mm256_setzero_si256();
      for (int s = 0; s < 4; ++s) {
        const __m256i x = _mm256_shuffle_epi8(slot_source[s], select[r]);
        const __m256i nib = _mm256_and_si256(_mm256_blendv_epi8(x, _mm256_srli_epi16(x, 4), high_lane), low4);
        word = _mm256_or_si256(word, _mm256_blendv_epi8(_mm256_shuffle_epi8(lookup_byte0[s], nib), _mm256_shuffle_epi8(lookup_byte1[s], nib), odd_byte));
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32 * r), word);
    }
  }
}

bool cpu_has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

bool cpu_has_vbmi() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512vbmi");
  return yes;
}
#else
bool cpu_has_vbmi() { return false; }
bool cpu_has_avx2() { return false; }
#endif

}  // namespace

bool TritonHopperMXValueLayout::simd_available() { return cpu_has_vbmi() || cpu_has_avx2(); }
bool TritonHopperMXValueLayout::avx2_available() { return cpu_has_avx2(); }

void TritonHopperMXValueLayout::pack_avx2(const TensorView& canonical, std::span<uint8_t> packed) const {
  expect_pack_args(canonical, packed);
#ifdef MOEPACK_HOPPER_SIMD
  if (cpu_has_avx2()) return pack_avx2_impl(canonical, packed);
#endif
  throw_internal("pack_avx2: this CPU has no AVX2");
}

void TritonHopperMXValueLayout::pack_portable(const TensorView& canonical, std::span<uint8_t> packed) const {
  expect_pack_args(canonical, packed);
  pack_portable_impl(canonical, packed);
}

void TritonHopperMXValueLayout::unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const {
  expect_unpack_args(packed, canonical);
  unpack_portable_impl(packed, canonical);
}

// Bulk path: whole 64-byte tiles, by AVX-512 VBMI or AVX2 where the CPU has it, else by table.
void TritonHopperMXValueLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  expect_pack_args(canonical, packed);
#ifdef MOEPACK_HOPPER_SIMD
  if (cpu_has_vbmi()) return pack_avx512_impl(canonical, packed);
  if (cpu_has_avx2()) return pack_avx2_impl(canonical, packed);
#endif
  pack_portable_impl(canonical, packed);
}

}  // namespace moepack::packers
