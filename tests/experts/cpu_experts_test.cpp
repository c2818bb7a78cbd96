// The fast CPU kernels (lib/experts/cpu_experts.h) on every packed CPU layout they read: weights
// packed by the registered packers from random canonical values, each kernel of the ISA list
// against a double-precision sum computed from the canonical values by the format's definition
// (E2M1 and E8M0 per OCP MX, E4M3 with subnormals, int8, BF16 in both prepacks), on sizes that are multiples of 32
// but not of 64 or 128, with token counts that take every path (one token, the tile kernel with
// a remainder, the decode-once chunks; on the AMX level the AVX-512 kernels below 5 tokens, one
// partial tile, whole tiles, pairs of tiles and a last tile overlapping the one before), and
// byte-identical results for 1, 2 and 3 threads. Each instruction set is its own test: a level
// this machine cannot run is skipped with the reason (GTEST_SKIP), never passed silently.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include <tbb/task_arena.h>

#include "lib/core/codecs.h"
#include "lib/core/error.h"
#include "lib/experts/cpu_experts.h"
#include "lib/experts/cpu_gemm.h"
#include "packers/cpu_prepack_moe.h"
#include "packers/cpu_sgl_int4.h"
#include "packers/cpu_sgl_mxfp4.h"

namespace moepack::experts {
namespace {

// One projection in a CPU layout: the packed bytes the kernels read, and the same weights as
// doubles (value · scale) for the reference.
struct Packed {
  std::vector<uint8_t> weight, scale_bytes;
  std::vector<float> scale_f32;
  std::vector<float> bias;
  std::vector<int8_t> zeros;  // int4_vnni4
  uint64_t groups = 0;
  std::vector<double> dense;  // [n, k]
  CpuProjection projection() const {
    CpuProjection p;
    p.weight = weight.data();
    p.scale = scale_f32.empty() ? static_cast<const void*>(scale_bytes.data()) : static_cast<const void*>(scale_f32.data());
    if (scale_bytes.empty() && scale_f32.empty()) p.scale = nullptr;
    p.bias = bias.empty() ? nullptr : bias.data();
    p.zeros = zeros.empty() ? nullptr : zeros.data();
    p.groups = groups;
    return p;
  }
};

std::vector<uint8_t> pack_with(const packers::Layout& layout, const OwnedTensor& canonical) {
  std::vector<uint8_t> out(static_cast<size_t>(byte_size(layout.packed_dtype(canonical.dtype), layout.packed_shape(canonical.shape))));
  layout.pack(canonical.view(), out);
  return out;
}

// `group`: int4_vnni4's scale group along k (columns).
Packed make(CpuLayout layout, uint64_t n, uint64_t k, uint64_t seed, bool with_bias, uint64_t group = 0) {
  std::mt19937_64 rng(seed);
  auto byte = [&] { return static_cast<uint8_t>(rng() & 0xFF); };
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Packed p;
  p.dense.resize(static_cast<size_t>(n * k));
  switch (layout) {
    case CpuLayout::mxfp4: {
      OwnedTensor codes(DType::U8, {n, k / 2}), scales(DType::U8, {n, k / 32});
      for (auto& b : codes.bytes) b = byte();
      for (auto& s : scales.bytes) s = static_cast<uint8_t>(120 + rng() % 14);  // 2^-7 .. 2^6
      for (uint64_t r = 0; r < n; ++r)
        for (uint64_t c = 0; c < k; ++c) {
          const uint8_t b = codes.bytes[r * (k / 2) + c / 2];
          p.dense[r * k + c] = static_cast<double>(e2m1_to_float(c % 2 ? b >> 4 : b & 0xF)) * e8m0_to_float(scales.bytes[r * (k / 32) + c / 32]);
        }
      p.weight = pack_with(packers::CpuSglWeightPackedMxfp4Layout(), codes);
      p.scale_bytes = pack_with(packers::CpuSglScalePackedLayout(), scales);
      break;
    }
    case CpuLayout::bf16_amx: {
      OwnedTensor w(DType::BF16, {n, k});
      for (uint64_t i = 0; i < n * k; ++i) {
        const uint16_t b = float_to_bf16(normal(rng));
        std::memcpy(w.bytes.data() + 2 * i, &b, 2);
        p.dense[i] = bf16_to_float(b);
      }
      p.weight = pack_with(packers::CpuPrepackMoeWeightLayout(packers::CpuMoeIsa::amx), w);
      break;
    }
    case CpuLayout::bf16_vec: {
      OwnedTensor w(DType::BF16, {n, k});
      for (uint64_t i = 0; i < n * k; ++i) {
        const uint16_t b = float_to_bf16(normal(rng));
        std::memcpy(w.bytes.data() + 2 * i, &b, 2);
        p.dense[i] = bf16_to_float(b);
      }
      p.weight = pack_with(packers::CpuPrepackMoeWeightLayout(packers::CpuMoeIsa::vec), w);
      break;
    }
    case CpuLayout::fp8_block: {
      // Every E4M3 code but NaN: zeros of both signs, subnormals, the largest normals.
      OwnedTensor w(DType::F8_E4M3, {n, k});
      for (auto& b : w.bytes)
        do b = byte();
        while (e4m3_is_nan(b));
      const uint64_t rb = (n + kCpuFp8Block - 1) / kCpuFp8Block, cb = (k + kCpuFp8Block - 1) / kCpuFp8Block;
      p.scale_f32.resize(static_cast<size_t>(rb * cb));
      for (auto& s : p.scale_f32) s = std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f, static_cast<int>(rng() % 8) - 10);
      for (uint64_t r = 0; r < n; ++r)
        for (uint64_t c = 0; c < k; ++c)
          p.dense[r * k + c] = static_cast<double>(e4m3_to_float(w.bytes[r * k + c])) * p.scale_f32[(r / kCpuFp8Block) * cb + c / kCpuFp8Block];
      p.weight = pack_with(packers::CpuSglWeightPackedFp8Layout(), w);
      break;
    }
    case CpuLayout::int8_vnni4: {
      OwnedTensor w(DType::I8, {n, k});
      for (auto& b : w.bytes) b = byte();
      p.scale_f32.resize(static_cast<size_t>(n));
      for (auto& s : p.scale_f32) s = std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f, -7);
      for (uint64_t r = 0; r < n; ++r)
        for (uint64_t c = 0; c < k; ++c) p.dense[r * k + c] = static_cast<double>(static_cast<int8_t>(w.bytes[r * k + c])) * p.scale_f32[r];
      p.weight = pack_with(packers::CpuSglVnni4Int8Layout(), w);
      break;
    }
    case CpuLayout::int4_vnni4: {
      // GPTQ words (q[k][n] = field k % 8 of word (k / 8, n)), BF16 group scales, zero points
      // over their whole range 0..16 (a 4-bit code, plus 1 for GPTQ's).
      p.groups = k / group;
      OwnedTensor words(DType::I32, {k / 8, n}), scales(DType::BF16, {p.groups, n}), zeros(DType::I8, {p.groups, n});
      for (auto& b : words.bytes) b = byte();
      for (uint64_t i = 0; i < p.groups * n; ++i) {
        const uint16_t b = float_to_bf16(std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f, static_cast<int>(rng() % 6) - 9));
        std::memcpy(scales.bytes.data() + 2 * i, &b, 2);
        zeros.bytes[i] = static_cast<uint8_t>(rng() % 17);
      }
      for (uint64_t r = 0; r < n; ++r)
        for (uint64_t c = 0; c < k; ++c) {
          uint32_t word;
          std::memcpy(&word, words.bytes.data() + 4 * ((c / 8) * n + r), 4);
          const uint64_t g = (c / group) * n + r;
          uint16_t scale_bits;
          std::memcpy(&scale_bits, scales.bytes.data() + 2 * g, 2);
          p.dense[r * k + c] = (static_cast<double>((word >> (4 * (c % 8))) & 0xF) - static_cast<int8_t>(zeros.bytes[g])) * bf16_to_float(scale_bits);
        }
      p.weight = pack_with(packers::CpuSglInt4WeightLayout(packers::CpuInt4Source::gptq, std::min<uint64_t>(group, 128)), words);
      const std::vector<uint8_t> scale_bytes = pack_with(packers::CpuSglInt4GroupRowsLayout(packers::CpuInt4GroupRows::scales_f32), scales);
      p.scale_f32.resize(scale_bytes.size() / 4);
      std::memcpy(p.scale_f32.data(), scale_bytes.data(), scale_bytes.size());
      const std::vector<uint8_t> zero_bytes = pack_with(packers::CpuSglInt4GroupRowsLayout(packers::CpuInt4GroupRows::zero_points_i8), zeros);
      p.zeros.assign(zero_bytes.begin(), zero_bytes.end());
      break;
    }
  }
  if (with_bias) {
    p.bias.resize(static_cast<size_t>(n));
    for (auto& b : p.bias) b = normal(rng);
  }
  return p;
}

