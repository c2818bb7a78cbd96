// How each packed CPU layout loads one step of a 32-row block (the policies lib/experts/cpu_gemm.h
// describes), and the row-block loop that runs them. The layouts themselves are drawn in the
// packer files; the offsets below are their index maps read at one block and step:
//   mxfp4       packers/cpu_sgl_mxfp4.h (convert_weight_packed, uint8 branch; convert_scale_packed)
//   bf16_amx    packers/cpu_prepack_moe.h (MicroGemm<AMX>::pack_weight: [O/16][K/2][16][2])
//   bf16_vec    packers/cpu_prepack_moe.h (MicroGemm<VEC>::pack_weight: [O/16][K][16])
//   fp8_block   packers/cpu_sgl_mxfp4.h (convert_weight_packed, E4M3: pack_vnni [K/2][32][2])
//   int8_vnni4  packers/cpu_sgl_mxfp4.h (convert_weight_packed, int8: pack_vnni<int8_t>
//               [K/4][32][4] then 32 int32 compensation sums, which BF16 arithmetic does not need)
//   int4_vnni4  packers/cpu_sgl_int4.h (convert_int4_weight_packed_with_compensation: codes of
//               two rows per byte in VNNI-4 quads, per block_k columns; scales and zero points
//               [N/32][G][32])
#include "lib/core/codecs.h"
#include "lib/core/error.h"
#include "lib/experts/cpu_experts.h"
#include "lib/experts/cpu_gemm.h"

namespace moepack::experts::cpu {
namespace {

// ---- mxfp4: E2M1 nibbles, E8M0 scales per 32 columns ----------------------------------------
// Byte j of step s (32 bytes per step): low nibble row j/2, high nibble row 16 + j/2, column
// 2s + j%2. Widened to 16-bit lanes, the 32 low nibbles are rows 0-15 as (column, column+1)
// pairs: a 16-entry table lookup (vpermw) makes them BF16, and the high nibbles rows 16-31.

// E2M1 code -> BF16 bits (0, 0.5, 1, 1.5, 2, 3, 4, 6, then the negatives), twice: `vpermw`
// reads five index bits, so a word holding a whole byte (both nibbles) looks its low nibble up
// without masking the high one off: bit 4 only picks the second copy.
alignas(64) constexpr uint16_t kE2M1Bf16[32] = {0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0,
                                                0x8000, 0xBF00, 0xBF80, 0xBFC0, 0xC000, 0xC040, 0xC080, 0xC0C0,
                                                0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0,
                                                0x8000, 0xBF00, 0xBF80, 0xBFC0, 0xC000, 0xC040, 0xC080, 0xC0C0};

// E2M1 code -> twice its value as an integer (0, 1, 2, 3, 4, 6, 8, 12, then the negatives), the
// weights of the Int16Rows decodes: as words twice over for `vpermw` (as kE2M1Bf16), and as
// bytes twice over for `vpshufb` (one copy per 128-bit lane).
alignas(64) constexpr int16_t kE2M1TwiceWords[32] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,
                                                     0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
alignas(32) constexpr int8_t kE2M1TwiceBytes[32] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,
                                                    0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// Word j of a 32-row register pair's half h is row 16h + j/2 (each 32-bit lane one row's column
// pair): the index of that row's word among 32 per-row words.
alignas(64) constexpr uint16_t kRowPairWords[2][32] = {{0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15},
                                                       {16, 16, 17, 17, 18, 18, 19, 19, 20, 20, 21, 21, 22, 22, 23, 23,
                                                        24, 24, 25, 25, 26, 26, 27, 27, 28, 28, 29, 29, 30, 30, 31, 31}};

MOEPACK_AVX512F_INLINE __m512 e8m0_to_ps(__m128i bytes) {
  // 2^(s-127) is the float with exponent field s: s << 23. s = 0 is 2^-127 (a subnormal,
  // 0x00400000) and s = 255 is NaN.
  const __m512i s = _mm512_cvtepu8_epi32(bytes);
  __m512i bits = _mm512_slli_epi32(s, 23);
  bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(s, _mm512_setzero_si512()), _mm512_set1_epi32(0x00400000));
  bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(s, _mm512_set1_epi32(255)), _mm512_set1_epi32(0x7FC00000));
  return _mm512_castsi512_ps(bits);
}

// The low 8 bytes of `bytes` as E8M0 scales.
MOEPACK_AVX2_INLINE __m256 e8m0_to_ps_avx2(__m128i bytes) {
  const __m256i v = _mm256_cvtepu8_epi32(bytes);
  __m256i bits = _mm256_slli_epi32(v, 23);
  bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x00400000), _mm256_cmpeq_epi32(v, _mm256_setzero_si256()));
  bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x7FC00000), _mm256_cmpeq_epi32(v, _mm256_set1_epi32(255)));
  return _mm256_castsi256_ps(bits);
}
MOEPACK_AVX2_INLINE __m256 e8m0_to_ps_avx2(const uint8_t* s) { return e8m0_to_ps_avx2(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s))); }

struct Mxfp4Tiles {
  static constexpr uint64_t kStepK = 2, kGroupSteps = 16, kChunkSteps = 128;
  static constexpr uint64_t kStepBytes = 32;  // half a cache line
  static constexpr int kVecs = 2;
  static constexpr bool kScaled = true, kDirect = false, kAmxDirect = false;
  const uint8_t* w;  // the block's bytes: [k/2][32]
  const uint8_t* s;  // the block's scales: [k/32][32]
  Mxfp4Tiles(const Gemm& g, uint64_t nb)
      : w(g.w + nb * kBlockRows * (g.k / 2)), s(static_cast<const uint8_t*>(g.scale) + nb * kBlockRows * (g.k / 32)) {}

