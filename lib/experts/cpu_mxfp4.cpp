#include "lib/experts/cpu_mxfp4.h"

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the masked-off source of unmasked
// operations, which -Wmaybe-uninitialized reports once they are inlined: a false positive.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include "lib/core/codecs.h"
#include "lib/core/error.h"

namespace moepack::experts {
namespace {

constexpr uint64_t kBlockRows = 32;  // sgl-kernel BLOCK_N: rows per packed block
constexpr uint64_t kGroup = 32;      // MX block: K elements per E8M0 scale
constexpr uint64_t kTokenTile = 4;   // tokens sharing one decode of a weight column pair

// E2M1 code -> BF16 bits (0, 0.5, 1, 1.5, 2, 3, 4, 6, then the negatives), twice: `vpermw`
// indexes a full 32-entry register (indices here are below 16).
alignas(64) constexpr uint16_t kE2M1Bf16[32] = {0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0,
                                                0x8000, 0xBF00, 0xBF80, 0xBFC0, 0xC000, 0xC040, 0xC080, 0xC0C0,
                                                0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0,
                                                0x8000, 0xBF00, 0xBF80, 0xBFC0, 0xC000, 0xC040, 0xC080, 0xC0C0};

// A GEMM against one packed MXFP4 weight: out[m][n] = sum_k W[n][k] · x[m][k] (+ bias[n]),
// with x given as BF16 bits [M, K]. N and K are multiples of 32.
struct PackedGemm {
  const uint8_t* w;
  const uint8_t* scale;
  const float* bias;
  uint64_t n, k;
};

// ---- portable kernel ----------------------------------------------------------------------

void gemm_block_scalar(const PackedGemm& g, uint64_t nb, const uint16_t* x, uint64_t m0, uint64_t m1, float* out) {
  const uint64_t kbytes = g.k / 2, groups = g.k / kGroup;
  const uint8_t* wb = g.w + nb * kBlockRows * kbytes;
  const uint8_t* sb = g.scale + nb * kBlockRows * groups;
  for (uint64_t m = m0; m < m1; ++m) {
    const uint16_t* xm = x + m * g.k;
    float total[kBlockRows] = {};
    for (uint64_t grp = 0; grp < groups; ++grp) {
      float acc[kBlockRows] = {};
      for (uint64_t kb = grp * (kGroup / 2); kb < (grp + 1) * (kGroup / 2); ++kb) {
        const float x0 = bf16_to_float(xm[2 * kb]), x1 = bf16_to_float(xm[2 * kb + 1]);
        const uint8_t* col = wb + kb * kBlockRows;
        for (uint64_t j = 0; j < kBlockRows; ++j) {
          const float xv = (j & 1) ? x1 : x0;
          acc[j / 2] += e2m1_to_float(col[j] & 0xF) * xv;
          acc[kBlockRows / 2 + j / 2] += e2m1_to_float(col[j] >> 4) * xv;
        }
      }
      for (uint64_t r = 0; r < kBlockRows; ++r) total[r] += acc[r] * e8m0_to_float(sb[grp * kBlockRows + r]);
    }
    for (uint64_t r = 0; r < kBlockRows; ++r) out[m * g.n + nb * kBlockRows + r] = total[r] + (g.bias ? g.bias[nb * kBlockRows + r] : 0.0f);
  }
}

// ---- AVX-512 BF16 kernel ------------------------------------------------------------------

#define MOEPACK_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512bf16,avx512vl")))

MOEPACK_AVX512_BF16 inline __m512 e8m0_to_ps(__m128i bytes) {
  // 2^(s-127) is the float with exponent field s: s << 23. s = 0 is 2^-127 (a subnormal,
  // 0x00400000) and s = 255 is NaN.
  const __m512i s = _mm512_cvtepu8_epi32(bytes);
  __m512i bits = _mm512_slli_epi32(s, 23);
  bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(s, _mm512_setzero_si512()), _mm512_set1_epi32(0x00400000));
  bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(s, _mm512_set1_epi32(255)), _mm512_set1_epi32(0x7FC00000));
  return _mm512_castsi512_ps(bits);
}