std::vector<uint16_t> bf16_activations(uint64_t m, uint64_t k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> x(static_cast<size_t>(m * k));
  for (auto& v : x) v = float_to_bf16(normal(rng));
  return x;
}

std::vector<float> gemm(CpuLayout layout, CpuIsa isa, const Packed& p, uint64_t n, uint64_t k, const std::vector<uint16_t>& x, uint64_t m, int threads,
                        std::optional<CpuKernelChoice> kernels = {}) {
  std::vector<float> out(static_cast<size_t>(m * n), -1.0f);
  tbb::task_arena(threads).execute([&] { cpu_packed_gemm(layout, isa, p.projection(), n, k, x.data(), m, out.data(), kernels); });
  return out;
}

// The definition in doubles, and for each value the sum of magnitudes its float rounding is
// relative to, plus (`rounded`) what reading the activations as int16 blocks may add: each
// activation at most half its block's unit off (cpu_gemm.h, Int16Rows).
struct Reference {
  std::vector<double> value, magnitude, rounded;
  size_t outside_tolerance(const std::vector<float>& got) const {
    size_t bad = 0;
    for (size_t i = 0; i < value.size(); ++i)
      if (!(std::fabs(got[i] - value[i]) <= 1e-5 * magnitude[i] + rounded[i] + 1e-30)) ++bad;
    return bad;
  }
};
// The unit of an int16 activation block: 2^(e - 140) for e the FP32 exponent field of its largest
// magnitude (which lands at 2^13..2^14 - 1 units).
double int16_unit(const uint16_t* block) {
  float largest = 0;
  for (uint64_t j = 0; j < cpu::kInt16Block; ++j) largest = std::max(largest, std::fabs(bf16_to_float(block[j])));
  if (largest == 0) return 0;
  uint32_t bits;
  std::memcpy(&bits, &largest, 4);
  return std::ldexp(1.0, static_cast<int>(bits >> 23) - 140);
}
// Whether the level runs the layout's int16 decode for m tokens a block (with this CPU's choice
// within the level).
bool reads_int16(CpuLayout layout, CpuIsa isa, uint64_t m) {
  const CpuKernelChoice choice = cpu_kernel_choice(isa);
  return cpu::int16_rows_order(layout, isa, choice) != cpu::Int16Order::none && m <= cpu::int16_max_tokens(isa, choice);
}
// Whether the layout has int16 decodes (at AVX2 and AVX-512F).
bool has_int16_decode(CpuLayout layout) { return cpu::int16_rows_order(layout, CpuIsa::avx2, CpuKernelChoice{}) != cpu::Int16Order::none; }
Reference reference(const Packed& p, uint64_t n, uint64_t k, const std::vector<uint16_t>& x, uint64_t m, bool int16 = false) {
  const size_t size = static_cast<size_t>(m * n);
  Reference ref{std::vector<double>(size), std::vector<double>(size), std::vector<double>(size)};
  for (uint64_t i = 0; i < m; ++i)
    for (uint64_t r = 0; r < n; ++r) {
      double s = p.bias.empty() ? 0.0 : p.bias[r], a = std::fabs(s), off = 0;
      for (uint64_t col = 0; col < k; ++col) {
        const double term = p.dense[r * k + col] * bf16_to_float(x[i * k + col]);
        s += term;
        a += std::fabs(term);
      }
      if (int16)
        for (uint64_t b = 0; b < k / cpu::kInt16Block; ++b) {
          double weights = 0;
          for (uint64_t col = b * cpu::kInt16Block; col < (b + 1) * cpu::kInt16Block; ++col) weights += std::fabs(p.dense[r * k + col]);
          off += 0.5 * int16_unit(x.data() + i * k + b * cpu::kInt16Block) * weights;
        }
      ref.value[i * n + r] = s;
      ref.magnitude[i * n + r] = a;
      ref.rounded[i * n + r] = off;
    }
  return ref;
}