  MOEPACK_AVX512_BF16_INLINE void load(uint64_t step, __m512bh* out) const {
    __m512i words[2];
    decode_words(step, words);
    out[0] = (__m512bh)words[0], out[1] = (__m512bh)words[1];
  }
  MOEPACK_AVX512_BF16_INLINE void decode_words(uint64_t step, __m512i* words) const {
    const __m512i lut = _mm512_load_si512(kE2M1Bf16);
    const __m512i wide = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + step * kBlockRows)));
    words[0] = _mm512_permutexvar_epi16(wide, lut);  // index bit 4 (the high nibble's bit 0) picks the table's copy
    words[1] = _mm512_permutexvar_epi16(_mm512_srli_epi16(wide, 4), lut);
  }

  // Prescaling (cpu_gemm.h, Prescales): an E8M0 scale 2^(e - 127) applied to a decoded BF16
  // weight is (e - 127) added to its exponent field. E2M1's nonzero magnitudes (0.5 to 6) have
  // fields 126 to 129, so for e in [kPrescaleLow, kPrescaleHigh] every scaled weight is an
  // exact BF16 normal and each product w·s·x is exactly s·(w·x): the chunk's sums then differ
  // from the folded ones only in where they round, not in what they add, unless a product or
  // sum leaves FP32's normal range. Held to scales of 2^±64, that needs activations below 2^-60
  // or above 2^40 in magnitude, while real checkpoints' scales (about 2^-20 to 2^5) always
  // prescale; a chunk with a scale outside the range (NaN = 255 included) is folded.
  static constexpr uint8_t kPrescaleLow = 127 - 64, kPrescaleHigh = 127 + 64;
  bool prescale_is_exact(uint64_t g0, uint64_t g1) const {
    uint8_t low = 255, high = 0;
    for (const uint8_t* p = s + g0 * kBlockRows; p < s + g1 * kBlockRows; ++p) low = std::min(low, *p), high = std::max(high, *p);
    return low >= kPrescaleLow && high <= kPrescaleHigh;
  }
  // Group g's exponent changes as BF16 words: delta[h] holds rows 16h..16h+15, each row's
  // twice (its column pair), as load() lays the rows out.
  MOEPACK_AVX512_BF16_INLINE void exponent_deltas(uint64_t g, __m512i* delta) const {
    const __m512i e = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + g * kBlockRows)));
    const __m512i d = _mm512_slli_epi16(_mm512_sub_epi16(e, _mm512_set1_epi16(127)), 7);
    delta[0] = _mm512_permutexvar_epi16(_mm512_load_si512(kRowPairWords[0]), d);
    delta[1] = _mm512_permutexvar_epi16(_mm512_load_si512(kRowPairWords[1]), d);
  }
  // load() with the group's scales applied; zeros (0x0000, 0x8000) stay as they are.
  MOEPACK_AVX512_BF16_INLINE void load_prescaled(uint64_t step, const __m512i* delta, __m512bh* out) const {
    __m512i words[2];
    decode_words(step, words);
    const __m512i magnitude = _mm512_set1_epi16(0x7FFF);
    for (int h = 0; h < 2; ++h) out[h] = (__m512bh)_mm512_mask_add_epi16(words[h], _mm512_test_epi16_mask(words[h], magnitude), words[h], delta[h]);
  }
  MOEPACK_AVX512_BF16_INLINE static void rows(const __m512* acc, __m512* r) { r[0] = acc[0], r[1] = acc[1]; }
  // The cache line of a step ahead (two 32-byte steps to a line; past the block: the next one).
  MOEPACK_PREFETCH_INLINE void prefetch(uint64_t step) const {
    if (step % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(w + step * kBlockRows), _MM_HINT_T0);
  }
  MOEPACK_AVX512_BF16_INLINE void scale(uint64_t g, __m512* sc) const {
    sc[0] = e8m0_to_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + g * kBlockRows)));
    sc[1] = e8m0_to_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + g * kBlockRows + 16)));
  }

  // Octet o: rows 8o..8o+7 are low nibbles (o < 2) or high nibbles (o >= 2) of bytes
  // 16(o%2)..16(o%2)+15; vector j holds rows 8o+4j..8o+4j+3.
  MOEPACK_AVX2_INLINE __m256 load8(uint64_t step, int o, int j) const {
    const __m256i bytes = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w + step * kBlockRows + 16 * (o % 2) + 8 * j)));
    const __m256i codes = _mm256_and_si256(o >= 2 ? _mm256_srli_epi32(bytes, 4) : bytes, _mm256_set1_epi32(0x0F));
    // Magnitude from an 8-entry table (vpermps reads the low three index bits), sign from bit 3.
    const __m256 mag = _mm256_permutevar8x32_ps(_mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f), codes);
    return _mm256_xor_ps(mag, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(codes, _mm256_set1_epi32(8)), 28)));
  }
  MOEPACK_AVX2_INLINE __m256 scale8(uint64_t g, int o) const { return e8m0_to_ps_avx2(s + g * kBlockRows + 8 * o); }
  // 16 lanes: bytes 0-15 of a step are rows 0-7 as column pairs, bytes 16-31 rows 8-15 (their
  // low nibbles: half 0; high nibbles: half 1). vpermps reads an index's low four bits, the
  // whole E2M1 code: a 16-entry table gives value and sign at once (code 8 is -0, as load8's
  // sign xor makes it).
  MOEPACK_AVX512F_INLINE void load16(uint64_t step, int h, __m512* c) const {
    const __m512 values = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f);
    const uint8_t* p = w + step * kBlockRows;
    __m512i a = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)));
    if (h == 1) a = _mm512_srli_epi32(a, 4), b = _mm512_srli_epi32(b, 4);
    pairs_to_panel16(_mm512_permutexvar_ps(a, values), _mm512_permutexvar_ps(b, values), c);
  }
  MOEPACK_AVX512F_INLINE __m512 scale16(uint64_t g, int h) const { return e8m0_to_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + g * kBlockRows + 16 * h))); }

  // One token on AVX2 (decode, bound by the bytes read): a step's 32 bytes are decoded whole in
  // registers, never stored. Byte tables (vpshufb) give each code's BF16 bits as a high and a
  // low byte; interleaved, they are words, two to a 32-bit lane: the high word (column 2s + 1)
  // is that lane's float once the low word is masked off, and the low word (column 2s) once it
  // is shifted up. Masks and shifts instead of a second round of unpacks (16 shuffles a step
  // before, 8 now: shuffles were the bound on Zen 3, whose FMA units share a port with them).
  // Within each 128-bit lane the unpacks keep the bytes' order, so float register q of a
  // nibble half holds rows (4q..4q+3 | 8+4q..11+4q) (the high nibbles: the same rows + 16), one
  // column each; eight accumulators, one per register and column, are as many FMA chains as the
  // FMA units keep in flight. Each scale group's two column sums are added per row and scaled
  // once, in group order: the same sums as a row's products added column by column.
  // The next steps are prefetched 2 KiB ahead: with two cores decoding, the hardware
  // prefetcher alone left 10-15% of the rate on the table (measured on Zen 3).
  MOEPACK_AVX2_INLINE bool avx2_one_token(const float* x, uint64_t steps, float* out) const {
    constexpr uint64_t kPrefetchBytes = kOneTokenAheadBytes;
    const __m256i nibble = _mm256_set1_epi8(0x0F), high_word = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
    const __m256i high_bytes = _mm256_setr_epi8(0x00, 0x3F, 0x3F, 0x3F, 0x40, 0x40, 0x40, 0x40, char(0x80), char(0xBF), char(0xBF), char(0xBF),
                                                char(0xC0), char(0xC0), char(0xC0), char(0xC0), 0x00, 0x3F, 0x3F, 0x3F, 0x40, 0x40, 0x40, 0x40,
                                                char(0x80), char(0xBF), char(0xBF), char(0xBF), char(0xC0), char(0xC0), char(0xC0), char(0xC0));
    const __m256i low_bytes = _mm256_setr_epi8(0x00, 0x00, char(0x80), char(0xC0), 0x00, 0x40, char(0x80), char(0xC0), 0x00, 0x00, char(0x80), char(0xC0),
                                               0x00, 0x40, char(0x80), char(0xC0), 0x00, 0x00, char(0x80), char(0xC0), 0x00, 0x40, char(0x80), char(0xC0),
                                               0x00, 0x00, char(0x80), char(0xC0), 0x00, 0x40, char(0x80), char(0xC0));
    __m256 total[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};  // rows [0-3|8-11], [4-7|12-15], +16
    for (uint64_t g0 = 0; g0 < steps; g0 += kGroupSteps) {
      __m256 acc[4][2];  // [2 half + q][column]
      for (auto& a : acc) a[0] = a[1] = _mm256_setzero_ps();
      for (uint64_t st = g0; st < g0 + kGroupSteps; ++st) {
        const uint8_t* step = w + st * kBlockRows;
        _mm_prefetch(reinterpret_cast<const char*>(step + kPrefetchBytes), _MM_HINT_T0);
        const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(step));
        const __m256 x0 = _mm256_broadcast_ss(x + 2 * st), x1 = _mm256_broadcast_ss(x + 2 * st + 1);
        const __m256i codes[2] = {_mm256_and_si256(bytes, nibble), _mm256_and_si256(_mm256_srli_epi16(bytes, 4), nibble)};
        for (int half = 0; half < 2; ++half) {
          const __m256i hi = _mm256_shuffle_epi8(high_bytes, codes[half]), lo = _mm256_shuffle_epi8(low_bytes, codes[half]);
          const __m256i words[2] = {_mm256_unpacklo_epi8(lo, hi), _mm256_unpackhi_epi8(lo, hi)};
          for (int q = 0; q < 2; ++q) {
            __m256* a = acc[2 * half + q];
            a[0] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(words[q], 16)), x0, a[0]);
            a[1] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(words[q], high_word)), x1, a[1]);
          }
        }
      }
      // Scales of rows (0-3 | 8-11) and (4-7 | 12-15) of each half: dwords 0, 2 and 1, 3 of its 16 bytes.
      const uint8_t* sg = s + (g0 / kGroupSteps) * kBlockRows;
      for (int half = 0; half < 2; ++half) {
        const __m128i q = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sg + 16 * half)), _MM_SHUFFLE(3, 1, 2, 0));
        const __m256 sc[2] = {e8m0_to_ps_avx2(q), e8m0_to_ps_avx2(_mm_unpackhi_epi64(q, q))};
        for (int j = 0; j < 2; ++j)
          total[2 * half + j] = _mm256_fmadd_ps(_mm256_add_ps(acc[2 * half + j][0], acc[2 * half + j][1]), sc[j], total[2 * half + j]);
      }
    }
    for (int half = 0; half < 2; ++half) {
      _mm256_storeu_ps(out + 16 * half, _mm256_permute2f128_ps(total[2 * half], total[2 * half + 1], 0x20));
      _mm256_storeu_ps(out + 16 * half + 8, _mm256_permute2f128_ps(total[2 * half], total[2 * half + 1], 0x31));
    }
    return true;  // every E2M1 code is finite
  }

  // One token on AVX2 from Int16Rows (cpu_gemm.h): the same 32 bytes a step, the same row order
  // and scale handling as avx2_one_token, but each nibble half is one byte table lookup of twice
  // the E2M1 value, interleaved above zero bytes into words (256 times that: the high byte) and
  // multiplied by the step's two int16 activations with pmaddwd, each 32-bit lane a row's two
  // columns summed exactly. 17 vector instructions a step where the FP32 decode takes 27. A
  // group's int32 sums stay below 2^31 (16 steps of two products of at most 12·256 and 2^14).
  // Each group's sum becomes a float once, times the block's unit over 512 (the doubling and the
  // high byte), which gives the same bits as the AVX-512F decode's sum times unit/2.
  template <bool Vnni>
  MOEPACK_AVX2_INLINE void avx2_one_token_int16(const int16_t* q, const float* unit, uint64_t steps, float* out) const {
    static_assert(kGroupSteps * kStepK == kInt16Block, "a scale group is one block of the int16 activations");
    constexpr uint64_t kPrefetchBytes = kOneTokenAheadBytes;
    const __m256i nibble = _mm256_set1_epi8(0x0F), zero = _mm256_setzero_si256();
    const __m256i twice = _mm256_load_si256(reinterpret_cast<const __m256i*>(kE2M1TwiceBytes));
    __m256 total[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};  // rows [0-3|8-11], [4-7|12-15], +16
    for (uint64_t g0 = 0; g0 < steps; g0 += kGroupSteps) {
      __m256i acc[4] = {zero, zero, zero, zero};  // [2 half + q]
      for (uint64_t st = g0; st < g0 + kGroupSteps; ++st) {
        const uint8_t* step = w + st * kBlockRows;
        _mm_prefetch(reinterpret_cast<const char*>(step + kPrefetchBytes), _MM_HINT_T0);
        const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(step));
        int32_t pair;
        std::memcpy(&pair, q + 2 * st, 4);
        const __m256i xq = _mm256_set1_epi32(pair);
        const __m256i codes[2] = {_mm256_and_si256(bytes, nibble), _mm256_and_si256(_mm256_srli_epi16(bytes, 4), nibble)};
        for (int half = 0; half < 2; ++half) {
          const __m256i v = _mm256_shuffle_epi8(twice, codes[half]);
          acc[2 * half] = add_products<Vnni>(acc[2 * half], _mm256_unpacklo_epi8(zero, v), xq);
          acc[2 * half + 1] = add_products<Vnni>(acc[2 * half + 1], _mm256_unpackhi_epi8(zero, v), xq);
        }
      }
      const __m256 u = _mm256_set1_ps(unit[g0 / kGroupSteps] * 0x1p-9f);
      const uint8_t* sg = s + (g0 / kGroupSteps) * kBlockRows;
      for (int half = 0; half < 2; ++half) {
        const __m128i qs = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sg + 16 * half)), _MM_SHUFFLE(3, 1, 2, 0));
        const __m256 sc[2] = {e8m0_to_ps_avx2(qs), e8m0_to_ps_avx2(_mm_unpackhi_epi64(qs, qs))};
        for (int j = 0; j < 2; ++j)
          total[2 * half + j] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(acc[2 * half + j]), u), sc[j], total[2 * half + j]);
      }
    }
    for (int half = 0; half < 2; ++half) {
      _mm256_storeu_ps(out + 16 * half, _mm256_permute2f128_ps(total[2 * half], total[2 * half + 1], 0x20));
      _mm256_storeu_ps(out + 16 * half + 8, _mm256_permute2f128_ps(total[2 * half], total[2 * half + 1], 0x31));
    }
  }

  // One token on AVX-512F from Int16Rows: a step's 32 bytes widened to words and looked up as
  // twice their E2M1 values (vpermw, the low nibbles rows 0-15, the high ones rows 16-31, in
  // order), each 32-bit lane a row's two columns, multiplied by the step's two int16
  // activations and summed exactly in int32 (pmaddwd). 9 instructions a step where the FP32
  // decode below takes 13. Groups are scaled as in avx2_one_token_int16, with the same bits.
  template <bool Vnni>
  MOEPACK_AVX512F_INLINE void avx512f_one_token_int16(const int16_t* q, const float* unit, uint64_t steps, float* out) const {
    constexpr uint64_t kPrefetchBytes = kOneTokenAheadBytes;
    const __m512i twice = _mm512_load_si512(kE2M1TwiceWords);
    __m512 total[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};  // rows 0-15, 16-31
    for (uint64_t g0 = 0; g0 < steps; g0 += kGroupSteps) {
      __m512i acc[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
      for (uint64_t st = g0; st < g0 + kGroupSteps; ++st) {
        if (st % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(w + st * kBlockRows + kPrefetchBytes), _MM_HINT_T0);
        const __m512i wide = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + st * kBlockRows)));
        int32_t pair;
        std::memcpy(&pair, q + 2 * st, 4);
        const __m512i xq = _mm512_set1_epi32(pair);
        acc[0] = add_products<Vnni>(acc[0], _mm512_permutexvar_epi16(wide, twice), xq);
        acc[1] = add_products<Vnni>(acc[1], _mm512_permutexvar_epi16(_mm512_srli_epi16(wide, 4), twice), xq);
      }
      const __m512 u = _mm512_set1_ps(unit[g0 / kGroupSteps] * 0.5f);
      const uint8_t* sg = s + (g0 / kGroupSteps) * kBlockRows;
      for (int half = 0; half < 2; ++half)
        total[half] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(acc[half]), u), e8m0_to_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sg + 16 * half))),
                                      total[half]);
    }
    _mm512_storeu_ps(out, total[0]);
    _mm512_storeu_ps(out + 16, total[1]);
  }

  // One token on AVX-512F (no BF16): a step's 32 bytes widened to words, each word one byte's
  // two codes; a 32-entry word table (vpermw) turns the low nibbles into BF16 words of rows 0-15
  // and the high nibbles into those of rows 16-31, each 32-bit lane one row's column pair (2s,
  // 2s + 1). Masked and shifted as in the AVX2 decode, the pair is two floats of 16 rows in
  // order. Two banks (step parity) keep eight FMA chains in flight; scale groups hold an even
  // number of steps.
  MOEPACK_AVX512F_INLINE bool avx512f_one_token(const float* x, uint64_t steps, float* out) const {
    static_assert(kGroupSteps % 2 == 0, "banks split a group's steps by parity");
    constexpr uint64_t kPrefetchBytes = kOneTokenAheadBytes;
    const __m512i lut = _mm512_load_si512(kE2M1Bf16);
    const __m512i high_word = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
    __m512 total[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};  // rows 0-15, 16-31
    for (uint64_t g0 = 0; g0 < steps; g0 += kGroupSteps) {
      __m512 acc[2][2][2];  // [bank][half][column]
      for (auto& bank : acc)
        for (auto& half : bank) half[0] = half[1] = _mm512_setzero_ps();
      for (uint64_t st = g0; st < g0 + kGroupSteps; st += 2) {
        _mm_prefetch(reinterpret_cast<const char*>(w + st * kBlockRows + kPrefetchBytes), _MM_HINT_T0);
        for (int bank = 0; bank < 2; ++bank) {
          const uint64_t step = st + bank;
          const __m512i wide = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + step * kBlockRows)));
          const __m512i words[2] = {_mm512_permutexvar_epi16(wide, lut), _mm512_permutexvar_epi16(_mm512_srli_epi16(wide, 4), lut)};
          const __m512 x0 = _mm512_set1_ps(x[2 * step]), x1 = _mm512_set1_ps(x[2 * step + 1]);
          for (int half = 0; half < 2; ++half) {
            __m512* a = acc[bank][half];
            a[0] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(words[half], 16)), x0, a[0]);
            a[1] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(words[half], high_word)), x1, a[1]);
          }
        }
      }
      const uint8_t* sg = s + (g0 / kGroupSteps) * kBlockRows;
      for (int half = 0; half < 2; ++half) {
        const __m512 sum = _mm512_add_ps(_mm512_add_ps(acc[0][half][0], acc[0][half][1]), _mm512_add_ps(acc[1][half][0], acc[1][half][1]));
        total[half] = _mm512_fmadd_ps(sum, e8m0_to_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sg + 16 * half))), total[half]);
      }
    }
    _mm512_storeu_ps(out, total[0]);
    _mm512_storeu_ps(out + 16, total[1]);
    return true;
  }

  float value(uint64_t r, uint64_t k) const {
    const uint8_t byte = w[(k / 2) * kBlockRows + 2 * (r % 16) + k % 2];
    return e2m1_to_float(r < 16 ? byte & 0xF : byte >> 4);
  }
  float scale_at(uint64_t r, uint64_t g) const { return e8m0_to_float(s[g * kBlockRows + r]); }
};