MOEPACK_AVX512_BF16 void gemm_block_avx512(const PackedGemm& g, uint64_t nb, const uint16_t* x, uint64_t m0, uint64_t m1, float* out) {
  const uint64_t kbytes = g.k / 2, groups = g.k / kGroup;
  const uint8_t* wb = g.w + nb * kBlockRows * kbytes;
  const uint8_t* sb = g.scale + nb * kBlockRows * groups;
  const __m512i lut = _mm512_load_si512(kE2M1Bf16);
  const __m512i low_mask = _mm512_set1_epi16(0x0F);
  for (uint64_t mt = m0; mt < m1; mt += kTokenTile) {
    const uint64_t tile = std::min<uint64_t>(kTokenTile, m1 - mt);
    __m512 total[kTokenTile][2];
    for (uint64_t t = 0; t < kTokenTile; ++t) total[t][0] = total[t][1] = _mm512_setzero_ps();
    for (uint64_t grp = 0; grp < groups; ++grp) {
      __m512 acc[kTokenTile][2];
      for (uint64_t t = 0; t < kTokenTile; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
      for (uint64_t kb = grp * (kGroup / 2); kb < (grp + 1) * (kGroup / 2); ++kb) {
        const __m512i wide = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + kb * kBlockRows)));
        const __m512bh rows_lo = (__m512bh)_mm512_permutexvar_epi16(_mm512_and_si512(wide, low_mask), lut);
        const __m512bh rows_hi = (__m512bh)_mm512_permutexvar_epi16(_mm512_srli_epi16(wide, 4), lut);
        for (uint64_t t = 0; t < tile; ++t) {
          uint32_t pair;
          std::memcpy(&pair, x + (mt + t) * g.k + 2 * kb, 4);
          const __m512bh xb = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair));
          acc[t][0] = _mm512_dpbf16_ps(acc[t][0], rows_lo, xb);
          acc[t][1] = _mm512_dpbf16_ps(acc[t][1], rows_hi, xb);
        }
      }
      const uint8_t* s = sb + grp * kBlockRows;
      const __m512 s_lo = e8m0_to_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
      const __m512 s_hi = e8m0_to_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16)));
      for (uint64_t t = 0; t < tile; ++t) {
        total[t][0] = _mm512_fmadd_ps(acc[t][0], s_lo, total[t][0]);
        total[t][1] = _mm512_fmadd_ps(acc[t][1], s_hi, total[t][1]);
      }
    }
    const __m512 b_lo = g.bias ? _mm512_loadu_ps(g.bias + nb * kBlockRows) : _mm512_setzero_ps();
    const __m512 b_hi = g.bias ? _mm512_loadu_ps(g.bias + nb * kBlockRows + 16) : _mm512_setzero_ps();
    for (uint64_t t = 0; t < tile; ++t) {
      float* o = out + (mt + t) * g.n + nb * kBlockRows;
      _mm512_storeu_ps(o, _mm512_add_ps(total[t][0], b_lo));
      _mm512_storeu_ps(o + 16, _mm512_add_ps(total[t][1], b_hi));
    }
  }
}