struct GemmCase {
  CpuLayout layout;
  uint64_t n, k;
  uint64_t group = 0;  // int4_vnni4
};
void PrintTo(const GemmCase& c, std::ostream* os) {
  *os << cpu_layout_name(c.layout) << " " << c.n << " x " << c.k;
  if (c.group) *os << " group " << c.group;
}

// Skips the test, naming what this machine lacks, when it cannot run the level.
#define SKIP_UNLESS_SUPPORTED(isa)                                                                                   \
  do {                                                                                                              \
    if (!cpu_supports(isa)) GTEST_SKIP() << cpu_isa_name(isa) << " does not run here: " << cpu_isa_unavailable(isa); \
  } while (0)

std::string isa_param_name(CpuIsa isa) { return std::string(cpu_isa_name(isa)); }

class CpuPackedGemm : public ::testing::TestWithParam<std::tuple<GemmCase, CpuIsa>> {};

TEST_P(CpuPackedGemm, MatchesTheDefinitionAndIsThreadCountStable) {
  const auto [c, isa] = GetParam();
  SKIP_UNLESS_SUPPORTED(isa);
  const Packed p = make(c.layout, c.n, c.k, 7 + c.n + c.k, true, c.group);
  for (uint64_t m : {1u, 2u, 3u, 4u, 5u, 8u, 13u, 16u, 32u, 37u, 50u}) {
    const std::vector<uint16_t> x = bf16_activations(m, c.k, m);
    const Reference ref = reference(p, c.n, c.k, x, m, reads_int16(c.layout, isa, m));
    SCOPED_TRACE(std::to_string(m) + " tokens");
    const std::vector<float> one = gemm(c.layout, isa, p, c.n, c.k, x, m, 1);
    for (int threads : {2, 3}) EXPECT_EQ(0, std::memcmp(one.data(), gemm(c.layout, isa, p, c.n, c.k, x, m, threads).data(), one.size() * 4)) << "the same bytes for 1 and " << threads << " threads";
    EXPECT_EQ(ref.outside_tolerance(one), 0u) << "of " << one.size() << " values; first: got " << one[0] << ", expected " << ref.value[0];
  }
}