// Both BF16 layouts keep a block's two 16-row halves apart, each step one 64-byte line in each:
// the lines of `step`, or past the block's `steps` those of the next block (`block_words` on).
MOEPACK_PREFETCH_INLINE void prefetch_bf16_halves(const uint16_t* lo, const uint16_t* hi, uint64_t block_words, uint64_t steps, uint64_t step) {
  const uint64_t words = step < steps ? step * kBlockRows : block_words + (step - steps) * kBlockRows;
  _mm_prefetch(reinterpret_cast<const char*>(lo + words), _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(hi + words), _MM_HINT_T0);
}

// ---- bf16_amx: BF16 pairs in 16-row groups, no scale -----------------------------------------
// Group g of 16 rows starts at element 16gK; step s of it is 16 words (64 bytes) at 32s: word o
// holds row o's columns 2s, 2s+1 — a VNNI-2 operand as it lies. A block is groups 2nb, 2nb+1.
struct Bf16AmxTiles {
  static constexpr uint64_t kStepK = 2, kGroupSteps = 0;
  static constexpr uint64_t kStepBytes = 128;  // a line in each half
  static constexpr int kVecs = 2;
  static constexpr bool kScaled = false, kDirect = true, kAmxDirect = true;
  const uint16_t* lo;  // rows 0-15 of the block
  const uint16_t* hi;  // rows 16-31
  Bf16AmxTiles(const Gemm& g, uint64_t nb)
      : lo(reinterpret_cast<const uint16_t*>(g.w) + nb * kBlockRows * g.k), hi(lo + kBlockRows / 2 * g.k), block_words(kBlockRows * g.k), steps(g.k / 2) {}

  MOEPACK_AVX512_BF16_INLINE void load(uint64_t step, __m512bh* out) const {
    out[0] = (__m512bh)_mm512_loadu_si512(lo + step * kBlockRows);
    out[1] = (__m512bh)_mm512_loadu_si512(hi + step * kBlockRows);
  }
  // AMX: 16 consecutive steps of a half are one B tile (16 rows of 64 bytes) as they lie.
  const uint8_t* tile_rows(int half, uint64_t step) const { return reinterpret_cast<const uint8_t*>((half ? hi : lo) + step * kBlockRows); }
  // The next block's lines of this step (its halves start 32k words further), fetched while the
  // token tiles after the first read this block from L2.
  uint64_t block_words = 0, steps = 0;
  MOEPACK_PREFETCH_INLINE void prefetch_next_block(uint64_t step) const {
    _mm_prefetch(reinterpret_cast<const char*>(lo + block_words + step * kBlockRows), _MM_HINT_T1);
    _mm_prefetch(reinterpret_cast<const char*>(hi + block_words + step * kBlockRows), _MM_HINT_T1);
  }
  // The panel kernels' look-ahead: a step's line in each half (past the block: the next one's).
  MOEPACK_PREFETCH_INLINE void prefetch(uint64_t step) const { prefetch_bf16_halves(lo, hi, block_words, steps, step); }
  MOEPACK_AVX512_BF16_INLINE static void rows(const __m512* acc, __m512* r) { r[0] = acc[0], r[1] = acc[1]; }
  MOEPACK_AVX512_BF16_INLINE void scale(uint64_t, __m512*) const {}

  // Vector j of octet o: rows 8o+4j..+3, i.e. words 8(2(o%2)+j).. of group o/2.
  MOEPACK_AVX2_INLINE __m256 load8(uint64_t step, int o, int j) const {
    const uint16_t* p = (o < 2 ? lo : hi) + step * kBlockRows + 8 * (2 * (o % 2) + j);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
  }
  MOEPACK_AVX2_INLINE __m256 scale8(uint64_t, int) const { return _mm256_set1_ps(1.0f); }

  float value(uint64_t r, uint64_t k) const { return bf16_to_float((r < 16 ? lo : hi)[(k / 2) * kBlockRows + 2 * (r % 16) + k % 2]); }
  float scale_at(uint64_t, uint64_t) const { return 1.0f; }
};

// ---- bf16_vec: BF16 columns in 16-row groups, no scale ---------------------------------------
// vLLM's vec prepack (x86 without AMX): group g of 16 rows is [K][16] at element 16gK, so step s
// (columns 2s, 2s+1) is 32 contiguous words: rows 0-15 at column 2s, then at column 2s+1. One
// word permute per group interleaves them into (column 2s, 2s+1) pairs, the VNNI-2 operand.
struct Bf16VecTiles {
  static constexpr uint64_t kStepK = 2, kGroupSteps = 0, kChunkSteps = 128;  // AMX decodes the pairs by chunks
  static constexpr uint64_t kStepBytes = 128;  // a line in each half
  static constexpr int kVecs = 2;
  static constexpr bool kScaled = false, kDirect = true, kAmxDirect = false;
  const uint16_t* lo;  // rows 0-15 of the block: [k][16]
  const uint16_t* hi;  // rows 16-31
  uint64_t block_words, steps;
  Bf16VecTiles(const Gemm& g, uint64_t nb)
      : lo(reinterpret_cast<const uint16_t*>(g.w) + nb * kBlockRows * g.k), hi(lo + kBlockRows / 2 * g.k), block_words(kBlockRows * g.k), steps(g.k / 2) {}
  // A step is 64 bytes in each half, as in bf16_amx.
  MOEPACK_PREFETCH_INLINE void prefetch(uint64_t step) const { prefetch_bf16_halves(lo, hi, block_words, steps, step); }

  MOEPACK_AVX512_BF16_INLINE void load(uint64_t step, __m512bh* out) const {
    const __m512i pairs = _mm512_setr_epi32(0x00100000, 0x00110001, 0x00120002, 0x00130003, 0x00140004, 0x00150005, 0x00160006, 0x00170007,
                                            0x00180008, 0x00190009, 0x001A000A, 0x001B000B, 0x001C000C, 0x001D000D, 0x001E000E, 0x001F000F);
    out[0] = (__m512bh)_mm512_permutexvar_epi16(pairs, _mm512_loadu_si512(lo + step * kBlockRows));
    out[1] = (__m512bh)_mm512_permutexvar_epi16(pairs, _mm512_loadu_si512(hi + step * kBlockRows));
  }
  MOEPACK_AVX512_BF16_INLINE static void rows(const __m512* acc, __m512* r) { r[0] = acc[0], r[1] = acc[1]; }
  MOEPACK_AVX512_BF16_INLINE void scale(uint64_t, __m512*) const {}

  // Vector j of octet o: rows 8o+4j..+3, i.e. rows 8(o%2)+4j.. of group o/2, both columns.
  MOEPACK_AVX2_INLINE __m256 load8(uint64_t step, int o, int j) const {
    const uint16_t* p = (o < 2 ? lo : hi) + step * kBlockRows + 8 * (o % 2) + 4 * j;
    const __m128i pairs = _mm_unpacklo_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)), _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 16)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(pairs), 16));
  }
  MOEPACK_AVX2_INLINE __m256 scale8(uint64_t, int) const { return _mm256_set1_ps(1.0f); }
  // 16 lanes: half h's step is its two columns, 16 words each in row order.
  MOEPACK_AVX512F_INLINE void load16(uint64_t step, int h, __m512* c) const {
    const uint16_t* p = (h == 0 ? lo : hi) + step * kBlockRows;
    for (int j = 0; j < 2; ++j) {
      const __m512i words = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * j)));
      c[j] = _mm512_permutexvar_ps(panel_order16<kStepK>(), _mm512_castsi512_ps(_mm512_slli_epi32(words, 16)));
    }
  }

  float value(uint64_t r, uint64_t k) const { return bf16_to_float((r < 16 ? lo : hi)[k * (kBlockRows / 2) + r % 16]); }
  float scale_at(uint64_t, uint64_t) const { return 1.0f; }
};

// ---- fp8_block: E4M3 pairs in 32-row blocks, fp32 scales per 128 x 128 -----------------------
// Step s of block nb is 64 bytes at 32nb·K + 64s: byte 2n + d is row n, column 2s + d. A block's
// 32 rows lie in one 128-row scale block, so each 128-column group has one scale for all of them.

// BF16 bits of the E4M3 magnitude code c (0..127), exactly: every E4M3 value is a BF16 value.
// Normal codes (exponent field e > 0) are 1.m · 2^(e-7): BF16 exponent e + 120, mantissa m << 4,
// i.e. (c << 4) + (120 << 7). Subnormals (e = 0) are m · 2^-9. 0x7F is NaN.
constexpr uint16_t e4m3_magnitude_bf16(unsigned c) {
  if (c == 0x7F) return 0x7FC0;
  if (c >= 8) return static_cast<uint16_t>((c << 4) + (120u << 7));
  if (c == 0) return 0;
  unsigned shift = 0;  // normalize m · 2^-9: m = 1.f · 2^p with p = 0, 1 or 2
  while ((c << shift) < 4) ++shift;
  const unsigned p = 2 - shift, frac = ((c << shift) & 3) << 5;  // the bits below the leading one
  return static_cast<uint16_t>(((127 - 9 + p) << 7) | frac);
}
// The table as two byte tables (high and low bytes of the BF16 bits), 128 entries each: one
// vpermi2b looks up 64 codes in each (its index reads 7 bits, so the sign bit is ignored).
struct E4m3Tables {
  alignas(64) uint8_t hi[128];
  alignas(64) uint8_t lo[128];
};
constexpr E4m3Tables make_e4m3_tables() {
  E4m3Tables t{};
  for (unsigned c = 0; c < 128; ++c) {
    t.hi[c] = static_cast<uint8_t>(e4m3_magnitude_bf16(c) >> 8);
    t.lo[c] = static_cast<uint8_t>(e4m3_magnitude_bf16(c) & 0xFF);
  }
  return t;
}
constexpr E4m3Tables kE4m3Bf16 = make_e4m3_tables();
static_assert(e4m3_magnitude_bf16(1) == 0x3B00 && e4m3_magnitude_bf16(7) == 0x3C60 && e4m3_magnitude_bf16(8) == 0x3C80 && e4m3_magnitude_bf16(0x7E) == 0x43E0,
              "2^-9, 7 · 2^-9, 2^-6, 448");

// 8 E4M3 bytes -> 8 floats, exactly (the same rules, subnormals as m · 2^-9). The 7 magnitude
// bits put at FP32's exponent and mantissa places (<< 20) are the value times 2^-120, normals
// and subnormals alike (E4M3's exponent bias is 7, FP32's 127), so one multiply by 2^120 makes
// every one exact; then NaN (0x7F) and the sign. 9 instructions where adding the bias to
// normals and converting subnormals apart took 14: the panel decodes run this for every weight.
MOEPACK_AVX2_INLINE __m256 e4m3_to_ps_avx2(const uint8_t* p) {
  const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  const __m256i mag = _mm256_and_si256(b, _mm256_set1_epi32(0x7F));
  __m256 v = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(mag, 20)), _mm256_set1_ps(0x1p120f));
  v = _mm256_blendv_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)), _mm256_castsi256_ps(_mm256_cmpeq_epi32(mag, _mm256_set1_epi32(0x7F))));
  return _mm256_or_ps(v, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x80)), 24)));
}

