// The GEMM kernels the fast CPU experts share (lib/experts/cpu_experts.h), written once over a
// "tile" policy that says how one packed layout loads a step of a 32-row block. Internal to
// lib/experts: cpu_tiles.cpp defines the policies and instantiates these (packed_gemm_blocks
// below), cpu_experts.cpp drives them.
//
// A policy T is built for one block of 32 output rows (T(const Gemm&, block)) and provides:
//   kStepK        input columns per step (2: VNNI-2 pairs, 4: VNNI-4 quads)
//   kScaled       whether scales multiply partial sums; then kGroupSteps steps share a scale
//   kDirect       the layout is BF16 already (loading costs nothing to decode)
//   AVX-512 BF16  kVecs registers per step: load(s, w[kVecs]) as BF16 VNNI operands, each
//                 32-bit lane one row's kStepK/2 (1 or 2) column pairs of the step, multiplied
//                 by the step's activations broadcast the same way (x_operand); rows(acc, r[2])
//                 turns the kVecs accumulators into rows 0-15 and 16-31; scale(g, sc[2]) per row
//   AMX           the same load(), its registers rearranged into VNNI-2 rows of the two 16-row
//                 halves (vnni2_rows below: rows() for pairs, pairs() for quads), kChunkSteps
//                 steps at a time; kAmxDirect layouts are B tiles as they lie (tile_rows(half, step))
//   AVX-512F      the AVX2 panel decode below, read by a 16-lane FMA tile; one token by
//                 T::avx512f_one_token where a layout has it, else by the AVX2 kernels
//   AVX2          load8(s, o, j) the j-th float vector (kStepK == 2: four rows x two columns;
//                 == 4: two rows x four columns) of rows 8o..8o+7; scale8(g, o)
//   int16         optionally avx2_one_token_int16<Vnni> and avx512f_one_token_int16<Vnni>: a
//                 few tokens, one at a time, from activations quantized per block (Int16Rows,
//                 below), the products added by add_products<Vnni>
//   portable      value(r, k) the weight of row r of the block at column k; scale_at(r, g)
//   look-ahead    optionally prefetch(step): the line(s) of a step, fetched ahead by the
//                 decode loops (kStepBytes per step); MXFP4 also prescale_is_exact,
//                 exponent_deltas and load_prescaled (Prescales, below)
//
// Every output value is summed in one order fixed by the token count's path (one token, or
// several) and never by the thread count: row blocks are the unit of parallel work.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the masked-off source of unmasked
// operations, which -Wmaybe-uninitialized (and, for some, -Wuninitialized) reports once they
// are inlined: a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <cstring>

#include "lib/experts/cpu_experts.h"