// Every layout at a tile-sized and an awkward shape.
const GemmCase kGemmCases[] = {
    GemmCase{CpuLayout::mxfp4, 96, 416}, GemmCase{CpuLayout::mxfp4, 32, 32},
    GemmCase{CpuLayout::bf16_amx, 96, 416}, GemmCase{CpuLayout::bf16_amx, 160, 32},
    GemmCase{CpuLayout::bf16_vec, 96, 416}, GemmCase{CpuLayout::bf16_vec, 32, 64},
    GemmCase{CpuLayout::fp8_block, 160, 416}, GemmCase{CpuLayout::fp8_block, 96, 96},
    GemmCase{CpuLayout::int8_vnni4, 96, 416}, GemmCase{CpuLayout::int8_vnni4, 32, 32},
    // int4 at every block_k (16 runs AVX-512 BF16 on the AMX level), and a group of two
    // 128-column sub-blocks
    GemmCase{CpuLayout::int4_vnni4, 96, 416, 32}, GemmCase{CpuLayout::int4_vnni4, 32, 416, 16},
    GemmCase{CpuLayout::int4_vnni4, 64, 192, 64}, GemmCase{CpuLayout::int4_vnni4, 160, 384, 128},
    GemmCase{CpuLayout::int4_vnni4, 32, 512, 256}};

INSTANTIATE_TEST_SUITE_P(Layouts, CpuPackedGemm,
                         ::testing::Combine(::testing::ValuesIn(kGemmCases), ::testing::ValuesIn(kCpuIsas)),
                         [](const ::testing::TestParamInfo<std::tuple<GemmCase, CpuIsa>>& i) {
                           const GemmCase& c = std::get<0>(i.param);
                           return std::string(cpu_layout_name(c.layout)) + "_" + std::to_string(c.n) + "x" + std::to_string(c.k) +
                                  (c.group ? "_g" + std::to_string(c.group) : std::string()) + "_" + isa_param_name(std::get<1>(i.param));
                         });

class CpuIsaLevel : public ::testing::TestWithParam<CpuIsa> {};

// A NaN weight (E4M3 0x7F / 0xFF) makes its row's outputs NaN and leaves the other rows alone,
// on every path.
TEST_P(CpuIsaLevel, Fp8NanWeightsPoisonOnlyTheirRow) {
  const CpuIsa isa = GetParam();
  SKIP_UNLESS_SUPPORTED(isa);
  const uint64_t n = 64, k = 64;
  OwnedTensor w(DType::F8_E4M3, {n, k});
  for (auto& b : w.bytes) b = 0x38;  // 1.0
  w.bytes[5 * k + 17] = 0x7F;
  w.bytes[40 * k + 3] = 0xFF;
  Packed p;
  p.weight = pack_with(packers::CpuSglWeightPackedFp8Layout(), w);
  p.scale_f32 = {1.0f};
  for (uint64_t m : {1u, 3u, 9u, 21u}) {
    const std::vector<uint16_t> x = bf16_activations(m, k, 3);
    SCOPED_TRACE(std::to_string(m) + " tokens");
    const std::vector<float> out = gemm(CpuLayout::fp8_block, isa, p, n, k, x, m, 1);
    for (uint64_t i = 0; i < m; ++i)
      for (uint64_t r = 0; r < n; ++r) EXPECT_EQ(std::isnan(out[i * n + r]), r == 5 || r == 40) << "token " << i << " row " << r;
  }
}

// Every E4M3 code decodes to its exact value: one row per code, an activation of 1 on one column
// (of one token, and of six, which the AMX level runs through its tiles).
TEST_P(CpuIsaLevel, Fp8EveryCodeIsExact) {
  const CpuIsa isa = GetParam();
  SKIP_UNLESS_SUPPORTED(isa);
  const uint64_t n = 256, k = 32;
  OwnedTensor w(DType::F8_E4M3, {n, k});
  for (uint64_t r = 0; r < n; ++r) w.bytes[r * k + 7] = static_cast<uint8_t>(r);
  Packed p;
  p.weight = pack_with(packers::CpuSglWeightPackedFp8Layout(), w);
  p.scale_f32 = {1.0f, 1.0f};
  for (uint64_t m : {1u, 6u}) {
    std::vector<uint16_t> x(m * k, 0);
    for (uint64_t i = 0; i < m; ++i) x[i * k + 7] = float_to_bf16(1.0f);
    const std::vector<float> out = gemm(CpuLayout::fp8_block, isa, p, n, k, x, m, 1);
    for (uint64_t i = 0; i < m; ++i)
      for (uint64_t r = 0; r < n; ++r) {
        const float want = e4m3_to_float(static_cast<uint8_t>(r)), got = out[i * n + r];
        if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << r;
        else EXPECT_EQ(got, want) << "code " << r << ", token " << i << " of " << m;
      }
  }
}