// e4m3_to_ps_avx2 on 16 bytes (AVX-512F: no DQ, so the sign goes in with an integer or).
MOEPACK_AVX512F_INLINE __m512 e4m3_to_ps16(const uint8_t* p) {
  const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m512i mag = _mm512_and_si512(b, _mm512_set1_epi32(0x7F));
  __m512 v = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(mag, 20)), _mm512_set1_ps(0x1p120f));
  v = _mm512_mask_mov_ps(v, _mm512_cmpeq_epi32_mask(mag, _mm512_set1_epi32(0x7F)), _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)));
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(v), _mm512_slli_epi32(_mm512_and_si512(b, _mm512_set1_epi32(0x80)), 24)));
}

// The AVX-512 load looks the 64 bytes of a step up whole: high and low bytes of each value's
// BF16 bits from the tables, the sign bit put back, then bytes interleaved into words within
// each 128-bit lane. Lane L of the first register holds the values of bytes 16L..16L+7 (rows
// 8L..8L+3), of the second bytes 16L+8..16L+15 (rows 8L+4..8L+7): the rows come permuted, and
// rows() puts the sums back in order (the scale is one per block, so it needs no permuting).
struct Fp8BlockTiles {
  static constexpr uint64_t kStepK = 2, kGroupSteps = kCpuFp8Block / 2, kChunkSteps = 128;
  static constexpr uint64_t kStepBytes = 64;
  static constexpr int kVecs = 2;
  static constexpr bool kScaled = true, kDirect = false, kAmxDirect = false;
  const uint8_t* w;      // the block's bytes: [k/2][32][2]
  const float* scales;   // the scale row of the block's 128 rows: [ceil(k/128)]
  Fp8BlockTiles(const Gemm& g, uint64_t nb)
      : w(g.w + nb * kBlockRows * g.k),
        scales(static_cast<const float*>(g.scale) + (nb * kBlockRows / kCpuFp8Block) * ((g.k + kCpuFp8Block - 1) / kCpuFp8Block)) {}

  MOEPACK_AVX512_BF16_INLINE void load(uint64_t step, __m512bh* out) const {
    const __m512i b = _mm512_loadu_si512(w + step * 2 * kBlockRows);
    __m512i hi = _mm512_permutex2var_epi8(_mm512_load_si512(kE4m3Bf16.hi), b, _mm512_load_si512(kE4m3Bf16.hi + 64));
    const __m512i lo = _mm512_permutex2var_epi8(_mm512_load_si512(kE4m3Bf16.lo), b, _mm512_load_si512(kE4m3Bf16.lo + 64));
    hi = _mm512_ternarylogic_epi32(hi, b, _mm512_set1_epi8(static_cast<char>(0x80)), 0xF8);  // hi | (b & 0x80)
    out[0] = (__m512bh)_mm512_unpacklo_epi8(lo, hi);
    out[1] = (__m512bh)_mm512_unpackhi_epi8(lo, hi);
  }
  MOEPACK_AVX512_BF16_INLINE static void rows(const __m512* acc, __m512* r) {
    // rows 0-15: lanes 0 and 1 of each register, alternating; rows 16-31: lanes 2 and 3.
    r[0] = _mm512_permutex2var_ps(acc[0], _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23), acc[1]);
    r[1] = _mm512_permutex2var_ps(acc[0], _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31), acc[1]);
  }
  MOEPACK_AVX512_BF16_INLINE void scale(uint64_t g, __m512* sc) const { sc[0] = sc[1] = _mm512_set1_ps(scales[g]); }
  MOEPACK_PREFETCH_INLINE void prefetch(uint64_t step) const { _mm_prefetch(reinterpret_cast<const char*>(w + step * 2 * kBlockRows), _MM_HINT_T0); }  // one line a step

  // Vector j of octet o: rows 8o+4j..+3, bytes 8(2o+j)..+7 of the step.
  MOEPACK_AVX2_INLINE __m256 load8(uint64_t step, int o, int j) const { return e4m3_to_ps_avx2(w + step * 2 * kBlockRows + 8 * (2 * o + j)); }
  MOEPACK_AVX2_INLINE __m256 scale8(uint64_t g, int) const { return _mm256_set1_ps(scales[g]); }
  // 16 lanes: half h's 32 bytes, rows 16h..16h+7 then 16h+8..16h+15 as column pairs.
  MOEPACK_AVX512F_INLINE void load16(uint64_t step, int h, __m512* c) const {
    const uint8_t* p = w + step * 2 * kBlockRows + 32 * h;
    pairs_to_panel16(e4m3_to_ps16(p), e4m3_to_ps16(p + 16), c);
  }
  MOEPACK_AVX512F_INLINE __m512 scale16(uint64_t g, int) const { return _mm512_set1_ps(scales[g]); }

  // One token on AVX2 (decode): each 32-byte half of a step (rows 0-15, then 16-31) decoded
  // whole. Widened to words (the byte in the high half), E4M3's sign and 7 magnitude bits are
  // moved to BF16's places: sign stays at bit 15, magnitude shifted right by 4, so the float
  // with those top 16 bits is the value times 2^-120, which one multiply by 2^120 makes exact
  // (E4M3 subnormals are then FP32 subnormals, and the multiply restores them too). The rows
  // lie as in the MXFP4 decode: f[q] = rows (2q, 2q+1 | 8+2q, 9+2q) of the half, column pairs.
  // The NaN code (0x7F, 0xFF) would decode to 480: a block that holds one is run again by the
  // generic kernel, which decodes it as NaN. Returns false then.
  MOEPACK_AVX2_INLINE bool avx2_one_token(const float* x, uint64_t steps, float* out) const {
    const __m256i zero = _mm256_setzero_si256(), sign_and_magnitude = _mm256_set1_epi16(static_cast<short>(0x87F0));
    const __m256 two_to_120 = _mm256_set1_ps(0x1p120f);
    // The NaN codes are the largest byte as signed (0x7F) and as unsigned (0xFF): two running
    // maxima find them, checked once at the end.
    __m256i signed_max = _mm256_set1_epi8(-128), unsigned_max = zero;
    __m256 total[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};  // rows [0-3|8-11], [4-7|12-15], +16
    for (uint64_t g0 = 0; g0 < steps; g0 += kGroupSteps) {
      const uint64_t g1 = std::min(steps, g0 + kGroupSteps);
      __m256 acc[8];
      for (auto& a : acc) a = _mm256_setzero_ps();
      for (uint64_t st = g0; st < g1; ++st) {
        double pair;
        std::memcpy(&pair, x + 2 * st, 8);
        const __m256 xv = _mm256_castpd_ps(_mm256_set1_pd(pair));
        for (int half = 0; half < 2; ++half) {
          const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + st * 2 * kBlockRows + 32 * half));
          signed_max = _mm256_max_epi8(signed_max, bytes);
          unsigned_max = _mm256_max_epu8(unsigned_max, bytes);
          for (int p = 0; p < 2; ++p) {
            const __m256i words = p ? _mm256_unpackhi_epi8(zero, bytes) : _mm256_unpacklo_epi8(zero, bytes);
            // The byte in a word's high half shifted right by 4 with its sign copied: the sign
            // stays at bit 15, the magnitude moves to bits 4-10; the sign's copies are masked off.
            const __m256i bf16 = _mm256_and_si256(_mm256_srai_epi16(words, 4), sign_and_magnitude);
            for (int q = 0; q < 2; ++q) {
              const __m256i bits = q ? _mm256_unpackhi_epi16(zero, bf16) : _mm256_unpacklo_epi16(zero, bf16);
              const __m256 v = _mm256_mul_ps(_mm256_castsi256_ps(bits), two_to_120);
              acc[4 * half + 2 * p + q] = _mm256_fmadd_ps(v, xv, acc[4 * half + 2 * p + q]);
            }
          }
        }
      }
      const __m256 sc = _mm256_set1_ps(scales[g0 / kGroupSteps]);
      for (int j = 0; j < 4; ++j) total[j] = _mm256_fmadd_ps(_mm256_hadd_ps(acc[2 * j], acc[2 * j + 1]), sc, total[j]);
    }
    const __m256i nan_codes = _mm256_or_si256(_mm256_cmpeq_epi8(signed_max, _mm256_set1_epi8(0x7F)), _mm256_cmpeq_epi8(unsigned_max, _mm256_set1_epi8(-1)));
    if (!_mm256_testz_si256(nan_codes, nan_codes)) return false;
    for (int half = 0; half < 2; ++half) {
      _mm256_storeu_ps(out + 16 * half, _mm256_permute2f128_ps(total[2 * half], total[2 * half + 1], 0x20));
      _mm256_storeu_ps(out + 16 * half + 8, _mm256_permute2f128_ps(total[2 * half], total[2 * half + 1], 0x31));
    }
    return true;
  }

  // One token on AVX-512F (no BF16, no VBMI): each 32-byte half of a step (rows 0-15, then
  // 16-31) widened to words, word 2n + d being row n's column 2s + d. E4M3's sign and magnitude
  // are moved to BF16's places as in the AVX2 decode (the value times 2^-120, which one
  // multiply makes exact), and each 32-bit lane's two words become the row's two columns by
  // mask and shift: 16 rows in order per register. Two banks (step parity) keep eight FMA
  // chains in flight; groups hold an even number of steps (k is a multiple of 32). NaN codes
  // leave the block to the AVX2 kernels, as there.
  MOEPACK_AVX512F_INLINE bool avx512f_one_token(const float* x, uint64_t steps, float* out) const {
    constexpr uint64_t kPrefetchBytes = kOneTokenAheadBytes;
    const __m512i sign_and_magnitude = _mm512_set1_epi16(static_cast<short>(0x87F0));
    const __m512i high_word = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
    const __m512 two_to_120 = _mm512_set1_ps(0x1p120f);
    // NaN codes (0x7F, 0xFF): the largest byte as signed and as unsigned, as in the AVX2 decode.
    __m256i signed_max = _mm256_set1_epi8(-128), unsigned_max = _mm256_setzero_si256();
    __m512 total[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};  // rows 0-15, 16-31
    for (uint64_t g0 = 0; g0 < steps; g0 += kGroupSteps) {
      const uint64_t g1 = std::min(steps, g0 + kGroupSteps);
      __m512 acc[2][2][2];  // [bank][half][column]
      for (auto& bank : acc)
        for (auto& half : bank) half[0] = half[1] = _mm512_setzero_ps();
      for (uint64_t st = g0; st < g1; st += 2) {
        for (int bank = 0; bank < 2; ++bank) {
          const uint64_t step = st + bank;
          const uint8_t* bytes = w + step * 2 * kBlockRows;
          _mm_prefetch(reinterpret_cast<const char*>(bytes + kPrefetchBytes), _MM_HINT_T0);
          const __m512 x0 = _mm512_set1_ps(x[2 * step]), x1 = _mm512_set1_ps(x[2 * step + 1]);
          for (int half = 0; half < 2; ++half) {
            const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes + 32 * half));
            signed_max = _mm256_max_epi8(signed_max, raw);
            unsigned_max = _mm256_max_epu8(unsigned_max, raw);
            // each byte to a word's high half, then shifted right by 4 with its sign copied
            const __m512i bf16 = _mm512_and_si512(_mm512_srai_epi16(_mm512_slli_epi16(_mm512_cvtepu8_epi16(raw), 8), 4), sign_and_magnitude);
            const __m512 even = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(bf16, 16)), two_to_120);
            const __m512 odd = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_and_si512(bf16, high_word)), two_to_120);
            __m512* a = acc[bank][half];
            a[0] = _mm512_fmadd_ps(even, x0, a[0]);
            a[1] = _mm512_fmadd_ps(odd, x1, a[1]);
          }
        }
      }
      const __m512 sc = _mm512_set1_ps(scales[g0 / kGroupSteps]);
      for (int half = 0; half < 2; ++half) {
        const __m512 sum = _mm512_add_ps(_mm512_add_ps(acc[0][half][0], acc[0][half][1]), _mm512_add_ps(acc[1][half][0], acc[1][half][1]));
        total[half] = _mm512_fmadd_ps(sum, sc, total[half]);
      }
    }
    const __m256i nan_codes = _mm256_or_si256(_mm256_cmpeq_epi8(signed_max, _mm256_set1_epi8(0x7F)), _mm256_cmpeq_epi8(unsigned_max, _mm256_set1_epi8(-1)));
    if (!_mm256_testz_si256(nan_codes, nan_codes)) return false;
    _mm512_storeu_ps(out, total[0]);
    _mm512_storeu_ps(out + 16, total[1]);
    return true;
  }

  float value(uint64_t r, uint64_t k) const { return e4m3_to_float(w[(k / 2) * 2 * kBlockRows + 2 * r + k % 2]); }
  float scale_at(uint64_t, uint64_t g) const { return scales[g]; }
};