namespace moepack::experts::cpu {

constexpr uint64_t kBlockRows = 32;  // rows per packed block (sgl-kernel BLOCK_N; two AMX groups of 16)

// One packed projection: out[m][r] = sum_k W[r][k] · x[m][k] over n rows and k columns.
struct Gemm {
  const uint8_t* w;
  const void* scale;
  uint64_t n, k;
  const int8_t* zeros = nullptr;  // int4_vnni4's zero points, and its scale groups along k
  uint64_t groups = 0;
};

// Activation rows as 16-bit integers, x ≈ q · unit per block of 32 columns, for the few-token
// decodes of the AVX2 and AVX-512F levels on layouts whose weights are small integers (MXFP4's
// E2M1 values doubled, -12..12; INT4's codes 0..15 and zero points 0..16; INT8): pmaddwd
// multiplies such words exactly and sums them in int32, which takes a third to a half of the
// instructions of widening every weight to FP32 for an FMA. Those decodes are bound by
// instructions, not bytes (Zen 5, one core, MXFP4 with FP32 weights: AVX2 11.5 GB/s and
// AVX-512F 22 GB/s from L2, the same as from memory), so the instructions are the rate.
//   The unit is the power of two that puts the block's largest magnitude at 2^13..2^14 - 1, so
// every value within 2^6 of it keeps its 8 BF16 significant bits exactly, and smaller ones are
// rounded to the block's grid (an error below 2^-14 of the block's largest, under the BF16
// rounding of that largest value itself). A block's int32 sums are exact; each 32-column
// group's sum times the unit is the group's dot product rounded once to FP32, then scaled as
// the FP32 kernels scale theirs.
//   A row is left to the FP32 kernels (ok = 0) when a block's largest magnitude is outside
// 2^-60..2^61 (or not finite), where units and products could leave FP32's normal range.
inline constexpr uint64_t kInt16Block = 32;
// The order of q within a row: columns in order (MXFP4's steps read column pairs), or each quad
// of columns 4s..4s+3 as (4s, 4s + 2, 4s + 1, 4s + 3) (the VNNI-4 steps of INT4 and INT8 read a row's even and
// odd columns from different words, so each pair is one 32-bit broadcast).
enum class Int16Order { none, columns, quad_pairs };
struct Int16Rows {
  const int16_t* q = nullptr;   // [m][k]
  const float* unit = nullptr;  // [m][k / kInt16Block]
  const uint8_t* ok = nullptr;  // [m]
  Int16Rows from_row(uint64_t row, uint64_t k) const { return {q + row * k, unit + row * (k / kInt16Block), ok + row}; }
  bool all_ok(uint64_t m) const { return std::all_of(ok, ok + m, [](uint8_t each) { return each != 0; }); }
};
// Up to how many tokens a block runs the one-token int16 decode once per token (the block's
// bytes read again from L1 or L2) rather than the FP32 panels: one core, a 1440 x 2880
// projection, Zen 5, MXFP4 / INT8 / INT4 in microseconds, panels -> int16 per token:
//   AVX2     4 tokens 723 -> 432, 570 -> 380, 894 -> 416; 8 tokens 1226 -> 905, 1136 -> 837,
//            1340 -> 897; 12 and 16 tokens about even
//   AVX-512F 4 tokens 306 -> 251, 333 -> 284, 395 -> 285; 5 about even; 6 tokens 374 -> 558,
//            404 -> 432, 582 -> 667 (its 16-lane panels amortize the decode sooner)
// The BF16 levels run the AVX-512F decodes where the choice says so (CpuKernelChoice::avx512f_for_bf16).
inline constexpr uint64_t kAvx2Int16MaxTokens = 8, kAvx512fInt16MaxTokens = 4;
inline constexpr bool avx512f_stands_in(CpuIsa isa, const CpuKernelChoice& choice) {
  return choice.avx512f_for_bf16 && (isa == CpuIsa::amx_bf16 || isa == CpuIsa::avx512_bf16);
}
inline constexpr uint64_t int16_max_tokens(CpuIsa isa, const CpuKernelChoice& choice) {
  if (isa == CpuIsa::avx2) return kAvx2Int16MaxTokens;
  return isa == CpuIsa::avx512f || avx512f_stands_in(isa, choice) ? kAvx512fInt16MaxTokens : 0;
}
// Quantizes one row of k floats (k a multiple of 32; BF16 values, as the kernels' activations
// are) into q [k] and unit [k / 32]; false, leaving them unspecified, when the row is left to the
// FP32 kernels. Needs AVX2 (the levels that read these rows have it).
bool quantize_int16_row(const float* x, uint64_t k, Int16Order order, int16_t* q, float* unit);
// The order in which the level's kernels read Int16Rows for the layout (its few-token decode at
// AVX2 and AVX-512F, and at the BF16 levels where AVX-512F stands in), or none when they read
// none: the caller quantizes the rows to it.
Int16Order int16_rows_order(CpuLayout layout, CpuIsa isa, const CpuKernelChoice& choice);
// Whether the level's kernels read the activations as floats too (not BF16 bits only): AVX2,
// AVX-512F and portable, and the BF16 levels where AVX-512F stands in.
inline constexpr bool reads_floats(CpuIsa isa, const CpuKernelChoice& choice) {
  return !(isa == CpuIsa::amx_bf16 || isa == CpuIsa::avx512_bf16) || avx512f_stands_in(isa, choice);
}

// The AVX-512 level: F, BW, VL, BF16 (vdpbf16ps) and VBMI (vpermi2b, the FP8 decode's byte
// tables). Every CPU with AVX-512 BF16 but Cooper Lake has VBMI; Cooper Lake runs the AVX2 kernels.
#define MOEPACK_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512bf16,avx512vl,avx512vbmi,avx2,fma")))
#define MOEPACK_AVX512_BF16_INLINE __attribute__((target("avx512f,avx512bw,avx512bf16,avx512vl,avx512vbmi,avx2,fma"), always_inline)) inline
// The AVX-512F level: F, BW and VL without BF16 (Skylake-SP, Cascade Lake, Ice Lake server, and
// their cloud instances): FP32 FMA on 16 lanes, word permutes for the FP4 decode. It includes
// AVX2 and FMA, so the AVX2 decoders inline into its kernels.
#define MOEPACK_AVX512F __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma")))
#define MOEPACK_AVX512F_INLINE __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma"), always_inline)) inline
#define MOEPACK_AVX2 __attribute__((target("avx2,fma")))
#define MOEPACK_AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) inline

// acc plus the products of a's and b's int16 words, each adjacent pair summed into its int32
// lane: pmaddwd and an add, or one vpdpwssd with VNNI (CpuKernelChoice::vnni; the same sums,
// which the int16 kernels keep below 2^31). The VNNI form is inline assembly so that only the
// instantiation chosen at run time holds it: with a target attribute for VNNI, the compiler
// could use VNNI anywhere in a kernel that must also run on CPUs without it (Skylake-SP's
// AVX-512F, Haswell's AVX2). AVX-VNNI ({vex}) reaches registers 0-15 only ("x").
template <bool Vnni>
MOEPACK_AVX512F_INLINE __m512i add_products(__m512i acc, __m512i a, __m512i b) {
  if constexpr (Vnni) {
    __asm__("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
    return acc;
  } else {
    return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
  }
}
template <bool Vnni>
MOEPACK_AVX2_INLINE __m256i add_products(__m256i acc, __m256i a, __m256i b) {
  if constexpr (Vnni) {
    __asm__("%{vex%} vpdpwssd %2, %1, %0" : "+x"(acc) : "x"(a), "x"(b));
    return acc;
  } else {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
  }
}

// ---- AVX-512 BF16 ------------------------------------------------------------------------

// The activations of step s broadcast to every lane: the column pair (VNNI-2) or the two pairs
// of a quad (VNNI-4, 64 bits: even lanes hold columns 4s, 4s+1 and odd lanes 4s+2, 4s+3).
template <uint64_t StepK>
MOEPACK_AVX512_BF16_INLINE __m512bh x_operand(const uint16_t* x, uint64_t s) {
  if constexpr (StepK == 2) {
    uint32_t pair;
    std::memcpy(&pair, x + 2 * s, 4);
    return (__m512bh)_mm512_set1_epi32(static_cast<int>(pair));
  } else {
    uint64_t quad;
    std::memcpy(&quad, x + 4 * s, 8);
    return (__m512bh)_mm512_set1_epi64(static_cast<long long>(quad));
  }
}

// `Tile` tokens (rows of x, `ldx` apart) against steps [s0, s1) of one block; the 32 results
// per token go to out (`ldo` apart), added to what is there when `add` (a later chunk of k).
// Scaled layouts keep only the group's partial sums in registers (Tile x kVecs of them) and fold
// each group into the output rows, which stay in L1: fma(sums, scale, out) in group order (from
// zero for the first), the same operations as a running total in registers, so a tile of 12
// tokens fits the 32 registers for two-register steps (6 for four).
template <class T, int Tile>
MOEPACK_AVX512_BF16 void avx512_tile(const T& t, const uint16_t* x, uint64_t ldx, uint64_t s0, uint64_t s1, float* out, uint64_t ldo, bool add) {
  if constexpr (T::kScaled) {
    bool first = !add;
    for (uint64_t g0 = s0; g0 < s1;) {
      const uint64_t group = g0 / T::kGroupSteps, g1 = std::min(s1, (group + 1) * T::kGroupSteps);
      __m512 acc[Tile][T::kVecs];
      for (int i = 0; i < Tile; ++i)
        for (int v = 0; v < T::kVecs; ++v) acc[i][v] = _mm512_setzero_ps();
      for (uint64_t s = g0; s < g1; ++s) {
        __m512bh w[T::kVecs];
        t.load(s, w);
        for (int i = 0; i < Tile; ++i) {
          const __m512bh xb = x_operand<T::kStepK>(x + i * ldx, s);
          for (int v = 0; v < T::kVecs; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], w[v], xb);
        }
      }
      __m512 sc[2];
      t.scale(group, sc);
      for (int i = 0; i < Tile; ++i) {
        __m512 r[2];
        T::rows(acc[i], r);
        for (int h = 0; h < 2; ++h) {
          float* o = out + i * ldo + 16 * h;
          _mm512_storeu_ps(o, _mm512_fmadd_ps(r[h], sc[h], first ? _mm512_setzero_ps() : _mm512_loadu_ps(o)));
        }
      }
      first = false;
      g0 = g1;
    }
  } else {
    static_assert(T::kVecs == 2, "an unscaled layout loads rows 0-15 and 16-31 as they are");
    __m512 total[Tile][2];
    for (int i = 0; i < Tile; ++i) {
      total[i][0] = add ? _mm512_loadu_ps(out + i * ldo) : _mm512_setzero_ps();
      total[i][1] = add ? _mm512_loadu_ps(out + i * ldo + 16) : _mm512_setzero_ps();
    }
    for (uint64_t s = s0; s < s1; ++s) {
      __m512bh w[2];
      if constexpr (requires { t.prefetch_next_block(s); }) t.prefetch_next_block(s);
      t.load(s, w);
      for (int i = 0; i < Tile; ++i) {
        const __m512bh xb = x_operand<T::kStepK>(x + i * ldx, s);
        total[i][0] = _mm512_dpbf16_ps(total[i][0], w[0], xb);
        total[i][1] = _mm512_dpbf16_ps(total[i][1], w[1], xb);
      }
    }
    for (int i = 0; i < Tile; ++i) {
      _mm512_storeu_ps(out + i * ldo, total[i][0]);
      _mm512_storeu_ps(out + i * ldo + 16, total[i][1]);
    }
  }
}

// All m tokens in tiles of `Tile`, the remainder in one smaller tile.
template <class T, int Tile>
MOEPACK_AVX512_BF16 void avx512_tail(const T& t, uint64_t rem, const uint16_t* x, uint64_t ldx, uint64_t s0, uint64_t s1, float* out, uint64_t ldo, bool add) {
  if constexpr (Tile > 1) {
    if (rem == Tile - 1) return avx512_tile<T, Tile - 1>(t, x, ldx, s0, s1, out, ldo, add);
    avx512_tail<T, Tile - 1>(t, rem, x, ldx, s0, s1, out, ldo, add);
  }
}

template <class T, int Tile>
MOEPACK_AVX512_BF16 void avx512_tokens(const T& t, const uint16_t* x, uint64_t ldx, uint64_t m, uint64_t s0, uint64_t s1, float* out, uint64_t ldo, bool add) {
  uint64_t i = 0;
  for (; i + Tile <= m; i += Tile) avx512_tile<T, Tile>(t, x + i * ldx, ldx, s0, s1, out + i * ldo, ldo, add);
  if (i < m) avx512_tail<T, Tile>(t, m - i, x + i * ldx, ldx, s0, s1, out + i * ldo, ldo, add);
}

// A layout may fetch a step's bytes ahead (T::prefetch(step); a step past the block is the next
// block's, and a prefetch past the mapping does not fault; T::kStepBytes apart). Chunks and
// panels are decoded in short bursts between long runs of tiles, too short for the hardware
// prefetcher to run ahead: without it, half the FP8 kernel's samples at 512 tokens sat on the
// weight load and its first use.
template <class T>
concept HasPrefetch = requires(const T& t, uint64_t step) { t.prefetch(step); };
// A layout's prefetch functions are forced inline: GCC 12 split MXFP4's (a condition around one
// prefetch) into an outlined body, judged that body free of side effects and deleted its calls,
// so no prefetch instruction was left in the binary and MXFP4 ran without one.
#define MOEPACK_PREFETCH_INLINE __attribute__((always_inline)) inline

// How far the one-token kernels fetch ahead of the step they read. The hardware prefetchers stop
// at 4 KiB pages, and an artifact's mapped experts are 4 KiB pages of the page cache: without
// this, each page's first lines are demand misses.
constexpr uint64_t kOneTokenAheadBytes = 4096;
template <class T>
constexpr uint64_t one_token_ahead_steps() { return kOneTokenAheadBytes / T::kStepBytes; }

// One token (decode): a single activation row leaves only kVecs accumulator chains, each
// waiting for its previous vdpbf16ps. Four banks (step mod 4) keep four times as many in
// flight; they are summed in a fixed order, so results stay deterministic. Every group (and k)
// holds a multiple of 4 steps: k is a multiple of 32.
template <class T>
MOEPACK_AVX512_BF16 void avx512_one_token(const T& t, const uint16_t* x, uint64_t steps, float* out) {
  __m512 total[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  const uint64_t group_steps = T::kScaled ? T::kGroupSteps : steps;
  for (uint64_t g0 = 0; g0 < steps; g0 += group_steps) {
    const uint64_t g1 = std::min(steps, g0 + group_steps);
    __m512 acc[4][T::kVecs];
    for (auto& bank : acc)
      for (auto& a : bank) a = _mm512_setzero_ps();
    for (uint64_t s = g0; s < g1; s += 4)
      for (int b = 0; b < 4; ++b) {
        __m512bh w[T::kVecs];
        if constexpr (HasPrefetch<T>) t.prefetch(s + b + one_token_ahead_steps<T>());
        t.load(s + b, w);
        const __m512bh xb = x_operand<T::kStepK>(x, s + b);
        for (int v = 0; v < T::kVecs; ++v) acc[b][v] = _mm512_dpbf16_ps(acc[b][v], w[v], xb);
      }
    __m512 sum[T::kVecs], r[2];
    for (int v = 0; v < T::kVecs; ++v) sum[v] = _mm512_add_ps(_mm512_add_ps(acc[0][v], acc[1][v]), _mm512_add_ps(acc[2][v], acc[3][v]));
    T::rows(sum, r);
    if constexpr (T::kScaled) {
      __m512 sc[2];
      t.scale(g0 / T::kGroupSteps, sc);
      total[0] = _mm512_fmadd_ps(r[0], sc[0], total[0]);
      total[1] = _mm512_fmadd_ps(r[1], sc[1], total[1]);
    } else {
      total[0] = _mm512_add_ps(total[0], r[0]);
      total[1] = _mm512_add_ps(total[1], r[1]);
    }
  }
  _mm512_storeu_ps(out, total[0]);
  _mm512_storeu_ps(out + 16, total[1]);
}

// A block's steps decoded once into BF16 registers' images, then read by the tile kernel for
// every token: the layout's decode is paid once per chunk instead of once per token tile.
// Scaled = false reads a prescaled chunk (below) as an unscaled layout.
template <class T, bool Scaled = T::kScaled>
struct Decoded {
  static constexpr bool kScaled = Scaled, kDirect = true;
  static constexpr int kVecs = T::kVecs;
  static constexpr uint64_t kStepK = T::kStepK, kGroupSteps = T::kGroupSteps;
  const T& tiles;
  const __m512bh* steps;  // [chunk steps][kVecs]
  uint64_t first;
  MOEPACK_AVX512_BF16_INLINE void load(uint64_t s, __m512bh* w) const {
    for (int v = 0; v < kVecs; ++v) w[v] = steps[(s - first) * kVecs + v];
  }
  MOEPACK_AVX512_BF16_INLINE static void rows(const __m512* acc, __m512* r) { T::rows(acc, r); }
  MOEPACK_AVX512_BF16_INLINE void scale(uint64_t g, __m512* sc) const { tiles.scale(g, sc); }
};

// Token counts from which a quantized block is decoded once per chunk rather than per tile.
constexpr uint64_t kDecodeOnceTokens = 8;

// A layout whose scales are powers of two (MXFP4's E8M0) may apply them to the weights as it
// decodes a chunk, where that is exact (T::prescale_is_exact over the chunk's groups): the
// chunk is then an unscaled BF16 operand, and the token tiles run it with no per-group fold.
// A fold costs a load, FMA and store per token and 16 rows, each 32 columns for MXFP4: a
// quarter of the tile's work. Prescaled chunks and folded ones may alternate in one block.
template <class T>
concept Prescales = requires(const T& t, uint64_t u, const __m512i* d, __m512i* dm, __m512bh* w) {
  { t.prescale_is_exact(u, u) } -> std::same_as<bool>;
  t.exponent_deltas(u, dm);
  t.load_prescaled(u, d, w);
};

// Decodes one chunk [c0, c1) step by step: prescaled when the layout allows it there.
template <class T>
struct ChunkDecoder {
  const T& tiles;
  bool prescaled = false;
  __m512i delta[2];
  ChunkDecoder(const T& t, uint64_t c0, uint64_t c1) : tiles(t) {
    if constexpr (Prescales<T>) prescaled = t.prescale_is_exact(c0 / T::kGroupSteps, (c1 + T::kGroupSteps - 1) / T::kGroupSteps);
  }
  MOEPACK_AVX512_BF16_INLINE void load(uint64_t s, __m512bh* w) {
    if constexpr (Prescales<T>) {
      if (prescaled) {
        if (s % T::kGroupSteps == 0) tiles.exponent_deltas(s / T::kGroupSteps, delta);
        return tiles.load_prescaled(s, delta, w);
      }
    }
    tiles.load(s, w);
  }
};

template <class T>
MOEPACK_AVX512_BF16 void avx512_block(const Gemm& g, uint64_t nb, const uint16_t* x, uint64_t m, float* out) {
  const T t(g, nb);
  const uint64_t steps = g.k / T::kStepK;
  float* o = out + nb * kBlockRows;
  if (m == 1) return avx512_one_token(t, x, steps, o);
  if constexpr (T::kDirect) {
    avx512_tokens<T, 12>(t, x, g.k, m, 0, steps, o, g.n, false);
  } else {
    if (m < kDecodeOnceTokens) return avx512_tokens<T, 4>(t, x, g.k, m, 0, steps, o, g.n, false);
    // 16 KiB of decoded steps: they stay in L1 while every token tile reads them.
    constexpr uint64_t kChunk = T::kChunkSteps;
    static_assert(kChunk % T::kGroupSteps == 0, "chunks hold whole scale groups");
    alignas(64) __m512bh buffer[kChunk * T::kVecs];
    for (uint64_t c0 = 0; c0 < steps; c0 += kChunk) {
      const uint64_t c1 = std::min(steps, c0 + kChunk);
      ChunkDecoder<T> decoder(t, c0, c1);
      for (uint64_t s = c0; s < c1; ++s) {
        if constexpr (HasPrefetch<T>) t.prefetch(s + kChunk);  // the next chunk, while this one is multiplied
        decoder.load(s, buffer + (s - c0) * T::kVecs);
      }
      if constexpr (Prescales<T>) {
        if (decoder.prescaled) {
          // Unscaled, the tile reads the two registers as rows 0-15 and 16-31 as they lie.
          static_assert(T::kVecs == 2 && T::kStepK == 2, "a prescaled layout's registers are its two 16-row halves");
          const Decoded<T, false> d{t, buffer, c0};
          avx512_tokens<Decoded<T, false>, 12>(d, x, g.k, m, c0, c1, o, g.n, c0 > 0);
          continue;
        }
      }
      const Decoded<T> d{t, buffer, c0};
      avx512_tokens<Decoded<T>, T::kVecs == 2 ? 12 : 6>(d, x, g.k, m, c0, c1, o, g.n, c0 > 0);
    }
  }
}

// ---- AMX ---------------------------------------------------------------------------------
// Tiles of 16 rows x 64 bytes (palette 1). tdpbf16ps C[M x 16] += A[M x 32] · B[16 x 32]: A is M
// tokens' 32 BF16 activations of one k-tile, B 16 VNNI-2 rows (column pairs 2p, 2p+1 of 16 output
// rows), C FP32. A 32-row block is two 16-row halves, so a k-tile takes two B tiles (h = 0, 1),
// and two token tiles share them: C tiles 0-3 (token tile i, half h: 2i + h), A tiles 4-5, B 6-7.
// Token tiles start at 0, 16, ...; the last starts at m - 16 when m > 16 is not a multiple of 16,
// so every tile holds min(m, 16) rows and one tile configuration serves the whole call; the rows
// it shares with the tile before are not written again.
//
// A scale multiplies each group's FP32 partial sums as on the other levels: C is zeroed, the
// group's k-tiles accumulate into it, and out = fma(C, scale, out) in group order (MXFP4 groups
// are one k-tile, FP8's four, INT8 W8A8's eight); unscaled layouts add chunk by chunk (decoded)
// or store C once (as they lie).
//
// The tile instructions are written as asm with memory clobbers (GCC 12's _tile_* macros tell
// the compiler neither what they read nor what they write), in functions built for AMX by target
// attributes: the binary runs everywhere and reaches them only where cpu_supports(amx_bf16).
// A build with MOEPACK_AMX_EMULATE runs them as C++ instead (below), for tests without AMX.
#define MOEPACK_AMX __attribute__((target("avx512f,avx512bw,avx512bf16,avx512vl,avx512vbmi,avx2,fma,amx-tile,amx-bf16")))
#define MOEPACK_AMX_INLINE __attribute__((target("avx512f,avx512bw,avx512bf16,avx512vl,avx512vbmi,avx2,fma,amx-tile,amx-bf16"), always_inline)) inline

constexpr uint64_t kAmxMinTokens = 5;       // sgl-kernel can_use_brgemm<BFloat16>: M > 4
constexpr uint64_t kTileRows = 16;          // tokens per A and C tile; pairs per B tile
constexpr uint64_t kTileK = 32;             // columns per k-tile
constexpr uint64_t kTileBytes = 64;         // bytes per tile row
constexpr uint64_t kAmxChunkPairs = 128;    // decoded VNNI-2 rows per half and chunk (256 columns, 16 KiB)

namespace amx {

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

#ifdef MOEPACK_AMX_EMULATE
// The tile instructions as plain C++ on eight tiles in memory (CMake -DMOEPACK_AMX_EMULATE=ON):
// the AMX level's tile logic (configuration, strides, overlapping tiles, flushes) then runs and
// is tested on a machine without AMX. tdpbf16ps follows Intel's pseudocode: per output, the
// pairs in order, each of the pair's two products added and rounded in FP32 (no DAZ/FTZ).
struct EmulatedTiles {
  uint8_t tile[8][kTileRows][kTileBytes];
  uint64_t rows[8];
};
inline thread_local EmulatedTiles emulated;
inline void configure(uint64_t rows) {
  for (int t = 0; t < 8; ++t) emulated.rows[t] = t < 6 ? rows : kTileRows;
  std::memset(emulated.tile, 0x5A, sizeof emulated.tile);  // garbage until loaded or zeroed
}
inline void release() {}
template <int T>
inline void zero() {
  std::memset(emulated.tile[T], 0, sizeof emulated.tile[T]);
}
template <int T>
inline void load(const void* base, uint64_t stride) {
  for (uint64_t r = 0; r < emulated.rows[T]; ++r) std::memcpy(emulated.tile[T][r], static_cast<const uint8_t*>(base) + r * stride, kTileBytes);
}
template <int T>
inline void store(void* base, uint64_t stride) {
  for (uint64_t r = 0; r < emulated.rows[T]; ++r) std::memcpy(static_cast<uint8_t*>(base) + r * stride, emulated.tile[T][r], kTileBytes);
}
inline float bf16_at(const uint8_t* row, int i) {
  uint16_t h;
  std::memcpy(&h, row + 2 * i, 2);
  const uint32_t bits = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
template <int C, int A, int B>
inline void dot() {
  for (uint64_t m = 0; m < emulated.rows[C]; ++m) {
    float acc[16];
    std::memcpy(acc, emulated.tile[C][m], kTileBytes);
    for (int p = 0; p < 16; ++p)
      for (int n = 0; n < 16; ++n) {
        acc[n] += bf16_at(emulated.tile[A][m], 2 * p) * bf16_at(emulated.tile[B][p], 2 * n);
        acc[n] += bf16_at(emulated.tile[A][m], 2 * p + 1) * bf16_at(emulated.tile[B][p], 2 * n + 1);
      }
    std::memcpy(emulated.tile[C][m], acc, kTileBytes);
  }
}
#else
// Tiles 0-5 (C and A) hold `rows` rows, 6-7 (B) 16; all 64 bytes wide.
MOEPACK_AMX_INLINE void configure(uint64_t rows) {
  TileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.colsb[t] = kTileBytes;
    c.rows[t] = static_cast<uint8_t>(t < 6 ? rows : kTileRows);
  }
  __asm__ volatile("ldtilecfg %0" ::"m"(c) : "memory");
}
MOEPACK_AMX_INLINE void release() { __asm__ volatile("tilerelease" ::: "memory"); }
template <int T>
MOEPACK_AMX_INLINE void zero() {
  __asm__ volatile("tilezero %%tmm%c0" ::"i"(T));
}
template <int T>
MOEPACK_AMX_INLINE void load(const void* base, uint64_t stride) {
  __asm__ volatile("tileloadd (%0,%1,1), %%tmm%c2" ::"r"(base), "r"(stride), "i"(T) : "memory");
}
template <int T>
MOEPACK_AMX_INLINE void store(void* base, uint64_t stride) {
  __asm__ volatile("tilestored %%tmm%c2, (%0,%1,1)" ::"r"(base), "r"(stride), "i"(T) : "memory");
}
template <int C, int A, int B>  // C += A · B
MOEPACK_AMX_INLINE void dot() {
  __asm__ volatile("tdpbf16ps %%tmm%c2, %%tmm%c1, %%tmm%c0" ::"i"(C), "i"(A), "i"(B));
}

#endif
}  // namespace amx

// The decoded registers of one step as VNNI-2 rows: out[2c + h] is half h's column pair c of
// the step (16 rows in order), kStepK entries.
template <class T>
MOEPACK_AMX_INLINE void vnni2_rows(const __m512bh* w, __m512bh* out) {
  if constexpr (T::kStepK == 2) {
    // Each 32-bit lane is one row's pair: rows() puts lanes in row order, on weights as on sums.
    const __m512 in[2] = {(__m512)w[0], (__m512)w[1]};
    __m512 r[2];
    T::rows(in, r);
    out[0] = (__m512bh)r[0];
    out[1] = (__m512bh)r[1];
  } else {
    T::pairs(w, out);
  }
}

// Token tiles i (and i + 1 when Two) over k-tiles [0, n): B of half h at b[h] + 1024 j, A at
// x[i] + 32 j (tokens ldx_bytes apart). C tiles are accumulated as they are.
template <bool Two>
MOEPACK_AMX_INLINE void amx_dot(const uint16_t* const* x, uint64_t ldx_bytes, const uint8_t* const* b, uint64_t n) {
  for (uint64_t j = 0; j < n; ++j) {
    amx::load<6>(b[0] + j * kTileRows * kTileBytes, kTileBytes);
    amx::load<7>(b[1] + j * kTileRows * kTileBytes, kTileBytes);
    amx::load<4>(x[0] + j * kTileK, ldx_bytes);
    amx::dot<0, 4, 6>();
    amx::dot<1, 4, 7>();
    if constexpr (Two) {
      amx::load<5>(x[1] + j * kTileK, ldx_bytes);
      amx::dot<2, 5, 6>();
      amx::dot<3, 5, 7>();
    }
  }
}

template <bool Two>
MOEPACK_AMX_INLINE void amx_zero() {
  amx::zero<0>();
  amx::zero<1>();
  if constexpr (Two) {
    amx::zero<2>();
    amx::zero<3>();
  }
}

// The C tiles into c[tile][row][16] (tile = 2i + h).
template <bool Two>
MOEPACK_AMX_INLINE void amx_store(float (*c)[kTileRows][16]) {
  amx::store<0>(c[0], kTileBytes);
  amx::store<1>(c[1], kTileBytes);
  if constexpr (Two) {
    amx::store<2>(c[2], kTileBytes);
    amx::store<3>(c[3], kTileBytes);
  }
}

// Rows [skip, rows) of token tile i's stored C (tokens from `first`, ldo apart in out, 32
// values each) into out: set (first group), or added (scaled by sc when Scaled).
template <bool Scaled>
MOEPACK_AMX_INLINE void amx_flush(const float (*c)[kTileRows][16], uint64_t skip, uint64_t rows, float* out, uint64_t ldo, const __m512* sc, bool set) {
  for (uint64_t r = skip; r < rows; ++r)
    for (int h = 0; h < 2; ++h) {
      float* o = out + r * ldo + 16 * h;
      const __m512 v = _mm512_load_ps(c[h][r]);
      __m512 y;
      if constexpr (Scaled) y = set ? _mm512_mul_ps(v, sc[h]) : _mm512_fmadd_ps(v, sc[h], _mm512_loadu_ps(o));
      else y = set ? v : _mm512_add_ps(v, _mm512_loadu_ps(o));
      _mm512_storeu_ps(o, y);
    }
}

// Where token tile i starts, and how many of its rows the tile before already wrote.
struct TokenTiles {
  uint64_t m, rows;  // rows = min(m, 16)
  uint64_t start(uint64_t i) const { return std::min(i * kTileRows, m - rows); }
  uint64_t skip(uint64_t i) const { return i * kTileRows - start(i); }
};

// A layout AMX reads as it lies: token tiles i (and i + 1) over every k-tile, C stored once.
template <class T, bool Two>
MOEPACK_AMX void amx_direct_tiles(const T& t, const Gemm& g, const TokenTiles& tt, uint64_t i, const uint16_t* x, float* o, float (*c)[kTileRows][16]) {
  const uint16_t* xs[2] = {x + tt.start(i) * g.k, Two ? x + tt.start(i + 1) * g.k : nullptr};
  const uint8_t* b[2] = {t.tile_rows(0, 0), t.tile_rows(1, 0)};
  amx_zero<Two>();
  amx_dot<Two>(xs, g.k * 2, b, g.k / kTileK);
  const uint64_t ldo_bytes = g.n * 4;
  if (tt.skip(i) == 0) amx::store<0>(o + tt.start(i) * g.n, ldo_bytes), amx::store<1>(o + tt.start(i) * g.n + 16, ldo_bytes);
  if constexpr (Two)
    if (tt.skip(i + 1) == 0) amx::store<2>(o + tt.start(i + 1) * g.n, ldo_bytes), amx::store<3>(o + tt.start(i + 1) * g.n + 16, ldo_bytes);
  // The last tile overlaps the one before: only its new rows are written.
  const uint64_t last = Two ? i + 1 : i;
  if (tt.skip(last) > 0) {
    amx_store<Two>(c);
    amx_flush<false>(c + 2 * (last - i), tt.skip(last), tt.rows, o + tt.start(last) * g.n, g.n, nullptr, true);
  }
}

// A decoded chunk (k-tiles [j0, j1), VNNI-2 rows of half h at b[h]): token tiles i (and i + 1),
// one scale group at a time when Scaled (T::kScaled, and the chunk not prescaled), else at once.
template <class T, bool Two, bool Scaled>
MOEPACK_AMX void amx_decoded_tiles(const T& t, const Gemm& g, const TokenTiles& tt, uint64_t i, const uint16_t* x, const uint8_t* const* b, uint64_t j0,
                                   uint64_t j1, float* o, float (*c)[kTileRows][16]) {
  static_assert(T::kScaled || !Scaled);
  constexpr uint64_t kGroupTiles = (Scaled ? T::kGroupSteps : T::kChunkSteps) * T::kStepK / kTileK;
  static_assert(kGroupTiles > 0 && (kAmxChunkPairs * 2 / kTileK) % kGroupTiles == 0, "chunks hold whole scale groups");
  for (uint64_t g0 = j0; g0 < j1; g0 += kGroupTiles) {
    const uint64_t g1 = std::min(j1, g0 + kGroupTiles);
    const uint16_t* xg[2] = {x + tt.start(i) * g.k + g0 * kTileK, Two ? x + tt.start(i + 1) * g.k + g0 * kTileK : nullptr};
    const uint8_t* bg[2] = {b[0] + (g0 - j0) * kTileRows * kTileBytes, b[1] + (g0 - j0) * kTileRows * kTileBytes};
    amx_zero<Two>();
    amx_dot<Two>(xg, g.k * 2, bg, g1 - g0);
    amx_store<Two>(c);
    __m512 sc[2] = {_mm512_set1_ps(1.0f), _mm512_set1_ps(1.0f)};
    if constexpr (Scaled) t.scale(g0 / kGroupTiles, sc);
    for (uint64_t u = 0; u < (Two ? 2u : 1u); ++u)
      amx_flush<Scaled>(c + 2 * u, tt.skip(i + u), tt.rows, o + tt.start(i + u) * g.n, g.n, sc, g0 == 0);
  }
}

// One 32-row block for m >= kAmxMinTokens tokens, the tiles configured for min(m, 16) rows.
template <class T>
MOEPACK_AMX void amx_block(const Gemm& g, uint64_t nb, const uint16_t* x, uint64_t m, float* out) {
  const T t(g, nb);
  const TokenTiles tt{m, std::min(m, kTileRows)};
  const uint64_t tiles = (m + kTileRows - 1) / kTileRows;
  float* o = out + nb * kBlockRows;
  alignas(64) float c[4][kTileRows][16];
  if constexpr (T::kAmxDirect) {
    uint64_t i = 0;
    for (; i + 2 <= tiles; i += 2) amx_direct_tiles<T, true>(t, g, tt, i, x, o, c);
    if (i < tiles) amx_direct_tiles<T, false>(t, g, tt, i, x, o, c);
  } else {
    static_assert(T::kChunkSteps * T::kStepK / 2 == kAmxChunkPairs, "a chunk is 256 columns");
    alignas(64) __m512bh buffer[2 * kAmxChunkPairs];  // [half][pair]
    const uint8_t* b[2] = {reinterpret_cast<const uint8_t*>(buffer), reinterpret_cast<const uint8_t*>(buffer + kAmxChunkPairs)};
    const uint64_t steps = g.k / T::kStepK;
    for (uint64_t c0 = 0; c0 < steps; c0 += T::kChunkSteps) {
      const uint64_t c1 = std::min(steps, c0 + T::kChunkSteps);
      ChunkDecoder<T> decoder(t, c0, c1);
      for (uint64_t s = c0; s < c1; ++s) {
        __m512bh w[T::kVecs], v[T::kStepK];
        if constexpr (HasPrefetch<T>) t.prefetch(s + T::kChunkSteps);
        decoder.load(s, w);
        vnni2_rows<T>(w, v);
        for (uint64_t q = 0; q < T::kStepK / 2; ++q) {
          const uint64_t p = (s - c0) * (T::kStepK / 2) + q;
          buffer[p] = v[2 * q];
          buffer[kAmxChunkPairs + p] = v[2 * q + 1];
        }
      }
      const uint64_t j0 = c0 * T::kStepK / kTileK, j1 = c1 * T::kStepK / kTileK;
      uint64_t i = 0;
      if (T::kScaled && !decoder.prescaled) {
        for (; i + 2 <= tiles; i += 2) amx_decoded_tiles<T, true, T::kScaled>(t, g, tt, i, x, b, j0, j1, o, c);
        if (i < tiles) amx_decoded_tiles<T, false, T::kScaled>(t, g, tt, i, x, b, j0, j1, o, c);
      } else {
        for (; i + 2 <= tiles; i += 2) amx_decoded_tiles<T, true, false>(t, g, tt, i, x, b, j0, j1, o, c);
        if (i < tiles) amx_decoded_tiles<T, false, false>(t, g, tt, i, x, b, j0, j1, o, c);
      }
    }
  }
}

// ---- AVX2 + FMA --------------------------------------------------------------------------

// Eight row sums from the accumulators of one octet of rows (see load8).
template <int Per>
MOEPACK_AVX2_INLINE __m256 avx2_rows(const __m256* a) {
  if constexpr (Per == 2) {
    // a[j] lanes: (row 4j+i, column c) at 2i + c; hadd sums the pairs, interleaving 128-bit halves.
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_hadd_ps(a[0], a[1])), 0xD8));
  } else {
    // a[j] lanes: (row 2j + i, column c) at 4i + c.
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    return _mm256_permutevar8x32_ps(h, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  }
}

