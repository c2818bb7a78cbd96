// Marlin MXFP4 layouts: the repack (built like vLLM's get_weight_perm) checked against the
// closed forms of layouts-marlin-vnni-e8m0.md 2.2 and 2.11, its worked example pinned; scale and
// bias permutations pinned and checked against the spec's closed form; refusals. (The bulk
// repack against the layout's own index map: layout_contract_test.cpp.)
#include <gtest/gtest.h>

#include <array>

#include "packers/marlin_mxfp4.h"
#include "tests/packers/flashinfer_test_support.h"

namespace moepack::packers {
namespace {

using namespace fi_test;

uint32_t word_at(const std::vector<uint8_t>& packed, uint64_t w) {
  uint32_t v;
  std::memcpy(&v, packed.data() + 4 * w, 4);
  return v;
}

// canonical [N, K/2] with q[k][n] = code(k, n)
template <class F>
OwnedTensor codes_tensor(uint64_t n_rows, uint64_t k, F code) {
  OwnedTensor t(DType::U8, {n_rows, k / 2});
  for (uint64_t n = 0; n < n_rows; ++n)
    for (uint64_t kk = 0; kk < k; ++kk) set_nibble(t.bytes, n, k, kk, static_cast<uint8_t>(code(kk, n) & 0xF));
  return t;
}

TEST(MarlinMxfp4Weight, WorkedExamplePinned) {
  const MarlinMxfp4WeightLayout layout(MarlinActivation::bits16);
  const OwnedTensor canonical = codes_tensor(64, 16, [](uint64_t k, uint64_t n) { return k + n; });
  EXPECT_EQ(layout.packed_shape(canonical.shape), (std::vector<uint64_t>{1, 128}));
  const std::vector<uint8_t> packed = pack(layout, canonical);
  EXPECT_EQ(word_at(packed, 0), 0x19910880u);
  EXPECT_EQ(word_at(packed, 4), 0x3bb32aa2u);
  EXPECT_EQ(word_at(packed, 16), 0x2aa21991u);
}

// layouts-marlin 2.2, per source element: kt,kk = divmod(k,16); nt,nn = divmod(n,64);
// w,col = divmod(nn,16); h,c8 = divmod(col,8); t = 4*c8 + (kk%8)/2; up = kk/8; d = kk%2;
// word = (kt*(N/64)+nt)*128 + 4t + w; nibble = INV4[4h + 2up + d].
TEST(MarlinMxfp4Weight, Bits16MatchesClosedForm) {
  const MarlinMxfp4WeightLayout layout(MarlinActivation::bits16);
  const std::array<uint64_t, 8> inv4 = {0, 4, 1, 5, 2, 6, 3, 7};
  for (auto [n_rows, k] : {std::pair<uint64_t, uint64_t>{64, 32}, {128, 96}, {192, 16}}) {
    const OwnedTensor canonical = random_tensor(DType::U8, {n_rows, k / 2}, static_cast<uint32_t>(n_rows + k));
    const std::vector<uint8_t> packed = pack(layout, canonical);
    for (uint64_t kq = 0; kq < k; ++kq)
      for (uint64_t n = 0; n < n_rows; ++n) {
        const uint64_t kt = kq / 16, kk = kq % 16, nt = n / 64, nn = n % 64, w = nn / 16, col = nn % 16;
        const uint64_t h = col / 8, c8 = col % 8, t = 4 * c8 + (kk % 8) / 2, up = kk / 8, d = kk % 2;
        const uint64_t word = (kt * (n_rows / 64) + nt) * 128 + 4 * t + w;
        const uint64_t nibble = inv4[4 * h + 2 * up + d];
        ASSERT_EQ((word_at(packed, word) >> (4 * nibble)) & 0xF, get_nibble(canonical.bytes, n, k, kq)) << kq << "," << n;
      }
    expect_round_trip(layout, canonical);
  }
}

// layouts-marlin 2.11 (is_a_8bit): 32x32 tiles, word base + 4t + w with r = 4(t%4),
// n = 32nt + 16(w/2) + t/4 + 8(w%2), v[i] = q[32kt+r+i][n], v[4+i] = q[32kt+r+16+i][n],
// nibble j = v[[0,4,1,5,2,6,3,7][j]].
TEST(MarlinMxfp4Weight, Fp8ActivationsMatchesClosedForm) {
  const MarlinMxfp4WeightLayout layout(MarlinActivation::fp8);
  const std::array<uint64_t, 8> order = {0, 4, 1, 5, 2, 6, 3, 7};
  for (auto [n_rows, k] : {std::pair<uint64_t, uint64_t>{64, 32}, {128, 96}}) {
    const OwnedTensor canonical = random_tensor(DType::U8, {n_rows, k / 2}, static_cast<uint32_t>(3 * n_rows + k));
    const std::vector<uint8_t> packed = pack(layout, canonical);
    for (uint64_t kt = 0; kt < k / 32; ++kt)
      for (uint64_t nt = 0; nt < n_rows / 32; ++nt)
        for (uint64_t w = 0; w < 4; ++w)
          for (uint64_t t = 0; t < 32; ++t) {
            const uint64_t r = 4 * (t % 4), n = 32 * nt + 16 * (w / 2) + t / 4 + 8 * (w % 2);
            uint32_t expected = 0;
            for (uint64_t j = 0; j < 8; ++j) {
              const uint64_t i = order[j];
              const uint64_t kq = 32 * kt + r + (i < 4 ? i : 16 + i - 4);
              expected |= static_cast<uint32_t>(get_nibble(canonical.bytes, n, k, kq)) << (4 * j);
            }
            ASSERT_EQ(word_at(packed, (kt * (n_rows / 32) + nt) * 128 + 4 * t + w), expected);
          }
    expect_round_trip(layout, canonical);
  }
}

TEST(MarlinMxfp4Weight, RefusesNonTileShapes) {
  expect_refused(MarlinMxfp4WeightLayout(MarlinActivation::bits16), DType::U8, {32, 8});
  expect_refused(MarlinMxfp4WeightLayout(MarlinActivation::bits16), DType::U8, {64, 4});
  expect_refused(MarlinMxfp4WeightLayout(MarlinActivation::fp8), DType::U8, {64, 8});
  expect_refused(MarlinMxfp4WeightLayout(MarlinActivation::bits16), DType::BF16, {64, 8}, false);
  EXPECT_EQ(MarlinMxfp4WeightLayout(MarlinActivation::bits16).name(),
            "vllm.gptq_marlin_repack(num_bits=4,fp4_codes,is_a_8bit=0,e9d1398d9)");
}

// S[n][g] = distinct bytes so the permutation can be read off.
OwnedTensor tagged_scales(uint64_t rows, uint64_t groups) {
  OwnedTensor t(DType::U8, {rows, groups});
  for (uint64_t n = 0; n < rows; ++n)
    for (uint64_t g = 0; g < groups; ++g) t.bytes[n * groups + g] = static_cast<uint8_t>((n * 7 + g * 3) % 250);
  return t;
}

TEST(MarlinMxfp4Scale, Bits16GroupedMatchesClosedForm) {
  const MarlinMxfp4ScaleLayout layout(MarlinActivation::bits16);
  const OwnedTensor canonical = random_tensor(DType::U8, {128, 3}, 23);
  EXPECT_EQ(layout.packed_shape(canonical.shape), (std::vector<uint64_t>{3, 128}));
  EXPECT_EQ(layout.packed_dtype(DType::U8), DType::F8_E8M0);
  const std::vector<uint8_t> packed = pack(layout, canonical);
  // out[g][64b + 8i + 4h + u] = S[64b + i + 8*(4h + [0,2,1,3][u])][g]
  const std::array<uint64_t, 4> u_order = {0, 2, 1, 3};
  for (uint64_t g = 0; g < 3; ++g)
    for (uint64_t b = 0; b < 2; ++b)
      for (uint64_t i = 0; i < 8; ++i)
        for (uint64_t h = 0; h < 2; ++h)
          for (uint64_t u = 0; u < 4; ++u)
            ASSERT_EQ(packed[g * 128 + 64 * b + 8 * i + 4 * h + u],
                      canonical.bytes[(64 * b + i + 8 * (4 * h + u_order[u])) * 3 + g]);
  // First packed entries of a row: T[0] T[16] T[8] T[24] T[32] T[48] T[40] T[56].
  const std::vector<uint64_t> first = {0, 16, 8, 24, 32, 48, 40, 56};
  for (uint64_t x = 0; x < 8; ++x) EXPECT_EQ(layout.source_column(x, 3), first[x]);
  expect_round_trip(layout, canonical);
}

TEST(MarlinMxfp4Scale, SingleGroupAndFp8UseSinglePermutation) {
  const MarlinMxfp4ScaleLayout bits16(MarlinActivation::bits16);
  const MarlinMxfp4ScaleLayout fp8(MarlinActivation::fp8);
  // One group (K = 32), 16-bit: single map after the [0,2,1,3] regroup: 0 8 1 9 16 24 17 25.
  const std::vector<uint64_t> single16 = {0, 8, 1, 9, 16, 24, 17, 25};
  // FP8: the single map alone: 0 1 8 9 16 17 24 25 2 3.
  const std::vector<uint64_t> single8 = {0, 1, 8, 9, 16, 17, 24, 25, 2, 3};
  for (uint64_t x = 0; x < single16.size(); ++x) EXPECT_EQ(bits16.source_column(x, 1), single16[x]);
  for (uint64_t x = 0; x < single8.size(); ++x) EXPECT_EQ(fp8.source_column(x, 4), single8[x]);

  const OwnedTensor canonical = tagged_scales(64, 4);
  const std::vector<uint8_t> packed = pack(fp8, canonical);
  for (uint64_t g = 0; g < 4; ++g)
    for (uint64_t x = 0; x < 64; ++x)
      ASSERT_EQ(packed[g * 64 + x], canonical.bytes[fp8.source_column(x, 4) * 4 + g] + 6);
  expect_round_trip(fp8, canonical);
  expect_round_trip(bits16, random_tensor(DType::U8, {192, 1}, 29));
}

TEST(MarlinMxfp4Scale, Fp8RefusesScalesAbove249) {
  const MarlinMxfp4ScaleLayout fp8(MarlinActivation::fp8);
  OwnedTensor canonical = tagged_scales(64, 2);
  canonical.bytes[5] = 250;
  std::vector<uint8_t> out(128);
  try {
    fp8.pack(canonical.view(), out);
    ADD_FAILURE() << "accepted a scale byte of 250";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::bad_input);
    EXPECT_NE(std::string(e.what()).find("249"), std::string::npos);
  }
  expect_refused(fp8, DType::U8, {32, 2});
}

TEST(MarlinBias, SinglePermutationToBf16) {
  const MarlinBiasLayout layout;
  const std::vector<uint64_t> first = {0, 1, 8, 9, 16, 17, 24, 25, 2, 3};
  for (uint64_t x = 0; x < first.size(); ++x) EXPECT_EQ(MarlinBiasLayout::source_index(x), first[x]);
  const OwnedTensor canonical = random_bf16_bias(64, 31);
  const std::vector<uint8_t> packed = pack(layout, canonical);
  for (uint64_t x = 0; x < 64; ++x)
    EXPECT_EQ(std::memcmp(packed.data() + 2 * x, canonical.bytes.data() + 2 * MarlinBiasLayout::source_index(x), 2), 0);
  expect_round_trip(layout, canonical);
  expect_refused(layout, DType::BF16, {48});
}

}  // namespace
}  // namespace moepack::packers