// The decoded registers of a VNNI-4 step (int8_vnni4, int4_vnni4): w[2h + e] holds rows
// 16h + 8e .. 16h + 8e + 7, lane 2i + c row i's column pair c (columns 4s + 2c, 4s + 2c + 1).
struct Vnni4Quads {
  // rows 0-15 and 16-31: each row's two lanes added.
  MOEPACK_AVX512_BF16_INLINE static void rows(const __m512* acc, __m512* r) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    for (int h = 0; h < 2; ++h)
      r[h] = _mm512_add_ps(_mm512_permutex2var_ps(acc[2 * h], even, acc[2 * h + 1]), _mm512_permutex2var_ps(acc[2 * h], odd, acc[2 * h + 1]));
  }
  // AMX: the same lanes without the sum, as VNNI-2 rows: out[2c + h] is half h's pair c, its 16
  // rows in order.
  MOEPACK_AVX512_BF16_INLINE static void pairs(const __m512bh* w, __m512bh* out) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    for (int h = 0; h < 2; ++h) {
      out[h] = (__m512bh)_mm512_permutex2var_epi32((__m512i)w[2 * h], even, (__m512i)w[2 * h + 1]);
      out[2 + h] = (__m512bh)_mm512_permutex2var_epi32((__m512i)w[2 * h], odd, (__m512i)w[2 * h + 1]);
    }
  }
};

// Lane m of the result: lanes 2m and 2m + 1 of a (m < 8) or of b (m >= 8) added (AVX-512F).
MOEPACK_AVX512F_INLINE __m512 pair_sums(__m512 a, __m512 b) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  return _mm512_add_ps(_mm512_permutex2var_ps(a, even, b), _mm512_permutex2var_ps(a, odd, b));
}

// ---- int8_vnni4: int8 quads in 32-row blocks, fp32 scale per row -----------------------------
// Block nb starts at 32nb·(K+4); step s (four columns) is 128 bytes at 128s: bytes 4n..4n+3 are
// row n's columns 4s..4s+3. Rows 0-15 are the first 64 bytes. Four int8 values of a row widened
// to float and rounded to BF16 (exact) give, 16 at a time, eight rows' two column pairs: lane
// 2i + c of the result holds row i's pair c, which the 64-bit activation broadcast matches
// (x_operand<4>); rows() adds each row's two lanes. The per-row scale multiplies every group
// (256 columns, so a chunk of decoded steps stays 16 KiB).
struct Int8Vnni4Tiles : Vnni4Quads {
  static constexpr uint64_t kStepK = 4, kGroupSteps = 64, kChunkSteps = 64;
  static constexpr uint64_t kStepBytes = 128;
  static constexpr int kVecs = 4;
  static constexpr bool kScaled = true, kDirect = false, kAmxDirect = false;
  const int8_t* w;     // the block's bytes: [k/4][32][4]
  const float* s;      // the block's row scales: [32]
  Int8Vnni4Tiles(const Gemm& g, uint64_t nb)
      : w(reinterpret_cast<const int8_t*>(g.w) + nb * kBlockRows * (g.k + 4)), s(static_cast<const float*>(g.scale) + nb * kBlockRows) {}

  MOEPACK_AVX512_BF16_INLINE static __m512 widen(const int8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  // out[2h + e]: rows 16h + 8e .. 16h + 8e + 7.
  MOEPACK_AVX512_BF16_INLINE void load(uint64_t step, __m512bh* out) const {
    const int8_t* p = w + step * 4 * kBlockRows;
    for (int q = 0; q < 4; ++q) out[q] = _mm512_cvtne2ps_pbh(widen(p + 32 * q + 16), widen(p + 32 * q));
  }
  MOEPACK_AVX512_BF16_INLINE void scale(uint64_t, __m512* sc) const {
    sc[0] = _mm512_loadu_ps(s);
    sc[1] = _mm512_loadu_ps(s + 16);
  }
  MOEPACK_PREFETCH_INLINE void prefetch(uint64_t step) const {  // two lines a step
    _mm_prefetch(reinterpret_cast<const char*>(w + step * 4 * kBlockRows), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(w + step * 4 * kBlockRows + 64), _MM_HINT_T0);
  }

  // Vector j of octet o: rows 8o+2j, 8o+2j+1 (bytes 4(8o+2j)..+7 of the step).
  MOEPACK_AVX2_INLINE __m256 load8(uint64_t step, int o, int j) const {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w + step * 4 * kBlockRows + 4 * (8 * o + 2 * j)))));
  }
  MOEPACK_AVX2_INLINE __m256 scale8(uint64_t, int o) const { return _mm256_loadu_ps(s + 8 * o); }
  // 16 lanes: half h is the step's bytes 64h .. 64h + 63, four rows' quads per 16 bytes.
  MOEPACK_AVX512F_INLINE void load16(uint64_t step, int h, __m512* c) const {
    const int8_t* p = w + step * 4 * kBlockRows + 64 * h;
    __m512 q[4];
    for (int i = 0; i < 4; ++i) q[i] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i))));
    quads_to_panel16(q, c);
  }
  MOEPACK_AVX512F_INLINE __m512 scale16(uint64_t, int h) const { return _mm512_loadu_ps(s + 16 * h); }

  // One token on AVX-512F (no BF16): sixteen bytes are four rows' four columns, so widened to
  // floats they meet the step's four activations broadcast to every 128-bit lane; eight
  // accumulators (rows 4i .. 4i + 3) take a step's 128 bytes. At the end two rounds of
  // two-source permutes add each row's four lanes, in row order, and the row scale multiplies
  // the whole sum (a row has one scale).
  MOEPACK_AVX512F_INLINE bool avx512f_one_token(const float* x, uint64_t steps, float* out) const {
    constexpr uint64_t kPrefetchBytes = kOneTokenAheadBytes;
    __m512 acc[8];
    for (auto& a : acc) a = _mm512_setzero_ps();
    for (uint64_t st = 0; st < steps; ++st) {
      const int8_t* p = w + st * 4 * kBlockRows;
      _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchBytes), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchBytes + 64), _MM_HINT_T0);
      const __m512 xq = _mm512_broadcast_f32x4(_mm_loadu_ps(x + 4 * st));
      for (int i = 0; i < 8; ++i)
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i)))), xq, acc[i]);
    }
    for (int h = 0; h < 2; ++h) {
      // acc[4h + i] lane j: row 16h + 4i + j / 4, column j % 4; each round halves the columns.
      const __m512 rows = pair_sums(pair_sums(acc[4 * h], acc[4 * h + 1]), pair_sums(acc[4 * h + 2], acc[4 * h + 3]));
      _mm512_storeu_ps(out + 16 * h, _mm512_mul_ps(rows, _mm512_loadu_ps(s + 16 * h)));
    }
    return true;
  }

  // One token from Int16Rows (cpu_gemm.h; each quad as columns 4s, 4s + 2, 4s + 1, 4s + 3), on
  // AVX2 and, with 16-row registers, AVX-512F: a 32-bit lane of a step is one row's four int8
  // columns, so its words shifted up a byte and back (arithmetic) are the row's columns (4s,
  // 4s + 2) and its words shifted down a byte the columns (4s + 1, 4s + 3), sign-extended in
  // place. pmaddwd with the matching activation pairs adds each row's products exactly in int32,
  // every lane one row, rows in order (|·| < 2^27 over an activation block of 32 columns); per
  // block the sum as a float times the unit adds to the row's total, which the row scale
  // multiplies once. 7 vector instructions per 32 bytes, where widening to FP32 takes 12; AVX2
  // and AVX-512F give the same bits.
  static constexpr uint64_t kInt16BlockSteps = kInt16Block / kStepK;
  template <bool Vnni>
  MOEPACK_AVX2_INLINE void avx2_one_token_int16(const int16_t* q, const float* unit, uint64_t steps, float* out) const {
    constexpr uint64_t kPrefetchBytes = kOneTokenAheadBytes;
    __m256 total[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};  // rows 8o .. 8o + 7
    for (uint64_t b0 = 0; b0 < steps; b0 += kInt16BlockSteps) {
      __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
      for (uint64_t st = b0; st < b0 + kInt16BlockSteps; ++st) {
        const int8_t* p = w + st * 4 * kBlockRows;
        _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchBytes), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchBytes + 64), _MM_HINT_T0);
        int32_t pairs[2];
        std::memcpy(pairs, q + 4 * st, 8);
        const __m256i x_even = _mm256_set1_epi32(pairs[0]), x_odd = _mm256_set1_epi32(pairs[1]);
        for (int o = 0; o < 4; ++o) {
          const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * o));
          acc[o] = add_products<Vnni>(acc[o], _mm256_srai_epi16(_mm256_slli_epi16(v, 8), 8), x_even);
          acc[o] = add_products<Vnni>(acc[o], _mm256_srai_epi16(v, 8), x_odd);
        }
      }
      const __m256 u = _mm256_set1_ps(unit[b0 / kInt16BlockSteps]);
      for (int o = 0; o < 4; ++o) total[o] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[o]), u, total[o]);
    }
    for (int o = 0; o < 4; ++o) _mm256_storeu_ps(out + 8 * o, _mm256_mul_ps(total[o], _mm256_loadu_ps(s + 8 * o)));
  }
  template <bool Vnni>
  MOEPACK_AVX512F_INLINE void avx512f_one_token_int16(const int16_t* q, const float* unit, uint64_t steps, float* out) const {
    constexpr uint64_t kPrefetchBytes = kOneTokenAheadBytes;
    __m512 total[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};  // rows 0-15, 16-31
    for (uint64_t b0 = 0; b0 < steps; b0 += kInt16BlockSteps) {
      __m512i acc[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
      for (uint64_t st = b0; st < b0 + kInt16BlockSteps; ++st) {
        const int8_t* p = w + st * 4 * kBlockRows;
        _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchBytes), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchBytes + 64), _MM_HINT_T0);
        int32_t pairs[2];
        std::memcpy(pairs, q + 4 * st, 8);
        const __m512i x_even = _mm512_set1_epi32(pairs[0]), x_odd = _mm512_set1_epi32(pairs[1]);
        for (int h = 0; h < 2; ++h) {
          const __m512i v = _mm512_loadu_si512(p + 64 * h);
          acc[h] = add_products<Vnni>(acc[h], _mm512_srai_epi16(_mm512_slli_epi16(v, 8), 8), x_even);
          acc[h] = add_products<Vnni>(acc[h], _mm512_srai_epi16(v, 8), x_odd);
        }
      }
      const __m512 u = _mm512_set1_ps(unit[b0 / kInt16BlockSteps]);
      for (int h = 0; h < 2; ++h) total[h] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[h]), u, total[h]);
    }
    for (int h = 0; h < 2; ++h) _mm512_storeu_ps(out + 16 * h, _mm512_mul_ps(total[h], _mm512_loadu_ps(s + 16 * h)));
  }

  float value(uint64_t r, uint64_t k) const { return static_cast<float>(w[(k / 4) * 4 * kBlockRows + 4 * r + k % 4]); }
  float scale_at(uint64_t r, uint64_t) const { return s[r]; }
};