// The activations of step s as floats, repeated across the lanes the way load8 lays columns.
template <uint64_t StepK>
MOEPACK_AVX2_INLINE __m256 x8(const float* x, uint64_t s) {
  if constexpr (StepK == 2) {
    double pair;
    std::memcpy(&pair, x + 2 * s, 8);
    return _mm256_castpd_ps(_mm256_set1_pd(pair));
  } else {
    return _mm256_broadcast_ps(reinterpret_cast<const __m128*>(x + 4 * s));
  }
}

// Tokens one at a time; x as floats (the BF16 activations widened). Decode: each token reads
// the block's packed bytes once, decoding them in registers. A pass over the block's steps
// covers as many row octets as eight accumulators hold (four for column pairs, two for quads:
// the whole step's bytes, or its first and then its second 64-byte half), so every cache line
// of the block is read from memory once, and eight independent FMA chains keep both FMA units
// busy.
template <class T>
MOEPACK_AVX2 void avx2_block_per_token(const Gemm& g, uint64_t nb, const float* x, uint64_t m, float* out) {
  constexpr int kPer = static_cast<int>(T::kStepK);  // vectors per step and octet
  constexpr int kOctets = 8 / kPer;                  // octets per pass
  const T t(g, nb);
  const uint64_t steps = g.k / T::kStepK, group_steps = T::kScaled ? T::kGroupSteps : steps;
  for (uint64_t i = 0; i < m; ++i) {
    const float* xm = x + i * g.k;
    float* o = out + i * g.n + nb * kBlockRows;
    for (int o0 = 0; o0 < 4; o0 += kOctets) {
      __m256 total[kOctets];
      for (auto& v : total) v = _mm256_setzero_ps();
      for (uint64_t g0 = 0; g0 < steps; g0 += group_steps) {
        const uint64_t g1 = std::min(steps, g0 + group_steps);
        __m256 acc[kOctets][kPer];
        for (auto& octet : acc)
          for (auto& a : octet) a = _mm256_setzero_ps();
        for (uint64_t s = g0; s < g1; ++s) {
          if constexpr (HasPrefetch<T>)
            if (o0 == 0) t.prefetch(s + one_token_ahead_steps<T>());  // the first pass over the steps
          const __m256 xv = x8<T::kStepK>(xm, s);
          for (int u = 0; u < kOctets; ++u)
            for (int j = 0; j < kPer; ++j) acc[u][j] = _mm256_fmadd_ps(t.load8(s, o0 + u, j), xv, acc[u][j]);
        }
        for (int u = 0; u < kOctets; ++u) {
          const __m256 r = avx2_rows<kPer>(acc[u]);
          if constexpr (T::kScaled) total[u] = _mm256_fmadd_ps(r, t.scale8(g0 / T::kGroupSteps, o0 + u), total[u]);
          else total[u] = _mm256_add_ps(total[u], r);
        }
      }
      for (int u = 0; u < kOctets; ++u) _mm256_storeu_ps(o + 8 * (o0 + u), total[u]);
    }
  }
}