// One token (decode): with a single activation row there are only two accumulator chains per
// block, and each vdpbf16ps waits for the previous one on its chain. Four banks (column pair
// kb mod 4) keep eight chains in flight, so the loop runs at the decode's throughput, not the
// instruction's latency. The banks are summed in a fixed order, so results stay deterministic.
MOEPACK_AVX512_BF16 void gemm_block_avx512_one_token(const PackedGemm& g, uint64_t nb, const uint16_t* x, uint64_t m, float* out) {
  const uint64_t kbytes = g.k / 2, groups = g.k / kGroup;
  const uint8_t* wb = g.w + nb * kBlockRows * kbytes;
  const uint8_t* sb = g.scale + nb * kBlockRows * groups;
  const __m512i lut = _mm512_load_si512(kE2M1Bf16);
  const __m512i low_mask = _mm512_set1_epi16(0x0F);
  const uint16_t* xm = x + m * g.k;
  __m512 total_lo = _mm512_setzero_ps(), total_hi = _mm512_setzero_ps();
  for (uint64_t grp = 0; grp < groups; ++grp) {
    __m512 lo[4], hi[4];
    for (int b = 0; b < 4; ++b) lo[b] = hi[b] = _mm512_setzero_ps();
    const uint64_t kb0 = grp * (kGroup / 2);
    for (uint64_t kb = kb0; kb < kb0 + kGroup / 2; kb += 4) {
      for (int b = 0; b < 4; ++b) {
        const __m512i wide = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + (kb + b) * kBlockRows)));
        uint32_t pair;
        std::memcpy(&pair, xm + 2 * (kb + b), 4);
        const __m512bh xb = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair));
        lo[b] = _mm512_dpbf16_ps(lo[b], (__m512bh)_mm512_permutexvar_epi16(_mm512_and_si512(wide, low_mask), lut), xb);
        hi[b] = _mm512_dpbf16_ps(hi[b], (__m512bh)_mm512_permutexvar_epi16(_mm512_srli_epi16(wide, 4), lut), xb);
      }
    }
    const __m512 sum_lo = _mm512_add_ps(_mm512_add_ps(lo[0], lo[1]), _mm512_add_ps(lo[2], lo[3]));
    const __m512 sum_hi = _mm512_add_ps(_mm512_add_ps(hi[0], hi[1]), _mm512_add_ps(hi[2], hi[3]));
    const uint8_t* s = sb + grp * kBlockRows;
    total_lo = _mm512_fmadd_ps(sum_lo, e8m0_to_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s))), total_lo);
    total_hi = _mm512_fmadd_ps(sum_hi, e8m0_to_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16))), total_hi);
  }
  float* o = out + m * g.n + nb * kBlockRows;
  const __m512 b_lo = g.bias ? _mm512_loadu_ps(g.bias + nb * kBlockRows) : _mm512_setzero_ps();
  const __m512 b_hi = g.bias ? _mm512_loadu_ps(g.bias + nb * kBlockRows + 16) : _mm512_setzero_ps();
  _mm512_storeu_ps(o, _mm512_add_ps(total_lo, b_lo));
  _mm512_storeu_ps(o + 16, _mm512_add_ps(total_hi, b_hi));
}

// ---- AVX2 kernel ---------------------------------------------------------------------------

#define MOEPACK_AVX2 __attribute__((target("avx2,fma")))

// Eight E2M1 codes (low bits of 32-bit lanes) as floats: magnitude from an 8-entry table
// (vpermps reads the low three index bits), sign from bit 3.
MOEPACK_AVX2 inline __m256 e2m1_to_ps_avx2(__m256i codes, __m256 magnitudes) {
  const __m256 mag = _mm256_permutevar8x32_ps(magnitudes, codes);
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(codes, _mm256_set1_epi32(8)), 28);
  return _mm256_xor_ps(mag, _mm256_castsi256_ps(sign));
}

MOEPACK_AVX2 inline __m256 e8m0_to_ps_avx2(const uint8_t* s) {
  const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s)));
  __m256i bits = _mm256_slli_epi32(v, 23);
  bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x00400000), _mm256_cmpeq_epi32(v, _mm256_setzero_si256()));
  bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x7FC00000), _mm256_cmpeq_epi32(v, _mm256_set1_epi32(255)));
  return _mm256_castsi256_ps(bits);
}

// One token at a time: the 32 bytes of a column pair hold, in lanes of eight, (row, k) pairs of
// rows 4v..4v+3 (low nibbles, v = 0..3) and 16+4v.. (high nibbles); each lane accumulates W·x for
// its own k, and the two k of a row are added per scale group.
MOEPACK_AVX2 void gemm_block_avx2(const PackedGemm& g, uint64_t nb, const uint16_t* x, uint64_t m0, uint64_t m1, float* out) {
  const uint64_t kbytes = g.k / 2, groups = g.k / kGroup;
  const uint8_t* wb = g.w + nb * kBlockRows * kbytes;
  const uint8_t* sb = g.scale + nb * kBlockRows * groups;
  const __m256 magnitudes = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
  const __m256i low_mask = _mm256_set1_epi32(0x0F);
  for (uint64_t m = m0; m < m1; ++m) {
    const uint16_t* xm = x + m * g.k;
    __m256 total[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (uint64_t grp = 0; grp < groups; ++grp) {
      __m256 acc[8];
      for (auto& a : acc) a = _mm256_setzero_ps();
      for (uint64_t kb = grp * (kGroup / 2); kb < (grp + 1) * (kGroup / 2); ++kb) {
        const float x0 = bf16_to_float(xm[2 * kb]), x1 = bf16_to_float(xm[2 * kb + 1]);
        const __m256 xv = _mm256_setr_ps(x0, x1, x0, x1, x0, x1, x0, x1);
        const uint8_t* col = wb + kb * kBlockRows;
        for (int v = 0; v < 4; ++v) {
          const __m256i bytes = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(col + 8 * v)));
          acc[v] = _mm256_fmadd_ps(e2m1_to_ps_avx2(_mm256_and_si256(bytes, low_mask), magnitudes), xv, acc[v]);
          acc[4 + v] = _mm256_fmadd_ps(e2m1_to_ps_avx2(_mm256_srli_epi32(bytes, 4), magnitudes), xv, acc[4 + v]);
        }
      }
      // Pairs (row, k0) + (row, k1): hadd interleaves 128-bit halves, the permute restores row order.
      const uint8_t* s = sb + grp * kBlockRows;
      for (int q = 0; q < 4; ++q) {
        const __m256 rows = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_hadd_ps(acc[2 * q], acc[2 * q + 1])), 0xD8));
        total[q] = _mm256_fmadd_ps(rows, e8m0_to_ps_avx2(s + 8 * q), total[q]);
      }
    }
    float* o = out + m * g.n + nb * kBlockRows;
    for (int q = 0; q < 4; ++q) {
      const __m256 b = g.bias ? _mm256_loadu_ps(g.bias + nb * kBlockRows + 8 * q) : _mm256_setzero_ps();
      _mm256_storeu_ps(o + 8 * q, _mm256_add_ps(total[q], b));
    }
  }
}