// ---- int4_vnni4: 4-bit codes in VNNI-4 quads, scale and zero point per row and group --------
// Block nb is k/B sub-blocks of B = block_k columns, each B·16 bytes of codes then 32 int32
// compensation sums (for the uint8 activations of sgl-kernel's W4A8 kernel; BF16 arithmetic
// does not need them). Step s (four columns) of sub-block kc = s / (B/4) is the 64 bytes at
// kc·(16B + 128) + 64·(s mod B/4); byte 4c + t holds column 4s + t of two rows:
//   c = 0..7:  row c in the low nibble, row c + 8 in the high one
//   c = 8..15: row c + 8 low, row c + 16 high
// so the low nibbles of bytes 0-31, widened to words, are rows 0-7 in the lanes Vnni4Quads
// reads, their high nibbles rows 8-15, and bytes 32-63 rows 16-31 the same way. A weight is its
// code less the zero point of its row and group, an integer in [-16, 15] (zero points are 0..16:
// a 4-bit code, plus 1 for GPTQ's), so one 32-entry word table (vpermw) indexed by
// code + 16 - zero gives it as BF16, exactly. The row's fp32 scale for the group multiplies the
// group's partial sums: the kernels' scale groups are the sub-blocks, and a checkpoint group of
// G columns spans G / B of them.
constexpr uint16_t small_int_bf16(int v) {
  if (v == 0) return 0;
  const unsigned mag = static_cast<unsigned>(v < 0 ? -v : v);
  unsigned e = 0;
  while ((mag >> (e + 1)) != 0) ++e;
  return static_cast<uint16_t>((v < 0 ? 0x8000u : 0u) | ((127u + e) << 7) | ((mag << (7 - e)) & 0x7Fu));
}
struct Int4Bf16Table {
  alignas(64) uint16_t bf16[32];  // entry i: i - 16
};
constexpr Int4Bf16Table make_int4_table() {
  Int4Bf16Table t{};
  for (int i = 0; i < 32; ++i) t.bf16[i] = small_int_bf16(i - 16);
  return t;
}
constexpr Int4Bf16Table kInt4Bf16 = make_int4_table();
static_assert(kInt4Bf16.bf16[0] == 0xC180 && kInt4Bf16.bf16[15] == 0xBF80 && kInt4Bf16.bf16[16] == 0 && kInt4Bf16.bf16[19] == 0x4040 &&
                  kInt4Bf16.bf16[31] == 0x4170,
              "BF16 of -16, -1, 0, 3, 15");
// Word i of decoded register q belongs to row 8q + i/4 (the table each zero-point offset is
// spread by).
struct Int4RowOfWord {
  alignas(64) uint16_t row[4][32];
};
constexpr Int4RowOfWord make_int4_rows() {
  Int4RowOfWord t{};
  for (int q = 0; q < 4; ++q)
    for (int i = 0; i < 32; ++i) t.row[q][i] = static_cast<uint16_t>(8 * q + i / 4);
  return t;
}
constexpr Int4RowOfWord kInt4RowOfWord = make_int4_rows();

template <uint64_t BlockK>
struct Int4Vnni4Tiles : Vnni4Quads {
  static constexpr uint64_t kStepK = 4, kGroupSteps = BlockK / 4, kChunkSteps = 64;
  static constexpr uint64_t kStepBytes = 64;
  static constexpr uint64_t kSubBlockBytes = BlockK * 16 + 128;
  static constexpr int kVecs = 4;
  static constexpr bool kScaled = true, kDirect = false, kAmxDirect = false;
  const uint8_t* w;  // the block's sub-blocks
  const float* s;    // the block's scales [groups][32]
  const int8_t* z;   // the block's zero points [groups][32]
  uint64_t sub_blocks_per_group;
  // 16 - zero point, spread over the words of each decoded register, for the sub-block load()
  // decoded last: kernels walk the steps in order, so this is rebuilt once per sub-block.
  mutable uint64_t offsets_of = ~uint64_t{0};
  alignas(64) mutable int16_t offsets[4][32];
  // load16's zero points, [half][quad] of 16 lanes, for sub-block zeros16_of.
  mutable uint64_t zeros16_of = ~uint64_t{0};
  alignas(64) mutable int32_t zeros16[2][4][16];

  Int4Vnni4Tiles(const Gemm& g, uint64_t nb)
      : w(g.w + nb * (g.k / BlockK) * kSubBlockBytes),
        s(static_cast<const float*>(g.scale) + nb * kBlockRows * g.groups),
        z(g.zeros + nb * kBlockRows * g.groups),
        sub_blocks_per_group(g.k / g.groups / BlockK) {}

  uint64_t group_of(uint64_t sub_block) const { return sub_block / sub_blocks_per_group; }
  const uint8_t* step_bytes(uint64_t step) const { return w + (step / kGroupSteps) * kSubBlockBytes + (step % kGroupSteps) * 64; }
  const int8_t* zeros_of(uint64_t sub_block) const { return z + group_of(sub_block) * kBlockRows; }