// Several tokens (prefill): the block is decoded once per chunk of kPanelK columns into a panel
// of floats, its scales folded in (an E8M0 scale is exact; an FP8 block or INT8 row scale rounds
// each weight once in FP32, 2^-24 relative), columns outer: panel[c][32] holds column c of the
// 32 rows. Every token tile then runs over the panel from L1 (16 KiB) with kTileTokens x 16
// accumulators in registers: per column two panel loads, kTileTokens broadcasts and
// 2 kTileTokens FMAs (the 6 x 16 shape of BLIS' Haswell SGEMM kernel), so the decode is paid once
// per block and chunk instead of once per token. Each output is one FMA chain over k in
// order, whatever the tiles and threads.
//
// Columns come out of the decoded registers by an in-register transpose that leaves the rows of
// each octet permuted (kStepK 2: 0 1 4 5 2 3 6 7, kStepK 4: 0 2 4 6 1 3 5 7); the scales are
// permuted the same way, and the sums are put back in row order when they are stored.
constexpr uint64_t kPanelK = 128;        // columns per panel: 128 x 32 floats, 16 KiB
constexpr int kTileTokens = 6;           // token rows per register tile
constexpr uint64_t kPanelMinTokens = 2;  // from here a block is decoded into panels

template <uint64_t StepK>
MOEPACK_AVX2_INLINE __m256i panel_order() {
  if constexpr (StepK == 2) return _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
  else return _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
}
// The permutation back to row order: lane r of the result is the lane holding row r.
template <uint64_t StepK>
MOEPACK_AVX2_INLINE __m256i row_order() {
  if constexpr (StepK == 2) return _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);  // its own inverse
  else return _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
}