// MXFP4 chunks whose E8M0 scales are all within 2^±64 apply them to the decoded weights; a chunk
// with one outside is folded per group instead, and the two kinds of chunk alternate within a
// block. Applied to the weights, a NaN scale (255) or one of 2^127 (254) would turn into a wrong
// finite exponent. The NaN-scaled row must come out NaN on every level. Six times 2^127 is past
// FP32's range: levels that scale the weights first give ±inf or NaN there, as dequantizing and
// then multiplying does, and the folded sums stay finite and match the definition; either is
// right, a wrong finite value is not. Every other row matches the definition.
TEST_P(CpuIsaLevel, Mxfp4ScalesOutsideThePrescaleRangeAreFolded) {
  const CpuIsa isa = GetParam();
  SKIP_UNLESS_SUPPORTED(isa);
  const uint64_t n = 96, k = 416, groups = k / 32;  // 208 steps: chunks of 128 and 80, groups 0-7 and 8-12
  std::mt19937_64 rng(11);
  OwnedTensor codes(DType::U8, {n, k / 2}), scales(DType::U8, {n, groups});
  for (auto& b : codes.bytes) b = static_cast<uint8_t>(rng() & 0xFF);
  for (auto& e : scales.bytes) e = static_cast<uint8_t>(120 + rng() % 14);
  constexpr uint64_t kHugeRow = 3, kNanRow = 7;
  scales.bytes[kHugeRow * groups + 10] = 254;  // block 0, second chunk: 2^127
  scales.bytes[kNanRow * groups + 2] = 255;    // block 0, first chunk: NaN
  scales.bytes[40 * groups + 1] = 1;           // block 1, first chunk: 2^-126
  scales.bytes[50 * groups + 12] = 0;          // block 1, second chunk: 2^-127; block 2 prescales throughout
  Packed p;
  p.dense.resize(static_cast<size_t>(n * k));
  for (uint64_t r = 0; r < n; ++r)
    for (uint64_t c = 0; c < k; ++c) {
      const uint8_t b = codes.bytes[r * (k / 2) + c / 2];
      p.dense[r * k + c] = static_cast<double>(e2m1_to_float(c % 2 ? b >> 4 : b & 0xF)) * e8m0_to_float(scales.bytes[r * groups + c / 32]);
    }
  p.weight = pack_with(packers::CpuSglWeightPackedMxfp4Layout(), codes);
  p.scale_bytes = pack_with(packers::CpuSglScalePackedLayout(), scales);
  for (uint64_t m : {1u, 5u, 8u, 13u, 37u}) {
    // Activations near 2^-12 keep 2^127 times a group's sum within FP32.
    std::vector<uint16_t> x = bf16_activations(m, k, m);
    for (auto& v : x) v = float_to_bf16(std::ldexp(bf16_to_float(v), -12));
    SCOPED_TRACE(std::to_string(m) + " tokens");
    std::vector<float> out = gemm(CpuLayout::mxfp4, isa, p, n, k, x, m, 1);
    Reference ref = reference(p, n, k, x, m, reads_int16(CpuLayout::mxfp4, isa, m));
    for (uint64_t i = 0; i < m; ++i) {
      EXPECT_TRUE(std::isnan(out[i * n + kNanRow])) << "token " << i;
      if (!std::isfinite(out[i * n + kHugeRow])) ref.value[i * n + kHugeRow] = ref.rounded[i * n + kHugeRow] = out[i * n + kHugeRow] = 0.0f;
      ref.value[i * n + kNanRow] = ref.magnitude[i * n + kNanRow] = ref.rounded[i * n + kNanRow] = out[i * n + kNanRow] = 0.0f;
    }
    EXPECT_EQ(ref.outside_tolerance(out), 0u) << "of " << out.size() << " values";
  }
}

// AVX-512F runs the AVX2 level's prefill on wider registers: the same panels (decoded 16 lanes
// at a time where the layout can, 8 where not) and one FMA chain per output over the columns in
// order, so the same bytes for every token count both levels run through panels (from 3: at 2
// the AVX2 level runs a layout's one-token decode per token where it has one).
TEST(CpuPackedGemm, Avx512fPrefillGivesTheAvx2Bytes) {
  if (!cpu_supports(CpuIsa::avx512f)) GTEST_SKIP() << "avx512f does not run here: " << cpu_isa_unavailable(CpuIsa::avx512f);
  for (const GemmCase& c : kGemmCases) {
    const Packed p = make(c.layout, c.n, c.k, 5 + c.n + c.k, true, c.group);
    for (uint64_t m : {3u, 7u, 12u, 13u, 32u, 37u}) {
      // Layouts with an int16 decode run it per token up to kAvx2Int16MaxTokens on AVX2 (and up
      // to kAvx512fInt16MaxTokens on AVX-512F): the panels from there on.
      if (has_int16_decode(c.layout) && m <= cpu::kAvx2Int16MaxTokens) continue;
      const std::vector<uint16_t> x = bf16_activations(m, c.k, 100 + m);
      const std::vector<float> wide = gemm(c.layout, CpuIsa::avx512f, p, c.n, c.k, x, m, 2), narrow = gemm(c.layout, CpuIsa::avx2, p, c.n, c.k, x, m, 2);
      EXPECT_EQ(0, std::memcmp(wide.data(), narrow.data(), wide.size() * 4)) << ::testing::PrintToString(c) << ", " << m << " tokens";
    }
  }
}