  MOEPACK_AVX512_BF16_INLINE void load(uint64_t step, __m512bh* out) const {
    const uint64_t sub_block = step / kGroupSteps;
    if (sub_block != offsets_of) {
      const __m512i offset = _mm512_sub_epi16(_mm512_set1_epi16(16), _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(zeros_of(sub_block)))));
      for (int q = 0; q < 4; ++q) _mm512_store_si512(offsets[q], _mm512_permutexvar_epi16(_mm512_load_si512(kInt4RowOfWord.row[q]), offset));
      offsets_of = sub_block;
    }
    const __m512i lut = _mm512_load_si512(kInt4Bf16.bf16), nibble = _mm512_set1_epi16(0x0F);
    const uint8_t* p = step_bytes(step);
    for (int h = 0; h < 2; ++h) {
      const __m512i wide = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * h)));
      out[2 * h] = (__m512bh)_mm512_permutexvar_epi16(_mm512_add_epi16(_mm512_and_si512(wide, nibble), _mm512_load_si512(offsets[2 * h])), lut);
      out[2 * h + 1] = (__m512bh)_mm512_permutexvar_epi16(_mm512_add_epi16(_mm512_srli_epi16(wide, 4), _mm512_load_si512(offsets[2 * h + 1])), lut);
    }
  }
  MOEPACK_PREFETCH_INLINE void prefetch(uint64_t step) const { _mm_prefetch(reinterpret_cast<const char*>(step_bytes(step)), _MM_HINT_T0); }  // one line a step
  MOEPACK_AVX512_BF16_INLINE void scale(uint64_t sub_block, __m512* sc) const {
    const float* g = s + group_of(sub_block) * kBlockRows;
    sc[0] = _mm512_loadu_ps(g);
    sc[1] = _mm512_loadu_ps(g + 16);
  }

  // Vector j of octet o: rows 8o + 2j and 8o + 2j + 1, four columns each: bytes 4c .. 4c + 7 with
  // c = 8(o/2) + 2j, the high nibbles for odd o.
  MOEPACK_AVX2_INLINE __m256 load8(uint64_t step, int o, int j) const {
    __m256i codes = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(step_bytes(step) + 4 * (8 * (o / 2) + 2 * j))));
    if (o % 2) codes = _mm256_srli_epi32(codes, 4);
    codes = _mm256_and_si256(codes, _mm256_set1_epi32(0x0F));
    const int8_t* zr = zeros_of(step / kGroupSteps) + 8 * o + 2 * j;
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(codes, _mm256_setr_m128i(_mm_set1_epi32(zr[0]), _mm_set1_epi32(zr[1]))));
  }
  MOEPACK_AVX2_INLINE __m256 scale8(uint64_t sub_block, int o) const { return _mm256_loadu_ps(s + group_of(sub_block) * kBlockRows + 8 * o); }
  // 16 lanes: half h is the step's byte rows 8h .. 8h + 7 (bytes 32h .. 32h + 31), their low
  // nibbles rows 16h .. 16h + 7, their high nibbles rows 16h + 8 .. 16h + 15; each code less
  // its row's zero point, as load8. The zero points, each spread over its row's four lanes, are
  // built once per sub-block (the panels walk the steps in order).
  MOEPACK_AVX512F_INLINE void load16(uint64_t step, int h, __m512* c) const {
    const uint64_t sub_block = step / kGroupSteps;
    if (sub_block != zeros16_of) {
      for (int half = 0; half < 2; ++half) {
        const __m512i z = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(zeros_of(sub_block) + 16 * half)));
        for (int q = 0; q < 4; ++q) {
          // Lane 4r + j: row 4q + r of the half (q = 2e + t: nibble e, byte rows 4t ..).
          const __m512i rows = _mm512_add_epi32(_mm512_set1_epi32(4 * q), _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
          _mm512_store_si512(zeros16[half][q], _mm512_permutexvar_epi32(rows, z));
        }
      }
      zeros16_of = sub_block;
    }
    const uint8_t* p = step_bytes(step) + 32 * h;
    __m512 q[4];
    for (int t = 0; t < 2; ++t) {
      const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * t)));
      const __m512i low = _mm512_and_si512(bytes, _mm512_set1_epi32(0x0F)), high = _mm512_srli_epi32(bytes, 4);
      q[t] = _mm512_cvtepi32_ps(_mm512_sub_epi32(low, _mm512_load_si512(zeros16[h][t])));
      q[2 + t] = _mm512_cvtepi32_ps(_mm512_sub_epi32(high, _mm512_load_si512(zeros16[h][2 + t])));
    }
    quads_to_panel16(q, c);
  }
  MOEPACK_AVX512F_INLINE __m512 scale16(uint64_t sub_block, int h) const { return _mm512_loadu_ps(s + group_of(sub_block) * kBlockRows + 16 * h); }

  // One token from Int16Rows (cpu_gemm.h; each quad as columns 4s, 4s + 2, 4s + 1, 4s + 3), on
  // AVX2 and AVX-512F: the codes are multiplied in place, never widened. A 32-bit
  // lane of a step's bytes is one byte row c: its low nibbles are row A's four columns, its high
  // nibbles row B's (A, B = c, c + 8 for c < 8, else c + 8, c + 16). Masked to 0x000F per word,
  // the lane holds A's columns (4s, 4s + 2) as words; masked to 0x0F00, A's (4s + 1, 4s + 3)
  // times 256; the same after a shift by 4 for B. pmaddwd with the matching activation pairs
  // sums each row's products exactly in int32, every lane one row: rows come in order (AVX2:
  // 0-7 and 8-15 from a half's 32 bytes; AVX-512F: 0-7 | 16-23 and 8-15 | 24-31 from 64). Per
  // activation block (or shorter sub-block) the even sums times 256 plus the odd ones, less the
  // zero point times 256 times the block's activation sum, are 256 · Σ (code - z) q exactly
  // (|·| < 2^31: 32 columns of 16 · 2^14 · 256); as a float times unit / 256 they add to the
  // sub-block's sum, which its scale multiplies. 13 vector instructions a 64-byte step on
  // AVX-512F and 26 on AVX2, where the FP32 decodes take 27 and 54; AVX2 and AVX-512F give
  // the same bits.
  static constexpr uint64_t kInt16ChunkSteps = std::min<uint64_t>(kGroupSteps, kInt16Block / kStepK);
  // The sum of q over the chunk of steps from `step` (its 4·kInt16ChunkSteps values), exactly.
  MOEPACK_AVX2_INLINE static int32_t chunk_sum(const int16_t* q, uint64_t step) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i sum = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 4 * step)), ones);
    if constexpr (kInt16ChunkSteps == 8) sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 4 * step + 16)), ones));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s4);
  }
  template <bool Vnni>
  MOEPACK_AVX2_INLINE void avx2_one_token_int16(const int16_t* q, const float* unit, uint64_t steps, float* out) const {
    static_assert(kGroupSteps % kInt16ChunkSteps == 0 && (kInt16ChunkSteps == 4 || kInt16ChunkSteps == 8), "chunks split sub-blocks and activation blocks alike");
    constexpr uint64_t kPrefetchBytes = kOneTokenAheadBytes;
    const __m256i even = _mm256_set1_epi16(0x000F), odd = _mm256_set1_epi16(0x0F00), zero = _mm256_setzero_si256();
    __m256 total[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};  // rows 0-7, 8-15, 16-23, 24-31
    for (uint64_t g0 = 0; g0 < steps; g0 += kGroupSteps) {
      const uint64_t sub_block = g0 / kGroupSteps;
      const int8_t* zg = zeros_of(sub_block);
      __m256 part[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
      for (uint64_t c0 = g0; c0 < g0 + kGroupSteps; c0 += kInt16ChunkSteps) {
        __m256i acc[4][2] = {{zero, zero}, {zero, zero}, {zero, zero}, {zero, zero}};  // [rows / 8][even, odd]
        for (uint64_t st = c0; st < c0 + kInt16ChunkSteps; ++st) {
          const uint8_t* step = step_bytes(st);
          _mm_prefetch(reinterpret_cast<const char*>(step + kPrefetchBytes), _MM_HINT_T0);
          int32_t pairs[2];
          std::memcpy(pairs, q + 4 * st, 8);
          const __m256i x_even = _mm256_set1_epi32(pairs[0]), x_odd = _mm256_set1_epi32(pairs[1]);
          for (int half = 0; half < 2; ++half) {
            const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(step + 32 * half)), high = _mm256_srli_epi16(bytes, 4);
            __m256i* a = acc[2 * half];
            a[0] = add_products<Vnni>(a[0], _mm256_and_si256(bytes, even), x_even);
            a[1] = add_products<Vnni>(a[1], _mm256_and_si256(bytes, odd), x_odd);
            __m256i* b = acc[2 * half + 1];
            b[0] = add_products<Vnni>(b[0], _mm256_and_si256(high, even), x_even);
            b[1] = add_products<Vnni>(b[1], _mm256_and_si256(high, odd), x_odd);
          }
        }
        const __m256i zero_term = _mm256_set1_epi32(256 * chunk_sum(q, c0));
        const __m256 u = _mm256_set1_ps(unit[c0 * kStepK / kInt16Block] * 0x1p-8f);
        for (int o = 0; o < 4; ++o) {
          const __m256i z = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(zg + 8 * o)));
          const __m256i sum = _mm256_sub_epi32(_mm256_add_epi32(_mm256_slli_epi32(acc[o][0], 8), acc[o][1]), _mm256_mullo_epi32(z, zero_term));
          part[o] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), u, part[o]);
        }
      }
      const float* sg = s + group_of(sub_block) * kBlockRows;
      for (int o = 0; o < 4; ++o) total[o] = _mm256_fmadd_ps(part[o], _mm256_loadu_ps(sg + 8 * o), total[o]);
    }
    for (int o = 0; o < 4; ++o) _mm256_storeu_ps(out + 8 * o, total[o]);
  }
  template <bool Vnni>
  MOEPACK_AVX512F_INLINE void avx512f_one_token_int16(const int16_t* q, const float* unit, uint64_t steps, float* out) const {
    constexpr uint64_t kPrefetchBytes = kOneTokenAheadBytes;
    const __m512i even = _mm512_set1_epi16(0x000F), odd = _mm512_set1_epi16(0x0F00);
    // Lanes of the low-nibble registers are rows 0-7 | 16-23, of the high-nibble ones 8-15 | 24-31.
    const __m512i low_rows = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    const __m512i high_rows = _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    __m512 total[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};  // [low, high nibbles]
    for (uint64_t g0 = 0; g0 < steps; g0 += kGroupSteps) {
      const uint64_t sub_block = g0 / kGroupSteps;
      const int8_t* zg = zeros_of(sub_block);
      const __m512i z[2] = {_mm512_cvtepi8_epi32(_mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(zg)), _mm_loadl_epi64(reinterpret_cast<const __m128i*>(zg + 16)))),
                            _mm512_cvtepi8_epi32(_mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(zg + 8)), _mm_loadl_epi64(reinterpret_cast<const __m128i*>(zg + 24))))};
      __m512 part[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
      for (uint64_t c0 = g0; c0 < g0 + kGroupSteps; c0 += kInt16ChunkSteps) {
        __m512i acc[2][2] = {{_mm512_setzero_si512(), _mm512_setzero_si512()}, {_mm512_setzero_si512(), _mm512_setzero_si512()}};  // [nibble][even, odd]
        for (uint64_t st = c0; st < c0 + kInt16ChunkSteps; ++st) {
          const uint8_t* step = step_bytes(st);
          _mm_prefetch(reinterpret_cast<const char*>(step + kPrefetchBytes), _MM_HINT_T0);
          int32_t pairs[2];
          std::memcpy(pairs, q + 4 * st, 8);
          const __m512i x_even = _mm512_set1_epi32(pairs[0]), x_odd = _mm512_set1_epi32(pairs[1]);
          const __m512i bytes = _mm512_loadu_si512(step), high = _mm512_srli_epi16(bytes, 4);
          acc[0][0] = add_products<Vnni>(acc[0][0], _mm512_and_si512(bytes, even), x_even);
          acc[0][1] = add_products<Vnni>(acc[0][1], _mm512_and_si512(bytes, odd), x_odd);
          acc[1][0] = add_products<Vnni>(acc[1][0], _mm512_and_si512(high, even), x_even);
          acc[1][1] = add_products<Vnni>(acc[1][1], _mm512_and_si512(high, odd), x_odd);
        }
        const __m512i zero_term = _mm512_set1_epi32(256 * chunk_sum(q, c0));
        const __m512 u = _mm512_set1_ps(unit[c0 * kStepK / kInt16Block] * 0x1p-8f);
        for (int n = 0; n < 2; ++n) {
          const __m512i sum = _mm512_sub_epi32(_mm512_add_epi32(_mm512_slli_epi32(acc[n][0], 8), acc[n][1]), _mm512_mullo_epi32(z[n], zero_term));
          part[n] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), u, part[n]);
        }
      }
      const float* sg = s + group_of(sub_block) * kBlockRows;
      const __m512 s_lo = _mm512_loadu_ps(sg), s_hi = _mm512_loadu_ps(sg + 16);
      total[0] = _mm512_fmadd_ps(part[0], _mm512_permutex2var_ps(s_lo, low_rows, s_hi), total[0]);
      total[1] = _mm512_fmadd_ps(part[1], _mm512_permutex2var_ps(s_lo, high_rows, s_hi), total[1]);
    }
    // rows 0-15: lanes 0-7 of each; rows 16-31: lanes 8-15 of each
    _mm512_storeu_ps(out, _mm512_permutex2var_ps(total[0], _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23), total[1]));
    _mm512_storeu_ps(out + 16, _mm512_permutex2var_ps(total[0], _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31), total[1]));
  }

  // One token on AVX2 (decode, bound by the bytes read), by the identity
  //   sum_k (q_k - z) x_k = sum_k q_k x_k - z sum_k x_k
  // per row and sub-block: the codes alone are decoded, BF16 by two byte tables (vpshufb), as
  // the MXFP4 decode does, and each row's zero point times the sub-block's activation sum is
  // taken off its partial sum before the scale. Widened to words by unpacking (within 128-bit
  // lanes), a nibble half of 32 bytes is two registers whose 32-bit lanes each hold one row's
  // column pair (2p, 2p + 1) as BF16 words: the high word masked is column 2p + 1's float, the
  // low word shifted up column 2p's. Lanes come as rows (c, c, c + 1, c + 1 | c + 4, ...) for
  // the unpacked low bytes and (c + 2, ...) for the high ones, so one hadd of the two gives
  // eight rows in order. Eight accumulators (half, nibble, unpacked half), each fed twice a
  // step, keep both FMA units busy. The sums differ from the other kernels' in order and in
  // rounding (the product of z and the activation sum), well within the float tolerance.
  MOEPACK_AVX2_INLINE bool avx2_one_token(const float* x, uint64_t steps, float* out) const {
    constexpr uint64_t kPrefetchBytes = kOneTokenAheadBytes;
    const __m256i nibble = _mm256_set1_epi8(0x0F), high_word = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
    // BF16 of 0..15, split into high and low bytes (each table twice, one per 128-bit lane).
    const __m256i high_bytes = _mm256_setr_epi8(0x00, 0x3F, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41,
                                                0x00, 0x3F, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41);
    const __m256i low_bytes = _mm256_setr_epi8(0x00, char(0x80), 0x00, 0x40, char(0x80), char(0xA0), char(0xC0), char(0xE0), 0x00, 0x10, 0x20, 0x30, 0x40,
                                               0x50, 0x60, 0x70, 0x00, char(0x80), 0x00, 0x40, char(0x80), char(0xA0), char(0xC0), char(0xE0), 0x00,
                                               0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70);
    const __m256i even_columns = _mm256_setr_epi32(0, 2, 0, 2, 0, 2, 0, 2), odd_columns = _mm256_setr_epi32(1, 3, 1, 3, 1, 3, 1, 3);
    __m256 total[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};  // rows 0-7, 8-15, 16-23, 24-31
    for (uint64_t g0 = 0; g0 < steps; g0 += kGroupSteps) {
      __m256 acc[2][2][2];  // [half][nibble][unpacked half]
      for (auto& h : acc)
        for (auto& n : h) n[0] = n[1] = _mm256_setzero_ps();
      __m128 x_sum = _mm_setzero_ps();
      for (uint64_t st = g0; st < g0 + kGroupSteps; ++st) {
        const uint8_t* step = step_bytes(st);
        _mm_prefetch(reinterpret_cast<const char*>(step + kPrefetchBytes), _MM_HINT_T0);
        const __m128 x4 = _mm_loadu_ps(x + 4 * st);
        x_sum = _mm_add_ps(x_sum, x4);
        const __m256 xq = _mm256_set_m128(x4, x4);
        const __m256 x_even = _mm256_permutevar8x32_ps(xq, even_columns), x_odd = _mm256_permutevar8x32_ps(xq, odd_columns);
        for (int half = 0; half < 2; ++half) {
          const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(step + 32 * half));
          const __m256i codes[2] = {_mm256_and_si256(bytes, nibble), _mm256_and_si256(_mm256_srli_epi16(bytes, 4), nibble)};
          for (int n = 0; n < 2; ++n) {
            const __m256i hi = _mm256_shuffle_epi8(high_bytes, codes[n]), lo = _mm256_shuffle_epi8(low_bytes, codes[n]);
            const __m256i words[2] = {_mm256_unpacklo_epi8(lo, hi), _mm256_unpackhi_epi8(lo, hi)};
            for (int u = 0; u < 2; ++u) {
              __m256& a = acc[half][n][u];
              a = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(words[u], 16)), x_even, a);
              a = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(words[u], high_word)), x_odd, a);
            }
          }
        }
      }
      x_sum = _mm_add_ps(x_sum, _mm_movehl_ps(x_sum, x_sum));
      x_sum = _mm_add_ss(x_sum, _mm_movehdup_ps(x_sum));
      const __m256 x_total = _mm256_broadcastss_ps(x_sum);
      const uint64_t sub_block = g0 / kGroupSteps;
      const int8_t* zg = zeros_of(sub_block);
      const float* sg = s + group_of(sub_block) * kBlockRows;
      for (int half = 0; half < 2; ++half)
        for (int n = 0; n < 2; ++n) {
          const int o = 2 * half + n;  // rows 8o .. 8o + 7
          const __m256 rows = _mm256_hadd_ps(acc[half][n][0], acc[half][n][1]);
          const __m256 zero = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(zg + 8 * o))));
          total[o] = _mm256_fmadd_ps(_mm256_fnmadd_ps(zero, x_total, rows), _mm256_loadu_ps(sg + 8 * o), total[o]);
        }
    }
    for (int o = 0; o < 4; ++o) _mm256_storeu_ps(out + 8 * o, total[o]);
    return true;
  }

  // One token on AVX-512F (no BF16): the AVX2 decode above on a whole 64-byte step per register
  // (vpshufb and the unpacks work within each 128-bit lane, so lane k holds rows c = 4k .. 4k + 3
  // of the byte layout, each row's two column pairs side by side), two banks (step parity) of
  // four accumulators (nibble, unpacked half). At the end of a sub-block each row's two lanes
  // are added, the rows put in order by two-source permutes, and the zero point times the
  // activation sum taken off before the scale.
  MOEPACK_AVX512F_INLINE bool avx512f_one_token(const float* x, uint64_t steps, float* out) const {
    static_assert(kGroupSteps % 2 == 0, "banks split a sub-block's steps by parity");
    constexpr uint64_t kPrefetchBytes = kOneTokenAheadBytes;
    const __m512i nibble = _mm512_set1_epi8(0x0F), high_word = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
    const __m512i high_bytes = _mm512_broadcast_i32x4(_mm_setr_epi8(0x00, 0x3F, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41));
    const __m512i low_bytes = _mm512_broadcast_i32x4(
        _mm_setr_epi8(0x00, char(0x80), 0x00, 0x40, char(0x80), char(0xA0), char(0xC0), char(0xE0), 0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70));
    const __m512i even_columns = _mm512_setr_epi32(0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 0, 2);
    const __m512i odd_columns = _mm512_setr_epi32(1, 3, 1, 3, 1, 3, 1, 3, 1, 3, 1, 3, 1, 3, 1, 3);
    // A pair-summed nibble holds byte row c at lane 8u + 2(c / 4) + c % 2, u = (c % 4) / 2; rows
    // 0-15 are the low nibbles' c = 0..7 then the high nibbles' (index + 16), rows 16-31 the same
    // for c = 8..15.
    const __m512i rows_low = _mm512_setr_epi32(0, 1, 8, 9, 2, 3, 10, 11, 16, 17, 24, 25, 18, 19, 26, 27);
    const __m512i rows_high = _mm512_setr_epi32(4, 5, 12, 13, 6, 7, 14, 15, 20, 21, 28, 29, 22, 23, 30, 31);
    __m512 total[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};  // rows 0-15, 16-31
    for (uint64_t g0 = 0; g0 < steps; g0 += kGroupSteps) {
      __m512 acc[2][2][2];  // [bank][nibble][unpacked half]
      for (auto& bank : acc)
        for (auto& n : bank) n[0] = n[1] = _mm512_setzero_ps();
      __m128 x_sum = _mm_setzero_ps();
      for (uint64_t st = g0; st < g0 + kGroupSteps; st += 2) {
        _mm_prefetch(reinterpret_cast<const char*>(step_bytes(st) + kPrefetchBytes), _MM_HINT_T0);
        for (int bank = 0; bank < 2; ++bank) {
          const uint64_t step = st + bank;
          const __m128 x4 = _mm_loadu_ps(x + 4 * step);
          x_sum = _mm_add_ps(x_sum, x4);
          const __m512 xq = _mm512_broadcast_f32x4(x4);
          const __m512 x_even = _mm512_permutexvar_ps(even_columns, xq), x_odd = _mm512_permutexvar_ps(odd_columns, xq);
          const __m512i bytes = _mm512_loadu_si512(step_bytes(step));
          const __m512i codes[2] = {_mm512_and_si512(bytes, nibble), _mm512_and_si512(_mm512_srli_epi16(bytes, 4), nibble)};
          for (int n = 0; n < 2; ++n) {
            const __m512i hi = _mm512_shuffle_epi8(high_bytes, codes[n]), lo = _mm512_shuffle_epi8(low_bytes, codes[n]);
            const __m512i words[2] = {_mm512_unpacklo_epi8(lo, hi), _mm512_unpackhi_epi8(lo, hi)};
            for (int u = 0; u < 2; ++u) {
              __m512& a = acc[bank][n][u];
              a = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(words[u], 16)), x_even, a);
              a = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(words[u], high_word)), x_odd, a);
            }
          }
        }
      }
      x_sum = _mm_add_ps(x_sum, _mm_movehl_ps(x_sum, x_sum));
      x_sum = _mm_add_ss(x_sum, _mm_movehdup_ps(x_sum));
      const __m512 x_total = _mm512_broadcastss_ps(x_sum);
      __m512 pairs[2];  // per nibble: lane 8u + m, the pair sums of unpacked half u
      for (int n = 0; n < 2; ++n) pairs[n] = pair_sums(_mm512_add_ps(acc[0][n][0], acc[1][n][0]), _mm512_add_ps(acc[0][n][1], acc[1][n][1]));
      const __m512 rows[2] = {_mm512_permutex2var_ps(pairs[0], rows_low, pairs[1]), _mm512_permutex2var_ps(pairs[0], rows_high, pairs[1])};
      const uint64_t sub_block = g0 / kGroupSteps;
      const int8_t* zg = zeros_of(sub_block);
      const float* sg = s + group_of(sub_block) * kBlockRows;
      for (int h = 0; h < 2; ++h) {
        const __m512 zero = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(zg + 16 * h))));
        total[h] = _mm512_fmadd_ps(_mm512_fnmadd_ps(zero, x_total, rows[h]), _mm512_loadu_ps(sg + 16 * h), total[h]);
      }
    }
    _mm512_storeu_ps(out, total[0]);
    _mm512_storeu_ps(out + 16, total[1]);
    return true;
  }

  float value(uint64_t r, uint64_t k) const {
    const uint8_t byte = step_bytes(k / 4)[4 * (8 * (r / 16) + r % 8) + k % 4];
    const int code = ((r / 8) % 2 ? byte >> 4 : byte) & 0x0F;
    return static_cast<float>(code - zeros_of(k / BlockK)[r]);
  }
  float scale_at(uint64_t r, uint64_t sub_block) const { return s[group_of(sub_block) * kBlockRows + r]; }
};