// Steps [s0, s1) of the block decoded into panel[(s - s0) kStepK + c][32], scaled; a layout
// that can fetch ahead (HasPrefetch) fetches step s + `ahead` as it decodes step s: the next
// panel's bytes arrive while the token tiles run this one (as avx512_block's chunks do).
template <class T>
MOEPACK_AVX2_INLINE void avx2_decode_panel(const T& t, uint64_t s0, uint64_t s1, uint64_t ahead, float* panel) {
  for (uint64_t g0 = s0; g0 < s1;) {
    const uint64_t group = T::kScaled ? g0 / T::kGroupSteps : 0;
    const uint64_t g1 = T::kScaled ? std::min(s1, (group + 1) * T::kGroupSteps) : s1;
    __m256 sc[4];
    if constexpr (T::kScaled)
      for (int o = 0; o < 4; ++o) sc[o] = _mm256_permutevar8x32_ps(t.scale8(group, o), panel_order<T::kStepK>());
    for (uint64_t s = g0; s < g1; ++s) {
      if constexpr (HasPrefetch<T>) t.prefetch(s + ahead);
      float* col = panel + (s - s0) * T::kStepK * kBlockRows;
      for (int o = 0; o < 4; ++o) {
        __m256 c[T::kStepK];
        if constexpr (T::kStepK == 2) {
          const __m256 a = t.load8(s, o, 0), b = t.load8(s, o, 1);  // rows 0-3 and 4-7, column pairs
          c[0] = _mm256_shuffle_ps(a, b, 0x88);
          c[1] = _mm256_shuffle_ps(a, b, 0xDD);
        } else {
          const __m256 v0 = t.load8(s, o, 0), v1 = t.load8(s, o, 1), v2 = t.load8(s, o, 2), v3 = t.load8(s, o, 3);  // rows 2j, 2j+1: four columns
          const __m256 t0 = _mm256_unpacklo_ps(v0, v1), t1 = _mm256_unpacklo_ps(v2, v3), t2 = _mm256_unpackhi_ps(v0, v1), t3 = _mm256_unpackhi_ps(v2, v3);
          c[0] = _mm256_shuffle_ps(t0, t1, 0x44);
          c[1] = _mm256_shuffle_ps(t0, t1, 0xEE);
          c[2] = _mm256_shuffle_ps(t2, t3, 0x44);
          c[3] = _mm256_shuffle_ps(t2, t3, 0xEE);
        }
        for (uint64_t j = 0; j < T::kStepK; ++j) {
          if constexpr (T::kScaled) c[j] = _mm256_mul_ps(c[j], sc[o]);
          _mm256_store_ps(col + j * kBlockRows + 8 * o, c[j]);
        }
      }
    }
    g0 = g1;
  }
}