// The one-token decodes of MXFP4, INT4 and INT8 at AVX2 and AVX-512F read the activations as 16-bit
// integers per block of 32 (cpu_gemm.h, Int16Rows), summed exactly in int32, and run once per
// token for a few tokens: the two levels give the same bytes for every such layout and grouping.
TEST(CpuPackedGemm, Int16DecodesGiveTheSameBytesOnAvx2AndAvx512f) {
  if (!cpu_supports(CpuIsa::avx512f)) GTEST_SKIP() << "avx512f does not run here: " << cpu_isa_unavailable(CpuIsa::avx512f);
  int compared = 0;
  for (const GemmCase& c : kGemmCases) {
    if (!has_int16_decode(c.layout)) continue;
    ASSERT_NE(cpu::int16_rows_order(c.layout, CpuIsa::avx512f, CpuKernelChoice{}), cpu::Int16Order::none) << ::testing::PrintToString(c);
    const Packed p = make(c.layout, c.n, c.k, 9 + c.n + c.k, true, c.group);
    for (uint64_t m = 1; m <= cpu::kAvx512fInt16MaxTokens; ++m) {  // both levels run the int16 decode per token
      const std::vector<uint16_t> x = bf16_activations(m, c.k, 200 + m);
      const std::vector<float> wide = gemm(c.layout, CpuIsa::avx512f, p, c.n, c.k, x, m, 2), narrow = gemm(c.layout, CpuIsa::avx2, p, c.n, c.k, x, m, 2);
      EXPECT_EQ(0, std::memcmp(wide.data(), narrow.data(), wide.size() * 4)) << ::testing::PrintToString(c) << ", " << m << " tokens";
      ++compared;
    }
  }
  EXPECT_EQ(compared, 4 * 9) << "the MXFP4, INT4 and INT8 cases";
}

// vpdpwssd adds the same int32 sums as pmaddwd and an add (CpuKernelChoice::vnni): the int16
// decodes give the same bytes with and without it, at both levels, for every token count they
// run. Where this CPU lacks the instruction the choice is refused by name.
TEST(CpuPackedGemm, VnniGivesThePmaddwdBytes) {
  int compared = 0;
  for (CpuIsa isa : {CpuIsa::avx512f, CpuIsa::avx2}) {
    if (!cpu_supports(isa)) continue;
    CpuKernelChoice with, without;
    with.vnni = true;
    if (!cpu_kernel_choice_unavailable(isa, with).empty()) {
      const Packed p = make(CpuLayout::mxfp4, 32, 32, 1, false);
      const std::vector<uint16_t> x = bf16_activations(1, 32, 1);
      EXPECT_THROW(gemm(CpuLayout::mxfp4, isa, p, 32, 32, x, 1, 1, with), Error) << cpu_isa_name(isa);
      continue;
    }
    for (const GemmCase& c : kGemmCases) {
      if (!has_int16_decode(c.layout)) continue;
      const Packed p = make(c.layout, c.n, c.k, 11 + c.n + c.k, true, c.group);
      for (uint64_t m = 1; m <= cpu::int16_max_tokens(isa, without); ++m) {
        const std::vector<uint16_t> x = bf16_activations(m, c.k, 300 + m);
        const std::vector<float> a = gemm(c.layout, isa, p, c.n, c.k, x, m, 2, with), b = gemm(c.layout, isa, p, c.n, c.k, x, m, 2, without);
        EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << ::testing::PrintToString(c) << ", " << cpu_isa_name(isa) << ", " << m << " tokens";
        ++compared;
      }
    }
  }
  if (compared == 0) GTEST_SKIP() << "no level with VNNI runs here";
}

// Where vdpbf16ps is the slower (Intel), a BF16 level lets the AVX-512F kernels take its
// few-token int16 decodes and, at avx512_bf16, its prefill (CpuKernelChoice::avx512f_for_bf16):
// those blocks give the avx512f level's bytes; the others (FP8 and BF16 decodes) the level's own.
TEST(CpuPackedGemm, Avx512fStandingInForBf16GivesItsBytes) {
  if (!cpu_supports(CpuIsa::avx512_bf16)) GTEST_SKIP() << "avx512_bf16 does not run here: " << cpu_isa_unavailable(CpuIsa::avx512_bf16);
  CpuKernelChoice stand_in = cpu_kernel_choice(CpuIsa::avx512_bf16), own = stand_in;
  stand_in.avx512f_for_bf16 = true;
  own.avx512f_for_bf16 = false;
  CpuKernelChoice avx512f = cpu_kernel_choice(CpuIsa::avx512f);
  avx512f.vnni = stand_in.vnni;
  int int16 = 0, prefill = 0, own_kernels = 0;
  for (const GemmCase& c : kGemmCases) {
    const Packed p = make(c.layout, c.n, c.k, 13 + c.n + c.k, true, c.group);
    for (uint64_t m : {1u, 2u, 4u, 5u, 13u, 37u}) {
      const std::vector<uint16_t> x = bf16_activations(m, c.k, 400 + m);
      const std::vector<float> got = gemm(c.layout, CpuIsa::avx512_bf16, p, c.n, c.k, x, m, 2, stand_in);
      const bool avx512f_runs = m > cpu::kAvx512fInt16MaxTokens || has_int16_decode(c.layout);
      const std::vector<float> want =
          avx512f_runs ? gemm(c.layout, CpuIsa::avx512f, p, c.n, c.k, x, m, 2, avx512f) : gemm(c.layout, CpuIsa::avx512_bf16, p, c.n, c.k, x, m, 2, own);
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4)) << ::testing::PrintToString(c) << ", " << m << " tokens";
      ++(m > cpu::kAvx512fInt16MaxTokens ? prefill : avx512f_runs ? int16 : own_kernels);
    }
  }
  EXPECT_EQ(int16, 9 * 3);
  EXPECT_EQ(prefill, 15 * 3);
  EXPECT_EQ(own_kernels, 6 * 3);
  // The AMX level keeps its tiles from 5 tokens; below, the same int16 decodes.
  if (cpu_supports(CpuIsa::amx_bf16)) {
    const GemmCase c{CpuLayout::int4_vnni4, 96, 416, 32};
    const Packed p = make(c.layout, c.n, c.k, 17, true, c.group);
    const std::vector<uint16_t> x = bf16_activations(3, c.k, 17);
    const std::vector<float> got = gemm(c.layout, CpuIsa::amx_bf16, p, c.n, c.k, x, 3, 2, stand_in), want = gemm(c.layout, CpuIsa::avx512f, p, c.n, c.k, x, 3, 2, avx512f);
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4));
  }
}