MOEPACK_AVX512_BF16 void to_bf16_avx512(const float* in, uint16_t* out, uint64_t n) {
  uint64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(in + i)));
  for (; i < n; ++i) out[i] = float_to_bf16(in[i]);
}

void to_bf16(CpuIsa isa, const float* in, uint16_t* out, uint64_t n) {
  if (isa == CpuIsa::avx512_bf16) return to_bf16_avx512(in, out, n);
  for (uint64_t i = 0; i < n; ++i) out[i] = float_to_bf16(in[i]);
}

// out [M, N] = W x, row blocks spread over the arena's threads; each output value is computed
// by one thread in one order, so the bytes do not depend on the thread count.
void packed_gemm(CpuIsa isa, const PackedGemm& g, const uint16_t* x, uint64_t m, float* out) {
  const uint64_t blocks = g.n / kBlockRows;
  tbb::parallel_for(tbb::blocked_range<uint64_t>(0, blocks), [&](const tbb::blocked_range<uint64_t>& r) {
    for (uint64_t nb = r.begin(); nb < r.end(); ++nb) {
      if (isa == CpuIsa::avx512_bf16 && m == 1) gemm_block_avx512_one_token(g, nb, x, 0, out);
      else if (isa == CpuIsa::avx512_bf16) gemm_block_avx512(g, nb, x, 0, m, out);
      else if (isa == CpuIsa::avx2) gemm_block_avx2(g, nb, x, 0, m, out);
      else gemm_block_scalar(g, nb, x, 0, m, out);
    }
  });
}

}  // namespace

std::string_view cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::avx512_bf16: return "avx512_bf16";
    case CpuIsa::avx2: return "avx2";
    case CpuIsa::scalar: return "scalar";
  }
  return "scalar";
}

bool cpu_supports(CpuIsa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case CpuIsa::avx512_bf16:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
    case CpuIsa::avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case CpuIsa::scalar: return true;
  }
  return false;
}

CpuIsa best_cpu_isa() {
  static const CpuIsa isa = [] {
    // The ordered list, best first, ending in the portable kernel; MOEPACK_CPU_ISA caps it.
    const char* forced = std::getenv("MOEPACK_CPU_ISA");
    for (CpuIsa isa : {CpuIsa::avx512_bf16, CpuIsa::avx2, CpuIsa::scalar}) {
      if (forced && cpu_isa_name(isa) != forced && isa != CpuIsa::scalar) continue;
      if (cpu_supports(isa)) return isa;
    }
    return CpuIsa::scalar;
  }();
  return isa;
}