// An accumulator's start: zero, or the sums so far (in row order at `o`) in panel order.
MOEPACK_AVX2_INLINE __m256 panel_start(bool zero, const float* o, __m256i to_panel) {
  return zero ? _mm256_setzero_ps() : _mm256_permutevar8x32_ps(_mm256_loadu_ps(o), to_panel);
}

// Tokens [0, Rows) (x rows ldx apart) times half h (rows 16h..16h+15) of a panel of `cols`
// columns; the sums continue those in out (ldo apart) unless `first`. The accumulators are
// named variables, not an array: GCC 12 keeps an array of twelve vectors in memory and stores
// every one after each FMA, which halves the kernel's speed.
template <uint64_t StepK, int Rows>
MOEPACK_AVX2 void avx2_panel_tile(const float* panel, uint64_t cols, int h, const float* x, uint64_t ldx, float* out, uint64_t ldo, bool first) {
  static_assert(Rows >= 1 && Rows <= 6, "six token rows at most: 12 accumulators, 2 weights, 1 broadcast");
  const __m256i to_panel = panel_order<StepK>(), to_rows = row_order<StepK>();
#define MOEPACK_PANEL_START(i, v) panel_start(first || i >= Rows, out + i * ldo + 16 * h + 8 * v, to_panel)
  __m256 a00 = MOEPACK_PANEL_START(0, 0), a01 = MOEPACK_PANEL_START(0, 1), a10 = MOEPACK_PANEL_START(1, 0), a11 = MOEPACK_PANEL_START(1, 1);
  __m256 a20 = MOEPACK_PANEL_START(2, 0), a21 = MOEPACK_PANEL_START(2, 1), a30 = MOEPACK_PANEL_START(3, 0), a31 = MOEPACK_PANEL_START(3, 1);
  __m256 a40 = MOEPACK_PANEL_START(4, 0), a41 = MOEPACK_PANEL_START(4, 1), a50 = MOEPACK_PANEL_START(5, 0), a51 = MOEPACK_PANEL_START(5, 1);
#undef MOEPACK_PANEL_START
  const float* p = panel + 16 * h;
  for (uint64_t c = 0; c < cols; ++c, p += kBlockRows) {
    const __m256 w0 = _mm256_load_ps(p), w1 = _mm256_load_ps(p + 8);
#define MOEPACK_PANEL_ROW(i)                                          \
  if constexpr (Rows > i) {                                           \
    const __m256 xv = _mm256_broadcast_ss(x + i * ldx + c);           \
    a##i##0 = _mm256_fmadd_ps(w0, xv, a##i##0);                       \
    a##i##1 = _mm256_fmadd_ps(w1, xv, a##i##1);                       \
  }
    MOEPACK_PANEL_ROW(0)
    MOEPACK_PANEL_ROW(1)
    MOEPACK_PANEL_ROW(2)
    MOEPACK_PANEL_ROW(3)
    MOEPACK_PANEL_ROW(4)
    MOEPACK_PANEL_ROW(5)
#undef MOEPACK_PANEL_ROW
  }
  const __m256 sums[6][2] = {{a00, a01}, {a10, a11}, {a20, a21}, {a30, a31}, {a40, a41}, {a50, a51}};
  for (int i = 0; i < Rows; ++i)
    for (int v = 0; v < 2; ++v) _mm256_storeu_ps(out + i * ldo + 16 * h + 8 * v, _mm256_permutevar8x32_ps(sums[i][v], to_rows));
}

// The last `rem` (< kTileTokens) tokens in one tile of that size.
template <uint64_t StepK, int Rows>
MOEPACK_AVX2 void avx2_panel_rest(uint64_t rem, const float* panel, uint64_t cols, int h, const float* x, uint64_t ldx, float* out, uint64_t ldo, bool first) {
  if constexpr (Rows > 0) {
    if (rem == Rows) return avx2_panel_tile<StepK, Rows>(panel, cols, h, x, ldx, out, ldo, first);
    avx2_panel_rest<StepK, Rows - 1>(rem, panel, cols, h, x, ldx, out, ldo, first);
  }
}

template <class T>
MOEPACK_AVX2 void avx2_block_panels(const Gemm& g, uint64_t nb, const float* x, uint64_t m, float* out) {
  const T t(g, nb);
  constexpr uint64_t kPanelSteps = kPanelK / T::kStepK;
  alignas(32) float panel[kPanelK * kBlockRows];
  float* o = out + nb * kBlockRows;
  const uint64_t steps = g.k / T::kStepK;
  for (uint64_t s0 = 0; s0 < steps; s0 += kPanelSteps) {
    const uint64_t s1 = std::min(steps, s0 + kPanelSteps), cols = (s1 - s0) * T::kStepK, c0 = s0 * T::kStepK;
    avx2_decode_panel(t, s0, s1, kPanelSteps, panel);
    for (int h = 0; h < 2; ++h) {
      uint64_t i = 0;
      for (; i + kTileTokens <= m; i += kTileTokens)
        avx2_panel_tile<T::kStepK, kTileTokens>(panel, cols, h, x + i * g.k + c0, g.k, o + i * g.n, g.n, s0 == 0);
      if (i < m) avx2_panel_rest<T::kStepK, kTileTokens - 1>(m - i, panel, cols, h, x + i * g.k + c0, g.k, o + i * g.n, g.n, s0 == 0);
    }
  }
}