// A block's largest magnitude lands in 2^13..2^14 - 1 on a power-of-two unit; every value within
// 2^6 of it is exact (8 significant bits), smaller ones are within half a unit; an all-zero
// block is zeros; the quad order swaps each quad's middle two; a row with a block outside
// 2^-60..2^61, or not finite, is refused (the FP32 kernels take it).
TEST(Int16Rows, QuantizationIsExactNearEachBlocksLargestAndRefusesExtremeRows) {
  if (!cpu_supports(CpuIsa::avx2)) GTEST_SKIP() << "avx2 does not run here: " << cpu_isa_unavailable(CpuIsa::avx2);
  const uint64_t k = 128;
  std::mt19937_64 rng(5);
  std::vector<float> x(k);
  for (uint64_t i = 0; i < k; ++i) {
    // magnitudes spread over 2^-12..2^8 (block 1 all zero), BF16 values as the kernels' rows are
    const float v = std::ldexp(1.0f + static_cast<float>(rng() % 128) / 128.0f, static_cast<int>(rng() % 21) - 12) * (rng() % 2 ? -1.0f : 1.0f);
    x[i] = i / 32 == 1 ? 0.0f : bf16_to_float(float_to_bf16(v));
  }
  std::vector<int16_t> q(k), q_quads(k);
  std::vector<float> unit(k / 32), unit_quads(k / 32);
  ASSERT_TRUE(cpu::quantize_int16_row(x.data(), k, cpu::Int16Order::columns, q.data(), unit.data()));
  ASSERT_TRUE(cpu::quantize_int16_row(x.data(), k, cpu::Int16Order::quad_pairs, q_quads.data(), unit_quads.data()));
  int exact = 0, rounded = 0;
  for (uint64_t b = 0; b < k / 32; ++b) {
    EXPECT_EQ(unit[b], unit_quads[b]);
    float largest = 0;
    for (uint64_t i = 32 * b; i < 32 * b + 32; ++i) largest = std::max(largest, std::fabs(x[i]));
    int16_t top = 0;
    for (uint64_t i = 32 * b; i < 32 * b + 32; ++i) {
      const double back = static_cast<double>(q[i]) * unit[b];
      if (largest == 0) {
        EXPECT_EQ(q[i], 0);
        continue;
      }
      top = std::max<int16_t>(top, static_cast<int16_t>(std::abs(q[i])));
      if (std::fabs(x[i]) >= std::ldexp(std::exp2(std::floor(std::log2(largest))), -6)) {
        EXPECT_EQ(back, static_cast<double>(x[i])) << "column " << i;
        ++exact;
      } else {
        EXPECT_LE(std::fabs(back - x[i]), 0.5 * unit[b]) << "column " << i;
        ++rounded;
      }
      const uint64_t j = i - i % 4 + (i % 4 == 1 ? 2 : i % 4 == 2 ? 1 : i % 4);  // quad_pairs: (0, 2, 1, 3)
      EXPECT_EQ(q_quads[j], q[i]) << "column " << i;
    }
    if (largest == 0) continue;
    EXPECT_GE(top, 1 << 13) << "block " << b;
    EXPECT_LT(top, 1 << 14) << "block " << b;
    int e = 0;
    EXPECT_EQ(std::frexp(unit[b], &e), 0.5f) << "a power of two";
  }
  EXPECT_GT(exact, 20);
  EXPECT_GT(rounded, 20);
  for (float extreme : {0x1p61f, INFINITY, NAN}) {
    std::vector<float> y = x;
    y[100] = extreme;
    EXPECT_FALSE(cpu::quantize_int16_row(y.data(), k, cpu::Int16Order::columns, q.data(), unit.data())) << extreme;
  }
  std::vector<float> tiny = x;  // block 3's largest below 2^-60
  for (uint64_t i = 96; i < 128; ++i) tiny[i] = std::ldexp(x[i], -70);
  EXPECT_FALSE(cpu::quantize_int16_row(tiny.data(), k, cpu::Int16Order::columns, q.data(), unit.data()));
}