std::vector<float> cpu_mxfp4_moe(const std::vector<float>& x, uint64_t tokens, uint64_t hidden, const Routing& routing,
                                 const std::vector<const CpuMxfp4Expert*>& experts, const MoeShape& s, const ActivationSpec& activation,
                                 const CpuMxfp4Options& options, CpuMxfp4Workspace* workspace) {
  const ResolvedActivation act = resolve_activation(activation);
  const uint64_t Hp = s.hidden, P = s.inter, n13 = s.gated ? 2 * P : P;
  if (Hp % kBlockRows || P % kBlockRows || n13 % kBlockRows)
    throw Error(ErrorKind::bad_input, "the CPU MXFP4 layout needs hidden and intermediate sizes that are multiples of 32 (got " + std::to_string(Hp) + ", " + std::to_string(P) + ")");
  if (hidden > Hp || x.size() != tokens * hidden || routing.tokens != tokens) throw_internal("cpu_mxfp4_moe: sizes");
  if (!cpu_supports(options.isa)) throw Error(ErrorKind::usage, "this CPU cannot run the " + std::string(cpu_isa_name(options.isa)) + " kernels");

  CpuMxfp4Workspace local;
  CpuMxfp4Workspace& ws = workspace ? *workspace : local;
  // Tokens of each expert, in token order (the lists keep their capacity between calls).
  auto& per_expert = ws.tokens_of_expert;
  per_expert.resize(experts.size());
  for (auto& list : per_expert) list.clear();
  for (uint64_t t = 0; t < tokens; ++t)
    for (uint64_t j = 0; j < routing.top_k; ++j) {
      const uint32_t e = routing.ids[t * routing.top_k + j];
      if (e >= experts.size()) throw_internal("cpu_mxfp4_moe: expert id out of range");
      per_expert[e].push_back({static_cast<uint32_t>(t), routing.weights[t * routing.top_k + j]});
    }
  uint64_t max_tokens = 0;
  for (const auto& v : per_expert) max_tokens = std::max<uint64_t>(max_tokens, v.size());

  // Sized for the busiest expert; a workspace kept by the caller only grows, so repeated
  // forward passes allocate nothing but their output.
  auto& xf = ws.x;
  auto& h = ws.h;
  auto& a = ws.act;
  auto& y = ws.y;
  auto& xb = ws.x_bf16;
  auto& ab = ws.act_bf16;
  xf.resize(static_cast<size_t>(max_tokens * Hp));
  h.resize(static_cast<size_t>(max_tokens * n13));
  a.resize(static_cast<size_t>(max_tokens * P));
  y.resize(static_cast<size_t>(max_tokens * Hp));
  xb.resize(static_cast<size_t>(max_tokens * Hp));
  ab.resize(static_cast<size_t>(max_tokens * P));
  std::vector<float> out(static_cast<size_t>(tokens * hidden), 0.0f);

  auto body = [&] {
    for (uint64_t e = 0; e < experts.size(); ++e) {
      const auto& list = per_expert[e];
      if (list.empty() || !experts[e]) continue;
      const CpuMxfp4Expert& ex = *experts[e];
      const uint64_t m = list.size();
      std::fill(xf.begin(), xf.begin() + static_cast<std::ptrdiff_t>(m * Hp), 0.0f);
      for (uint64_t i = 0; i < m; ++i) std::copy_n(x.data() + list[i].first * hidden, hidden, xf.data() + i * Hp);
      to_bf16(options.isa, xf.data(), xb.data(), m * Hp);
      packed_gemm(options.isa, {ex.w13, ex.w13_scale, ex.w13_bias, n13, Hp}, xb.data(), m, h.data());
      for (uint64_t i = 0; i < m; ++i) {
        const float* hi = h.data() + i * n13;
        float* ai = a.data() + i * P;
        for (uint64_t j = 0; j < P; ++j) {
          const auto [g, u] = s.gated ? gate_and_up(hi, j, P, s.rows) : std::pair<float, float>{hi[j], 0.0f};
          ai[j] = activation_value(act, g, u);
        }
      }
      to_bf16(options.isa, a.data(), ab.data(), m * P);
      packed_gemm(options.isa, {ex.w2, ex.w2_scale, ex.w2_bias, Hp, P}, ab.data(), m, y.data());
      for (uint64_t i = 0; i < m; ++i) {
        float* o = out.data() + list[i].first * hidden;
        const float w = list[i].second;
        for (uint64_t c = 0; c < hidden; ++c) o[c] += w * y[i * Hp + c];
      }
    }
  };
  if (options.threads > 0) tbb::task_arena(options.threads).execute(body);
  else body();
  return out;
}

}  // namespace moepack::experts
