// Marlin WNA16 layouts (packers/marlin_wna16.h).
//  * weights: the spec's worked examples (layouts-marlin-vnni-e8m0.md 2.2, 4- and 8-bit) pinned;
//    every size checked against a second construction written the way vLLM's Python reference
//    builds it (marlin_utils_test.py get_weight_perm + marlin_permute_weights + the pack of
//    marlin_weights, transliterated here, not the closed form the packer uses); 4-bit also
//    against the independently built MXFP4 repack (same nibble codes); AWQ sources against GPTQ
//    sources holding the same codes.
//  * scales: the first permuted columns the spec lists, casts, single vs grouped.
//  * zero points: the spec's 4-bit closed form (2.6), the 8-bit steps spelled out, AWQ vs sequential.
//  * round trips on awkward sizes and refusals.
#include <gtest/gtest.h>

#include <array>
#include <numeric>

#include "packers/marlin_mxfp4.h"
#include "packers/marlin_wna16.h"
#include "packers/registry.h"
#include "tests/packers/flashinfer_test_support.h"

namespace moepack::packers {
namespace {

using namespace fi_test;

uint32_t word_at(const std::vector<uint8_t>& bytes, uint64_t w) {
  uint32_t v;
  std::memcpy(&v, bytes.data() + 4 * w, 4);
  return v;
}
void set_word(OwnedTensor& t, uint64_t w, uint32_t v) { std::memcpy(t.bytes.data() + 4 * w, &v, 4); }

// Codes q[k][n] (b bits) packed the GPTQ way: I32 [K/pf, N], field k%pf of word (k/pf, n).
template <class F>
OwnedTensor gptq_tensor(unsigned bits, uint64_t k, uint64_t n, F code) {
  const uint64_t pf = 32 / bits, mask = (1u << bits) - 1;
  OwnedTensor t(DType::I32, {k / pf, n});
  for (uint64_t r = 0; r < k / pf; ++r)
    for (uint64_t c = 0; c < n; ++c) {
      uint32_t w = 0;
      for (uint64_t i = 0; i < pf; ++i) w |= static_cast<uint32_t>(code(pf * r + i, c) & mask) << (bits * i);
      set_word(t, r * n + c, w);
    }
  return t;
}

// The same codes packed the AWQ way: I32 [K, N/pf], field j of word (k, w) = column pf*w + ORD[j].
template <class F>
OwnedTensor awq_tensor(unsigned bits, uint64_t k, uint64_t n, F code) {
  const std::array<uint64_t, 8> ord4 = {0, 2, 4, 6, 1, 3, 5, 7};
  const std::array<uint64_t, 4> ord8 = {0, 2, 1, 3};
  const uint64_t pf = 32 / bits, mask = (1u << bits) - 1;
  OwnedTensor t(DType::I32, {k, n / pf});
  for (uint64_t r = 0; r < k; ++r)
    for (uint64_t w = 0; w < n / pf; ++w) {
      uint32_t v = 0;
      for (uint64_t j = 0; j < pf; ++j) v |= static_cast<uint32_t>(code(r, pf * w + (bits == 4 ? ord4[j] : ord8[j])) & mask) << (bits * j);
      set_word(t, r * (n / pf) + w, v);
    }
  return t;
}

// vLLM's Python reference, transliterated: get_weight_perm(num_bits) (16-bit activations).
std::vector<uint64_t> reference_weight_perm(unsigned bits) {
  std::vector<uint64_t> perm;
  for (uint64_t i = 0; i < 32; ++i) {
    std::vector<uint64_t> perm1;
    const uint64_t col = i / 4;
    for (uint64_t block : {0u, 1u})
      for (uint64_t row : {2 * (i % 4), 2 * (i % 4) + 1, 2 * (i % 4 + 4), 2 * (i % 4 + 4) + 1}) perm1.push_back(16 * row + col + 8 * block);
    for (uint64_t j = 0; j < 4; ++j)
      for (uint64_t p : perm1) perm.push_back(p + 256 * j);
  }
  const std::vector<uint64_t> interleave = bits == 4 ? std::vector<uint64_t>{0, 2, 4, 6, 1, 3, 5, 7} : std::vector<uint64_t>{0, 2, 1, 3};
  std::vector<uint64_t> out(perm.size());
  for (size_t g = 0; g < perm.size() / interleave.size(); ++g)
    for (size_t v = 0; v < interleave.size(); ++v) out[g * interleave.size() + v] = perm[g * interleave.size() + interleave[v]];
  return out;
}

// marlin_permute_weights (tile 16) then marlin_weights' pack of pf consecutive values per word.
template <class F>
std::vector<uint8_t> reference_marlin_weights(unsigned bits, uint64_t size_k, uint64_t size_n, F code) {
  const std::vector<uint64_t> perm = reference_weight_perm(bits);
  // [K/16, 16, N/16, 16] -> permute (0, 2, 1, 3) -> [K/16, N*16] flat
  std::vector<uint32_t> tiled(size_k * size_n);
  uint64_t pos = 0;
  for (uint64_t kt = 0; kt < size_k / 16; ++kt)
    for (uint64_t nt = 0; nt < size_n / 16; ++nt)
      for (uint64_t kk = 0; kk < 16; ++kk)
        for (uint64_t nn = 0; nn < 16; ++nn) tiled[pos++] = static_cast<uint32_t>(code(16 * kt + kk, 16 * nt + nn) & ((1u << bits) - 1));
  std::vector<uint32_t> permuted(tiled.size());
  for (uint64_t c = 0; c < tiled.size() / perm.size(); ++c)
    for (uint64_t p = 0; p < perm.size(); ++p) permuted[c * perm.size() + p] = tiled[c * perm.size() + perm[p]];
  const uint64_t pf = 32 / bits;
  std::vector<uint8_t> out(permuted.size() / pf * 4);
  for (uint64_t w = 0; w < permuted.size() / pf; ++w) {
    uint32_t v = 0;
    for (uint64_t i = 0; i < pf; ++i) v |= permuted[w * pf + i] << (bits * i);
    std::memcpy(out.data() + 4 * w, &v, 4);
  }
  return out;
}

uint32_t hash_code(uint64_t k, uint64_t n, uint32_t seed) {
  uint64_t x = (k * 0x9E3779B97F4A7C15ull) ^ (n * 0xC2B2AE3D27D4EB4Full) ^ seed;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  return static_cast<uint32_t>(x >> 32);
}

TEST(MarlinWna16Weight, WorkedExamplesPinned) {
  const MarlinIntWeightLayout w4(4, IntSource::gptq);
  const OwnedTensor q4 = gptq_tensor(4, 16, 64, [](uint64_t k, uint64_t n) { return k + n; });
  EXPECT_EQ(word_at(q4.bytes, 0), 0x76543210u);  // the spec's GPTQ source word qweight[0][0]
  EXPECT_EQ(w4.packed_shape(q4.shape), (std::vector<uint64_t>{1, 128}));
  const std::vector<uint8_t> p4 = pack(w4, q4);
  EXPECT_EQ(word_at(p4, 0), 0x19910880u);
  EXPECT_EQ(word_at(p4, 4), 0x3bb32aa2u);
  EXPECT_EQ(word_at(p4, 16), 0x2aa21991u);

  const MarlinIntWeightLayout w8(8, IntSource::gptq);
  const OwnedTensor q8 = gptq_tensor(8, 16, 64, [](uint64_t k, uint64_t n) { return 16 * k + n; });
  EXPECT_EQ(w8.packed_shape(q8.shape), (std::vector<uint64_t>{1, 256}));
  const std::vector<uint8_t> p8 = pack(w8, q8);
  EXPECT_EQ(word_at(p8, 0), 0x90108000u);
  EXPECT_EQ(word_at(p8, 1), 0x98188808u);
}

TEST(MarlinWna16Weight, MatchesPythonReferenceAndAwqSource) {
  for (unsigned bits : {4u, 8u})
    for (auto [k, n] : {std::pair<uint64_t, uint64_t>{16, 64}, {32, 128}, {48, 192}, {128, 64}}) {
      auto code = [&](uint64_t kk, uint64_t nn) { return hash_code(kk, nn, bits); };
      const std::vector<uint8_t> want = reference_marlin_weights(bits, k, n, code);
      const MarlinIntWeightLayout gptq(bits, IntSource::gptq), awq(bits, IntSource::awq);
      const OwnedTensor g = gptq_tensor(bits, k, n, code), a = awq_tensor(bits, k, n, code);
      EXPECT_EQ(pack(gptq, g), want) << bits << "-bit K=" << k << " N=" << n;
      EXPECT_EQ(pack(awq, a), want) << bits << "-bit AWQ K=" << k << " N=" << n;
      expect_round_trip(gptq, g);
      expect_round_trip(awq, a);
    }
}

// The MXFP4 repack (built from get_weight_perm in marlin_mxfp4.cpp) moves FP4 codes as uint4
// GPTQ codes: the same codes through both give the same bytes.
TEST(MarlinWna16Weight, Int4EqualsMxfp4RepackOfTheSameCodes) {
  const MarlinMxfp4WeightLayout fp4(MarlinActivation::bits16);
  const MarlinIntWeightLayout int4(4, IntSource::gptq);
  for (auto [k, n] : {std::pair<uint64_t, uint64_t>{32, 64}, {96, 128}, {16, 192}}) {
    auto code = [&](uint64_t kk, uint64_t nn) { return hash_code(kk, nn, 7) & 0xF; };
    OwnedTensor codes(DType::U8, {n, k / 2});
    for (uint64_t r = 0; r < n; ++r)
      for (uint64_t c = 0; c < k; ++c) set_nibble(codes.bytes, r, k, c, static_cast<uint8_t>(code(c, r)));
    EXPECT_EQ(pack(int4, gptq_tensor(4, k, n, code)), pack(fp4, codes)) << k << "x" << n;
  }
}

TEST(MarlinWna16Weight, Refusals) {
  expect_refused(MarlinIntWeightLayout(4, IntSource::gptq), DType::I32, {2, 96});   // N % 64
  expect_refused(MarlinIntWeightLayout(4, IntSource::gptq), DType::I32, {3, 64});   // K = 24
  expect_refused(MarlinIntWeightLayout(8, IntSource::gptq), DType::I32, {2, 64});   // K = 8
  expect_refused(MarlinIntWeightLayout(4, IntSource::awq), DType::I32, {16, 4});    // N = 32
  expect_refused(MarlinIntWeightLayout(4, IntSource::gptq), DType::U8, {2, 64}, false);
}

TEST(MarlinWna16Scale, PermutationsPinned) {
  OwnedTensor s(DType::BF16, {2, 64});
  for (uint64_t i = 0; i < 128; ++i) {
    const uint16_t v = float_to_bf16(static_cast<float>(i));
    std::memcpy(s.bytes.data() + 2 * i, &v, 2);
  }
  auto value_at = [](const std::vector<uint8_t>& b, uint64_t i) {
    uint16_t v;
    std::memcpy(&v, b.data() + 2 * i, 2);
    return static_cast<uint64_t>(bf16_to_float(v));
  };
  const std::vector<uint8_t> grouped = pack(MarlinIntScaleLayout(true, DType::BF16), s);
  const std::vector<uint64_t> g_first = {0, 8, 16, 24, 32, 40, 48, 56, 1, 9};
  for (size_t i = 0; i < g_first.size(); ++i) EXPECT_EQ(value_at(grouped, i), g_first[i]);
  EXPECT_EQ(value_at(grouped, 64), 64u);  // row 1 starts its own chunk
  const std::vector<uint8_t> single = pack(MarlinIntScaleLayout(false, DType::BF16), s);
  const std::vector<uint64_t> s_first = {0, 1, 8, 9, 16, 17, 24, 25, 2, 3, 10, 11};
  for (size_t i = 0; i < s_first.size(); ++i) EXPECT_EQ(value_at(single, i), s_first[i]);
  EXPECT_EQ(value_at(single, 32), 32u);
}

TEST(MarlinWna16Scale, CastsToParamsDtypeAndRoundTrips) {
  OwnedTensor s(DType::F16, {3, 64});
  for (uint64_t i = 0; i < 192; ++i) {
    const uint16_t v = float_to_f16(0.001f * static_cast<float>(i + 1));
    std::memcpy(s.bytes.data() + 2 * i, &v, 2);
  }
  const MarlinIntScaleLayout to_bf16(true, DType::BF16);
  const std::vector<uint8_t> packed = pack(to_bf16, s);
  uint16_t first;
  std::memcpy(&first, packed.data(), 2);
  uint16_t src;
  std::memcpy(&src, s.bytes.data(), 2);
  EXPECT_EQ(first, float_to_bf16(f16_to_float(src)));
  for (bool grouped : {true, false})
    for (DType d : {DType::F16, DType::BF16}) {
      const MarlinIntScaleLayout same(grouped, d);
      expect_round_trip(same, random_tensor(d, {5, 128}, 3));
    }
  expect_refused(MarlinIntScaleLayout(true, DType::BF16), DType::BF16, {2, 32});
  expect_refused(MarlinIntScaleLayout(false, DType::BF16), DType::BF16, {2, 48});
}

uint64_t field(const std::vector<uint8_t>& b, unsigned bits, uint64_t unit) {
  const uint64_t pf = 32 / bits;
  return (word_at(b, unit / pf) >> (bits * (unit % pf))) & ((1u << bits) - 1);
}

TEST(MarlinWna16ZeroPoint, FourBitClosedFormAndAwqSource) {
  // spec 2.6: out[g][8b + i] nibble t = zp[g][64b + i + 8*ORD4[t]], ORD4 = 0 2 4 6 1 3 5 7.
  const std::array<uint64_t, 8> ord4 = {0, 2, 4, 6, 1, 3, 5, 7};
  const uint64_t groups = 3, n = 128;
  auto zp = [](uint64_t g, uint64_t c) { return hash_code(g, c, 11) & 0xF; };
  // Sequential packing along N: field i of word (g, w) = column 8w + i.
  OwnedTensor z(DType::I32, {groups, n / 8});
  for (uint64_t g = 0; g < groups; ++g)
    for (uint64_t w = 0; w < n / 8; ++w) {
      uint32_t v = 0;
      for (uint64_t i = 0; i < 8; ++i) v |= static_cast<uint32_t>(zp(g, 8 * w + i)) << (4 * i);
      set_word(z, g * (n / 8) + w, v);
    }
  const std::vector<uint8_t> packed = pack(MarlinIntZeroPointLayout(4, IntSource::gptq), z);
  for (uint64_t g = 0; g < groups; ++g)
    for (uint64_t word = 0; word < n / 8; ++word)
      for (uint64_t t = 0; t < 8; ++t) {
        const uint64_t b = word / 8, i = word % 8;
        ASSERT_EQ(field(packed, 4, g * n + 8 * word + t), zp(g, 64 * b + i + 8 * ord4[t])) << g << "," << word << "," << t;
      }
  // The AWQ-interleaved packing of the same zero points gives the same Marlin bytes.
  const OwnedTensor awq = awq_tensor(4, groups, n, zp);
  EXPECT_EQ(pack(MarlinIntZeroPointLayout(4, IntSource::awq), awq), packed);
  expect_round_trip(MarlinIntZeroPointLayout(4, IntSource::gptq), z);
  expect_round_trip(MarlinIntZeroPointLayout(4, IntSource::awq), awq);
  // GPTQ v1 symmetric zero points (zero - 1 = 7 everywhere) stay 0x77777777 (ERRATA 6).
  OwnedTensor sevens(DType::I32, {1, 16});
  for (uint64_t w = 0; w < 16; ++w) set_word(sevens, w, 0x77777777u);
  EXPECT_EQ(pack(MarlinIntZeroPointLayout(4, IntSource::gptq), sevens), sevens.bytes);
}

TEST(MarlinWna16ZeroPoint, EightBitSteps) {
  // marlin_zero_points, 8-bit: grouped permutation over 64 columns, then each 4 columns by
  // 0 2 1 3, then sequential byte packing.
  const uint64_t groups = 2, n = 64;
  auto zp = [](uint64_t g, uint64_t c) { return hash_code(g, c, 5) & 0xFF; };
  OwnedTensor z(DType::I32, {groups, n / 4});
  for (uint64_t g = 0; g < groups; ++g)
    for (uint64_t c = 0; c < n; ++c) z.bytes[g * n + c] = static_cast<uint8_t>(zp(g, c));
  const std::vector<uint8_t> packed = pack(MarlinIntZeroPointLayout(8, IntSource::gptq), z);
  const std::array<uint64_t, 4> ord8 = {0, 2, 1, 3};
  for (uint64_t g = 0; g < groups; ++g) {
    std::vector<uint64_t> a(n), b(n);
    for (uint64_t x = 0; x < n; ++x) a[x] = zp(g, x / 8 + 8 * (x % 8));
    for (uint64_t x = 0; x < n; ++x) b[x] = a[(x / 4) * 4 + ord8[x % 4]];
    for (uint64_t x = 0; x < n; ++x) ASSERT_EQ(packed[g * n + x], b[x]) << g << "," << x;
  }
  expect_refused(MarlinIntZeroPointLayout(8, IntSource::gptq), DType::I32, {2, 8});
}

TEST(MarlinWna16, RegisteredIds) {
  for (const char* id : {"vllm.gptq_marlin_repack(num_bits=4,is_a_8bit=0,e9d1398d9)", "vllm.gptq_marlin_repack(num_bits=8,is_a_8bit=0,e9d1398d9)",
                         "vllm.awq_marlin_repack(num_bits=4,is_a_8bit=0,e9d1398d9)",
                         "vllm.marlin_moe_permute_scales(perm=grouped,params_dtype=BF16,is_a_8bit=0,e9d1398d9)",
                         "vllm.marlin_moe_permute_scales(perm=single,params_dtype=F16,is_a_8bit=0,e9d1398d9)",
                         "vllm.moe_packed_to_marlin_zero_points(num_bits=4,is_a_8bit=0,e9d1398d9)",
                         "vllm.moe_awq_to_marlin_zero_points(num_bits=4,is_a_8bit=0,e9d1398d9)"})
    EXPECT_NE(find_layout(id), nullptr) << id;
}

}  // namespace
}  // namespace moepack::packers