// Rows the int16 decodes refuse (activations near 2^-70 or 2^70) run the FP32 kernels and still
// match the definition, on every level; so do rows at the edges of the accepted range.
TEST_P(CpuIsaLevel, OneTokenActivationsOutsideTheInt16RangeMatchTheDefinition) {
  const CpuIsa isa = GetParam();
  SKIP_UNLESS_SUPPORTED(isa);
  for (const GemmCase& c : {GemmCase{CpuLayout::mxfp4, 96, 416}, GemmCase{CpuLayout::int4_vnni4, 96, 416, 32}, GemmCase{CpuLayout::int4_vnni4, 64, 192, 64},
                            GemmCase{CpuLayout::int8_vnni4, 96, 416}}) {
    const Packed p = make(c.layout, c.n, c.k, 3 + c.n, false, c.group);
    for (int shift : {-70, -58, 0, 58, 70}) {
      std::vector<uint16_t> x = bf16_activations(1, c.k, 40);
      for (auto& v : x) v = float_to_bf16(std::ldexp(bf16_to_float(v), shift));
      const Reference ref = reference(p, c.n, c.k, x, 1, reads_int16(c.layout, isa, 1) && std::abs(shift) < 60);
      EXPECT_EQ(ref.outside_tolerance(gemm(c.layout, isa, p, c.n, c.k, x, 1, 1)), 0u) << ::testing::PrintToString(c) << ", activations times 2^" << shift;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, CpuIsaLevel, ::testing::ValuesIn(kCpuIsas), [](const ::testing::TestParamInfo<CpuIsa>& i) { return isa_param_name(i.param); });

// The best level is one this machine runs, and a level it cannot run says why.
TEST(CpuIsaList, TheBestLevelRunsHereAndEveryLevelIsNamed) {
  EXPECT_TRUE(cpu_supports(best_cpu_isa()));
  EXPECT_TRUE(cpu_supports(CpuIsa::scalar));
  EXPECT_TRUE(cpu_isa_unavailable(CpuIsa::scalar).empty());
  for (CpuIsa isa : kCpuIsas) EXPECT_EQ(cpu_supports(isa), cpu_isa_unavailable(isa).empty()) << cpu_isa_name(isa);
  // The AMX level needs the AVX-512 one (few tokens and the decode run its kernels).
  if (cpu_supports(CpuIsa::amx_bf16)) {
    EXPECT_TRUE(cpu_supports(CpuIsa::avx512_bf16));
  }
  // Each level's features include the next one's: the list only ever steps down.
  if (cpu_supports(CpuIsa::avx512_bf16)) {
    EXPECT_TRUE(cpu_supports(CpuIsa::avx512f));
  }
  if (cpu_supports(CpuIsa::avx512f)) {
    EXPECT_TRUE(cpu_supports(CpuIsa::avx2));
  }
}

TEST(CpuPackedGemm, RefusesSizesNoLayoutHolds) {
  const Packed p = make(CpuLayout::bf16_amx, 32, 32, 1, false);
  std::vector<uint16_t> x(48, 0);
  std::vector<float> out(48);
  EXPECT_THROW(cpu_packed_gemm(CpuLayout::bf16_amx, CpuIsa::scalar, p.projection(), 16, 48, x.data(), 1, out.data()), Error);
  EXPECT_FALSE(cpu_layout_fits(CpuLayout::fp8_block, 48, 64));
  EXPECT_FALSE(cpu_layout_fits(CpuLayout::int8_vnni4, 64, 48));
  EXPECT_TRUE(cpu_layout_fits(CpuLayout::mxfp4, 96, 160));
}

// The int4 kernels read the block_k sizes convert writes (16, 32, 64, 128, each dividing the
// group); other groupings, and a projection without zero points, are refused by name.
TEST(CpuPackedGemm, Int4RefusesGroupingsItsLayoutsDoNotHave) {
  EXPECT_EQ(cpu_int4_groups_unfit(256, 2), "");    // group 128
  EXPECT_EQ(cpu_int4_groups_unfit(512, 1), "");    // group 512: four 128-column sub-blocks
  EXPECT_EQ(cpu_int4_groups_unfit(416, 26), "");   // group 16
  EXPECT_NE(cpu_int4_groups_unfit(256, 0), "");
  EXPECT_NE(cpu_int4_groups_unfit(256, 3), "");    // does not divide
  EXPECT_NE(cpu_int4_groups_unfit(384, 4), "");    // group 96: block_k 96
  EXPECT_NE(cpu_int4_groups_unfit(384, 2), "");    // group 192: no multiple of 128
  EXPECT_NE(cpu_int4_groups_unfit(64, 8), "");     // group 8
  Packed p = make(CpuLayout::int4_vnni4, 32, 256, 1, false, 128);
  std::vector<uint16_t> x(256, 0);
  std::vector<float> out(32);
  CpuProjection w = p.projection();
  w.groups = 3;
  try {
    cpu_packed_gemm(CpuLayout::int4_vnni4, CpuIsa::scalar, w, 32, 256, x.data(), 1, out.data());
    ADD_FAILURE() << "3 groups of 256 inputs ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("3 scale groups do not divide 256 inputs"), std::string::npos) << e.what();
  }
  w = p.projection();
  w.zeros = nullptr;
  EXPECT_THROW(cpu_packed_gemm(CpuLayout::int4_vnni4, CpuIsa::scalar, w, 32, 256, x.data(), 1, out.data()), Error);
  EXPECT_NO_THROW(cpu_packed_gemm(CpuLayout::int4_vnni4, CpuIsa::scalar, p.projection(), 32, 256, x.data(), 1, out.data()));
}

}  // namespace
}  // namespace moepack::experts