// A layout may decode one token its own way (T::avx2_one_token: whole steps in registers); it
// returns false for a block it leaves to the generic kernel (FP8 NaN codes).
template <class T>
concept HasAvx2OneToken = requires(const T& t, const float* x, uint64_t steps, float* out) {
  { t.avx2_one_token(x, steps, out) } -> std::same_as<bool>;
};

// Where a layout has that decode (FP8; and MXFP4 and INT4 when the int16 decode below does not
// take the rows), a block of two tokens runs it once per token instead of through
// the panels: the second pass reads the block (32 rows, at most 128 KiB) from L2, while the
// panels' f32 decode and stores cost more than that at two tokens on 8 lanes. Measured on Zen 5
// (8 tokens over 32 experts, mostly one or two a block): MXFP4 28.1 -> 20.4 ms, INT4 12.1 -> 8.3
// ms. AVX-512F's panels stay the faster at two tokens (13.4-14.5 vs 15.0-15.2 ms), so that
// level keeps kPanelMinTokens.
template <class T>
constexpr uint64_t avx2_panel_min_tokens() { return HasAvx2OneToken<T> ? 3 : kPanelMinTokens; }

// A layout may also decode one token from Int16Rows (T::avx2_one_token_int16), on the rows
// quantized for it.
template <class T>
concept HasAvx2OneTokenInt16 = requires(const T& t, const int16_t* q, const float* unit, uint64_t steps, float* out) {
  { t.template avx2_one_token_int16<false>(q, unit, steps, out) };
};

// Vnni: the int16 decodes add their products with vpdpwssd (add_products).
template <class T, bool Vnni = false>
MOEPACK_AVX2 void avx2_block(const Gemm& g, uint64_t nb, const float* x, const Int16Rows* xq, uint64_t m, float* out) {
  if constexpr (HasAvx2OneTokenInt16<T>)
    if (m <= kAvx2Int16MaxTokens && xq && xq->all_ok(m)) {
      const T t(g, nb);
      for (uint64_t i = 0; i < m; ++i) t.template avx2_one_token_int16<Vnni>(xq->q + i * g.k, xq->unit + i * (g.k / kInt16Block), g.k / T::kStepK, out + i * g.n + nb * kBlockRows);
      return;
    }
  if (m >= avx2_panel_min_tokens<T>()) return avx2_block_panels<T>(g, nb, x, m, out);
  if constexpr (HasAvx2OneToken<T> || HasAvx2OneTokenInt16<T>) {
    const T t(g, nb);
    bool done = true;
    for (uint64_t i = 0; i < m && done; ++i) {
      float* o = out + i * g.n + nb * kBlockRows;
      if constexpr (HasAvx2OneTokenInt16<T>)
        if (xq && xq->ok[i]) {
          t.template avx2_one_token_int16<Vnni>(xq->q + i * g.k, xq->unit + i * (g.k / kInt16Block), g.k / T::kStepK, o);
          continue;
        }
      if constexpr (HasAvx2OneToken<T>) done = t.avx2_one_token(x + i * g.k, g.k / T::kStepK, o);
      else done = false;  // the generic kernel below writes every row
    }
    if (done) return;
  }
  avx2_block_per_token<T>(g, nb, x, m, out);
}

// ---- AVX-512F (no BF16) -------------------------------------------------------------------
// Prefill decodes each block into the AVX2 kernels' panels (the same panel: column c's 32 rows,
// each octet in panel order; 16 lanes at a time where the layout has load16, else the AVX2
// decoders) and runs them through a tile twice as wide:
// one 16-lane register holds a whole half (two octets), so a column is two loads for all 32
// rows, and 32 registers hold 12 token rows x 2 halves of accumulators, a weight pair and a
// broadcast. Each output is one FMA chain over k in column order, as on the AVX2 level.
constexpr int kTileTokens512 = 12;

// The panel order of both octets of a half (lanes 8-15: the second octet), and back.
template <uint64_t StepK>
MOEPACK_AVX512F_INLINE __m512i panel_order16() {
  const __m256i o = panel_order<StepK>();
  return _mm512_inserti64x4(_mm512_castsi256_si512(o), _mm256_add_epi32(o, _mm256_set1_epi32(8)), 1);
}
template <uint64_t StepK>
MOEPACK_AVX512F_INLINE __m512i row_order16() {
  const __m256i o = row_order<StepK>();
  return _mm512_inserti64x4(_mm512_castsi256_si512(o), _mm256_add_epi32(o, _mm256_set1_epi32(8)), 1);
}

// Tokens [0, Rows) times a panel of `cols` columns, all 32 rows; the sums continue those in out
// unless `first`. Named accumulators, as in avx2_panel_tile (GCC keeps an array in memory).
template <uint64_t StepK, int Rows>
MOEPACK_AVX512F void avx512f_panel_tile(const float* panel, uint64_t cols, const float* x, uint64_t ldx, float* out, uint64_t ldo, bool first) {
  static_assert(Rows >= 1 && Rows <= kTileTokens512, "twelve token rows at most: 24 accumulators, 2 weights, 1 broadcast");
  const __m512i to_panel = panel_order16<StepK>(), to_rows = row_order16<StepK>();
#define MOEPACK_P16_START(i, h) \
  ((first || i >= Rows) ? _mm512_setzero_ps() : _mm512_permutexvar_ps(to_panel, _mm512_loadu_ps(out + (i < Rows ? i : 0) * ldo + 16 * h)))
#define MOEPACK_P16_DECLARE(i) __m512 a##i##_0 = MOEPACK_P16_START(i, 0), a##i##_1 = MOEPACK_P16_START(i, 1);
  MOEPACK_P16_DECLARE(0) MOEPACK_P16_DECLARE(1) MOEPACK_P16_DECLARE(2) MOEPACK_P16_DECLARE(3)
  MOEPACK_P16_DECLARE(4) MOEPACK_P16_DECLARE(5) MOEPACK_P16_DECLARE(6) MOEPACK_P16_DECLARE(7)
  MOEPACK_P16_DECLARE(8) MOEPACK_P16_DECLARE(9) MOEPACK_P16_DECLARE(10) MOEPACK_P16_DECLARE(11)
#undef MOEPACK_P16_DECLARE
#undef MOEPACK_P16_START
  const float* p = panel;
  for (uint64_t c = 0; c < cols; ++c, p += kBlockRows) {
    const __m512 w0 = _mm512_load_ps(p), w1 = _mm512_load_ps(p + 16);
#define MOEPACK_P16_ROW(i)                                   \
  if constexpr (Rows > i) {                                  \
    const __m512 xv = _mm512_set1_ps(x[i * ldx + c]);        \
    a##i##_0 = _mm512_fmadd_ps(w0, xv, a##i##_0);            \
    a##i##_1 = _mm512_fmadd_ps(w1, xv, a##i##_1);            \
  }
    MOEPACK_P16_ROW(0) MOEPACK_P16_ROW(1) MOEPACK_P16_ROW(2) MOEPACK_P16_ROW(3)
    MOEPACK_P16_ROW(4) MOEPACK_P16_ROW(5) MOEPACK_P16_ROW(6) MOEPACK_P16_ROW(7)
    MOEPACK_P16_ROW(8) MOEPACK_P16_ROW(9) MOEPACK_P16_ROW(10) MOEPACK_P16_ROW(11)
#undef MOEPACK_P16_ROW
  }
  const __m512 sums[kTileTokens512][2] = {{a0_0, a0_1}, {a1_0, a1_1}, {a2_0, a2_1}, {a3_0, a3_1}, {a4_0, a4_1},   {a5_0, a5_1},
                                          {a6_0, a6_1}, {a7_0, a7_1}, {a8_0, a8_1}, {a9_0, a9_1}, {a10_0, a10_1}, {a11_0, a11_1}};
  for (int i = 0; i < Rows; ++i)
    for (int h = 0; h < 2; ++h) _mm512_storeu_ps(out + i * ldo + 16 * h, _mm512_permutexvar_ps(to_rows, sums[i][h]));
}

template <uint64_t StepK, int Rows>
MOEPACK_AVX512F void avx512f_panel_rest(uint64_t rem, const float* panel, uint64_t cols, const float* x, uint64_t ldx, float* out, uint64_t ldo, bool first) {
  if constexpr (Rows > 0) {
    if (rem == Rows) return avx512f_panel_tile<StepK, Rows>(panel, cols, x, ldx, out, ldo, first);
    avx512f_panel_rest<StepK, Rows - 1>(rem, panel, cols, x, ldx, out, ldo, first);
  }
}