// The AMX level: tiles configured once for the call's rows, released at its end (so the thread
// gives the tile state back between calls); few tokens run the AVX-512 kernels.
template <class T>
MOEPACK_AMX void amx_blocks(const Gemm& g, uint64_t nb0, uint64_t nb1, const uint16_t* xb, uint64_t m, float* out) {
  amx::configure(std::min(m, kTileRows));
  for (uint64_t nb = nb0; nb < nb1; ++nb) amx_block<T>(g, nb, xb, m, out);
  amx::release();
}

// AMX scales whole k-tiles of 32 columns: a layout with smaller scale groups (int4_vnni4 at
// block_k 16) runs the AVX-512 BF16 kernels at that level.
template <class T>
constexpr bool kAmxScalesItsGroups = !T::kScaled || T::kGroupSteps * T::kStepK >= kTileK;

template <class T>
void run_blocks(CpuIsa isa, const CpuKernelChoice& choice, const Gemm& g, uint64_t nb0, uint64_t nb1, const uint16_t* xb, const float* xf, const Int16Rows* xq,
                uint64_t m, float* out) {
  // Where vdpbf16ps is the slower (CpuKernelChoice::avx512f_for_bf16), the AVX-512F kernels take
  // a BF16 level's few-token int16 decodes and, at avx512_bf16, its prefill; every other block
  // keeps the level's own kernels.
  if (avx512f_stands_in(isa, choice)) {
    const bool int16 = HasAvx512fOneTokenInt16<T> && m <= kAvx512fInt16MaxTokens && xq && xq->all_ok(m);
    const bool prefill = isa == CpuIsa::avx512_bf16 && m > kAvx512fInt16MaxTokens;
    if (int16 || prefill) isa = CpuIsa::avx512f;
  }
  if (isa == CpuIsa::amx_bf16) {
    if constexpr (kAmxScalesItsGroups<T>)
      if (m >= kAmxMinTokens) return amx_blocks<T>(g, nb0, nb1, xb, m, out);
    isa = CpuIsa::avx512_bf16;
  }
  for (uint64_t nb = nb0; nb < nb1; ++nb) {
    if (isa == CpuIsa::avx512_bf16) avx512_block<T>(g, nb, xb, m, out);
    else if (isa == CpuIsa::avx512f) choice.vnni ? avx512f_block<T, true>(g, nb, xf, xq, m, out) : avx512f_block<T, false>(g, nb, xf, xq, m, out);
    else if (isa == CpuIsa::avx2) choice.vnni ? avx2_block<T, true>(g, nb, xf, xq, m, out) : avx2_block<T, false>(g, nb, xf, xq, m, out);
    else scalar_block<T>(g, nb, xf, m, out);
  }
}

}  // namespace

// The row's blocks one at a time: the largest magnitude's exponent (the bit patterns of
// magnitudes order as they do), then each value times 2^(140 - e) (e the biased FP32 exponent)
// rounded to an integer: the largest lands in 2^13..2^14 - 1, and unit[b] = 2^(e - 140).
MOEPACK_AVX2 bool quantize_int16_row(const float* x, uint64_t k, Int16Order order, int16_t* q, float* unit) {
  const __m256i quad_pairs = _mm256_setr_epi8(0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15, 0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15);
  constexpr uint32_t kLowest = 127 - 60, kHighest = 127 + 60;  // 2^-60 <= largest < 2^61
  const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF);
  for (uint64_t b = 0; b < k / kInt16Block; ++b) {
    const float* xb = x + b * kInt16Block;
    __m256 v[4];
    __m256i largest = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm256_loadu_ps(xb + 8 * j);
      largest = _mm256_max_epu32(largest, _mm256_and_si256(_mm256_castps_si256(v[j]), magnitude));
    }
    __m128i m4 = _mm_max_epu32(_mm256_castsi256_si128(largest), _mm256_extracti128_si256(largest, 1));
    m4 = _mm_max_epu32(m4, _mm_shuffle_epi32(m4, _MM_SHUFFLE(1, 0, 3, 2)));
    m4 = _mm_max_epu32(m4, _mm_shuffle_epi32(m4, _MM_SHUFFLE(2, 3, 0, 1)));
    const uint32_t bits = static_cast<uint32_t>(_mm_cvtsi128_si32(m4));
    int16_t* qb = q + b * kInt16Block;
    if (bits == 0) {  // all zeros (padding columns): any unit
      std::memset(qb, 0, kInt16Block * sizeof(int16_t));
      unit[b] = 1.0f;
      continue;
    }
    const uint32_t e = bits >> 23;
    if (e < kLowest || e > kHighest) return false;
    const __m256 to_grid = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>((140 - e + 127) << 23)));
    for (int j = 0; j < 4; j += 2) {
      const __m256i lo = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], to_grid)), hi = _mm256_cvtps_epi32(_mm256_mul_ps(v[j + 1], to_grid));
      // packs works within 128-bit lanes: quadwords 0, 2, 1, 3 are the 16 values in order
      __m256i words = _mm256_permute4x64_epi64(_mm256_packs_epi32(lo, hi), _MM_SHUFFLE(3, 1, 2, 0));
      if (order == Int16Order::quad_pairs) words = _mm256_shuffle_epi8(words, quad_pairs);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(qb + 8 * j), words);
    }
    const uint32_t unit_bits = (e - 140 + 127) << 23;
    std::memcpy(&unit[b], &unit_bits, 4);
  }
  return true;
}

Int16Order int16_rows_order(CpuLayout layout, CpuIsa isa, const CpuKernelChoice& choice) {
  if (int16_max_tokens(isa, choice) == 0) return Int16Order::none;
  if (layout == CpuLayout::mxfp4) return Int16Order::columns;
  if (layout == CpuLayout::int4_vnni4 || layout == CpuLayout::int8_vnni4) return Int16Order::quad_pairs;
  return Int16Order::none;
}

void packed_gemm_blocks(CpuLayout layout, CpuIsa isa, const CpuKernelChoice& choice, const Gemm& g, uint64_t nb0, uint64_t nb1, const uint16_t* xb,
                        const float* xf, const Int16Rows* xq, uint64_t m, float* out) {
  switch (layout) {
    case CpuLayout::mxfp4: return run_blocks<Mxfp4Tiles>(isa, choice, g, nb0, nb1, xb, xf, xq, m, out);
    case CpuLayout::bf16_amx: return run_blocks<Bf16AmxTiles>(isa, choice, g, nb0, nb1, xb, xf, xq, m, out);
    case CpuLayout::bf16_vec: return run_blocks<Bf16VecTiles>(isa, choice, g, nb0, nb1, xb, xf, xq, m, out);
    case CpuLayout::fp8_block: return run_blocks<Fp8BlockTiles>(isa, choice, g, nb0, nb1, xb, xf, xq, m, out);
    case CpuLayout::int8_vnni4: return run_blocks<Int8Vnni4Tiles>(isa, choice, g, nb0, nb1, xb, xf, xq, m, out);
    case CpuLayout::int4_vnni4:
      // block_k = min(group size, 128) (checked by cpu_int4_groups_unfit before any call)
      switch (std::min<uint64_t>(g.k / g.groups, 128)) {
        case 16: return run_blocks<Int4Vnni4Tiles<16>>(isa, choice, g, nb0, nb1, xb, xf, xq, m, out);
        case 32: return run_blocks<Int4Vnni4Tiles<32>>(isa, choice, g, nb0, nb1, xb, xf, xq, m, out);
        case 64: return run_blocks<Int4Vnni4Tiles<64>>(isa, choice, g, nb0, nb1, xb, xf, xq, m, out);
        case 128: return run_blocks<Int4Vnni4Tiles<128>>(isa, choice, g, nb0, nb1, xb, xf, xq, m, out);
      }
      throw_internal("packed_gemm_blocks: int4_vnni4 block_k");
  }
  throw_internal("packed_gemm_blocks: unknown layout");
}

}  // namespace moepack::experts::cpu