// A layout may decode a step on 16 lanes (T::load16(step, h, c): half h's 16 rows of each of
// the step's columns, in panel order; T::scale16(group, h): their scales in row order). The
// panel then comes out as the AVX2 decode writes it, bit for bit (the same values, the same one
// multiply by the same scale), for about half the instructions: at 32 tokens an expert (Qwen3's
// 512-token prefill) the 8-lane decode was close to half of the AVX-512F kernel's time.
template <class T>
concept HasLoad16 = requires(const T& t, uint64_t step, int h, __m512* c) { t.load16(step, h, c); };

template <class T>
MOEPACK_AVX512F_INLINE void avx512f_decode_panel(const T& t, uint64_t s0, uint64_t s1, uint64_t ahead, float* panel) {
  const __m512i to_panel = panel_order16<T::kStepK>();
  for (uint64_t g0 = s0; g0 < s1;) {
    const uint64_t group = T::kScaled ? g0 / T::kGroupSteps : 0;
    const uint64_t g1 = T::kScaled ? std::min(s1, (group + 1) * T::kGroupSteps) : s1;
    __m512 sc[2];
    if constexpr (T::kScaled)
      for (int h = 0; h < 2; ++h) sc[h] = _mm512_permutexvar_ps(to_panel, t.scale16(group, h));
    for (uint64_t s = g0; s < g1; ++s) {
      if constexpr (HasPrefetch<T>) t.prefetch(s + ahead);
      float* col = panel + (s - s0) * T::kStepK * kBlockRows;
      for (int h = 0; h < 2; ++h) {
        __m512 c[T::kStepK];
        t.load16(s, h, c);
        for (uint64_t j = 0; j < T::kStepK; ++j) {
          if constexpr (T::kScaled) c[j] = _mm512_mul_ps(c[j], sc[h]);
          _mm512_store_ps(col + j * kBlockRows + 16 * h, c[j]);
        }
      }
    }
    g0 = g1;
  }
}

// Two registers of row pairs (a: rows 0-7 of a half, b: rows 8-15; lane 2i + j row i's column
// j) as the half's two columns, each in panel order: the shape of the MXFP4 and FP8 steps.
MOEPACK_AVX512F_INLINE void pairs_to_panel16(__m512 a, __m512 b, __m512* c) {
  static_assert(kBlockRows == 32, "a half is 16 rows");
  // Lane l of column j: row 8(l / 8) + (0 1 4 5 2 3 6 7)[l % 8], at lane 2 row + j of a or b.
  const __m512i even = _mm512_setr_epi32(0, 2, 8, 10, 4, 6, 12, 14, 16, 18, 24, 26, 20, 22, 28, 30);
  c[0] = _mm512_permutex2var_ps(a, even, b);
  c[1] = _mm512_permutex2var_ps(a, _mm512_add_epi32(even, _mm512_set1_epi32(1)), b);
}

// Four registers of row quads (q[2e + t]: rows 8e + 4t .. 8e + 4t + 3 of a half, lane 4r + j
// row r's column j) as the half's four columns, each in panel order: the VNNI-4 steps' shape.
MOEPACK_AVX512F_INLINE void quads_to_panel16(const __m512* q, __m512* c) {
  static_assert(kBlockRows == 32, "a half is 16 rows");
  // Lane l of column j, octet e = l / 8: row 8e + (0 2 4 6 1 3 5 7)[l % 8] = 8e + 4t + r, at lane
  // 4r + j of q[2e + t] (t picks the first or second source of the permute).
  const __m512i first = _mm512_setr_epi32(0, 8, 16, 24, 4, 12, 20, 28, 0, 8, 16, 24, 4, 12, 20, 28);
  for (int j = 0; j < 4; ++j) {
    const __m512i index = _mm512_add_epi32(first, _mm512_set1_epi32(j));
    c[j] = _mm512_mask_blend_ps(0xFF00, _mm512_permutex2var_ps(q[0], index, q[1]), _mm512_permutex2var_ps(q[2], index, q[3]));
  }
}

template <class T>
MOEPACK_AVX512F void avx512f_block_panels(const Gemm& g, uint64_t nb, const float* x, uint64_t m, float* out) {
  const T t(g, nb);
  constexpr uint64_t kPanelSteps = kPanelK / T::kStepK;
  alignas(64) float panel[kPanelK * kBlockRows];
  float* o = out + nb * kBlockRows;
  const uint64_t steps = g.k / T::kStepK;
  for (uint64_t s0 = 0; s0 < steps; s0 += kPanelSteps) {
    const uint64_t s1 = std::min(steps, s0 + kPanelSteps), cols = (s1 - s0) * T::kStepK, c0 = s0 * T::kStepK;
    if constexpr (HasLoad16<T>) avx512f_decode_panel(t, s0, s1, kPanelSteps, panel);
    else avx2_decode_panel(t, s0, s1, kPanelSteps, panel);
    uint64_t i = 0;
    for (; i + kTileTokens512 <= m; i += kTileTokens512)
      avx512f_panel_tile<T::kStepK, kTileTokens512>(panel, cols, x + i * g.k + c0, g.k, o + i * g.n, g.n, s0 == 0);
    if (i < m) avx512f_panel_rest<T::kStepK, kTileTokens512 - 1>(m - i, panel, cols, x + i * g.k + c0, g.k, o + i * g.n, g.n, s0 == 0);
  }
}

// A layout may decode one token on 16 lanes (T::avx512f_one_token); it returns false for a block
// it leaves to the AVX2 kernels.
template <class T>
concept HasAvx512fOneToken = requires(const T& t, const float* x, uint64_t steps, float* out) {
  { t.avx512f_one_token(x, steps, out) } -> std::same_as<bool>;
};

// Up to kAvx512fInt16MaxTokens tokens run the layout's int16 decode once per token where it has
// one (and the rows are quantized); more run the panels; else one token the layout's 16-lane
// FP32 decode where it has one (and takes the block), else the AVX2 kernels.
template <class T>
concept HasAvx512fOneTokenInt16 = requires(const T& t, const int16_t* q, const float* unit, uint64_t steps, float* out) {
  { t.template avx512f_one_token_int16<false>(q, unit, steps, out) };
};

// Vnni: the int16 decodes add their products with vpdpwssd (AVX-512 VNNI). Where it falls back
// to the AVX2 kernels (one token whose row was refused), they get no Int16Rows.
template <class T, bool Vnni = false>
MOEPACK_AVX512F void avx512f_block(const Gemm& g, uint64_t nb, const float* x, const Int16Rows* xq, uint64_t m, float* out) {
  if constexpr (HasAvx512fOneTokenInt16<T>)
    if (m <= kAvx512fInt16MaxTokens && xq && xq->all_ok(m)) {
      const T t(g, nb);
      for (uint64_t i = 0; i < m; ++i) t.template avx512f_one_token_int16<Vnni>(xq->q + i * g.k, xq->unit + i * (g.k / kInt16Block), g.k / T::kStepK, out + i * g.n + nb * kBlockRows);
      return;
    }
  if (m >= kPanelMinTokens) return avx512f_block_panels<T>(g, nb, x, m, out);
  if constexpr (HasAvx512fOneToken<T>)
    if (m == 1 && T(g, nb).avx512f_one_token(x, g.k / T::kStepK, out + nb * kBlockRows)) return;
  avx2_block<T>(g, nb, x, nullptr, m, out);
}

// ---- portable ----------------------------------------------------------------------------

template <class T>
void scalar_block(const Gemm& g, uint64_t nb, const float* x, uint64_t m, float* out) {
  const T t(g, nb);
  const uint64_t group_k = T::kScaled ? T::kGroupSteps * T::kStepK : g.k;
  for (uint64_t i = 0; i < m; ++i) {
    const float* xm = x + i * g.k;
    for (uint64_t r = 0; r < kBlockRows; ++r) {
      float total = 0;
      for (uint64_t k0 = 0; k0 < g.k; k0 += group_k) {
        float acc = 0;
        for (uint64_t k = k0; k < std::min(g.k, k0 + group_k); ++k) acc += t.value(r, k) * xm[k];
        total += T::kScaled ? acc * t.scale_at(r, k0 / group_k) : acc;
      }
      out[i * g.n + nb * kBlockRows + r] = total;
    }
  }
}

// Row blocks [nb0, nb1) of out [m, g.n], in the calling thread, for activations given as BF16
// bits (`xb`, read by the AVX-512 kernels), as the same values in floats (`xf`, read by the
// others; may be null on AVX-512) and, where int16_rows_order names an order, as Int16Rows
// (`xq`; null: the FP32 kernels run). Defined in cpu_tiles.cpp.
void packed_gemm_blocks(CpuLayout layout, CpuIsa isa, const CpuKernelChoice& choice, const Gemm& g, uint64_t nb0, uint64_t nb1, const uint16_t* xb,
                        const float* xf, const Int16Rows* xq, uint64_t m, float* out);

}  // namespace moepack::experts::cpu
