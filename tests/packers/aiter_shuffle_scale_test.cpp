// AITER scale shuffles: shuffle_scale(is_guinterleave, gate_up 0/1) and e8m0_shuffle, plus the
// float8_e8m0fnu view. Worked examples re-derived from the torch ops, pack against a torch-op
// emulation of the flattened [E*N, G] tensor, padding bytes, parameter shapes, refusals. (Round
// trips on awkward sizes: layout_contract_test.cpp.)
#include "packers/aiter_shuffle_scale.h"

#include <gtest/gtest.h>

#include "packers/registry.h"
#include "tests/packers/triton_reference_ops.h"

namespace moepack::packers {
namespace {

using testing::pack_all;
using testing::random_tensor;

constexpr AiterScaleShuffle kVariants[] = {AiterScaleShuffle::guinterleave, AiterScaleShuffle::guinterleave_gate_up,
                                           AiterScaleShuffle::e8m0_param2d, AiterScaleShuffle::e8m0_param3d};

bool is_guinterleave(AiterScaleShuffle v) {
  return v == AiterScaleShuffle::guinterleave || v == AiterScaleShuffle::guinterleave_gate_up;
}

// Canonical scale with S(n, g) = n*G + g, which is unique while N*G <= 256.
OwnedTensor tagged_scale(uint64_t rows, uint64_t groups) {
  OwnedTensor s(DType::U8, {rows, groups});
  for (uint64_t i = 0; i < rows * groups; ++i) s.bytes[i] = static_cast<uint8_t>(i);
  return s;
}

TEST(AiterShuffleScale, NamesAndShapes) {
  EXPECT_EQ(AiterShuffleScaleLayout(AiterScaleShuffle::guinterleave).name(),
            "aiter.shuffle_scale(is_guinterleave=1,gate_up=0,v0.1.19)");
  EXPECT_EQ(AiterShuffleScaleLayout(AiterScaleShuffle::guinterleave_gate_up).name(),
            "aiter.shuffle_scale(is_guinterleave=1,gate_up=1,v0.1.19)");
  EXPECT_EQ(AiterShuffleScaleLayout(AiterScaleShuffle::e8m0_param2d).name(), "aiter.e8m0_shuffle(param=2d,v0.1.19)");
  EXPECT_EQ(AiterShuffleScaleLayout(AiterScaleShuffle::e8m0_param3d).name(), "aiter.e8m0_shuffle(param=3d,v0.1.19)");

  const std::vector<uint64_t> w2_k3_tp8{7168, 12};  // G = 12 -> 16
  for (AiterScaleShuffle v : kVariants) {
    AiterShuffleScaleLayout layout(v);
    EXPECT_EQ(layout.packed_shape(w2_k3_tp8), (std::vector<uint64_t>{7168, 16}));
    EXPECT_EQ(layout.packed_dtype(DType::U8), DType::U8);
    EXPECT_EQ(layout.packed_dtype(DType::F8_E8M0), DType::F8_E8M0);
  }
  // vLLM keeps the is_guinterleave results and the SiTU w2 e8m0_shuffle 2-D, and views the
  // W4A4 e8m0_shuffle back to [E, N, G8].
  EXPECT_EQ(AiterShuffleScaleLayout(AiterScaleShuffle::guinterleave).parameter_shape(384, w2_k3_tp8),
            (std::vector<uint64_t>{384 * 7168, 16}));
  EXPECT_EQ(AiterShuffleScaleLayout(AiterScaleShuffle::guinterleave_gate_up).parameter_shape(3, std::vector<uint64_t>{96, 12}),
            (std::vector<uint64_t>{288, 16}));
  EXPECT_EQ(AiterShuffleScaleLayout(AiterScaleShuffle::e8m0_param2d).parameter_shape(384, w2_k3_tp8),
            (std::vector<uint64_t>{384 * 7168, 16}));
  EXPECT_EQ(AiterShuffleScaleLayout(AiterScaleShuffle::e8m0_param3d).parameter_shape(32, std::vector<uint64_t>{6144, 96}),
            (std::vector<uint64_t>{32, 6144, 96}));
}

TEST(AiterShuffleScale, E8m0ShuffleRefusesRowPaddingThatBelongsToNoExpert) {
  // 3 experts of 32 rows = 96 rows: e8m0_shuffle would pad the flattened tensor to 256 rows.
  for (AiterScaleShuffle v : {AiterScaleShuffle::e8m0_param2d, AiterScaleShuffle::e8m0_param3d}) {
    AiterShuffleScaleLayout layout(v);
    EXPECT_EQ(testing::error_kind_of([&] { layout.parameter_shape(3, std::vector<uint64_t>{32, 8}); }),
              static_cast<int>(ErrorKind::bad_input));
    EXPECT_EQ(testing::error_kind_of([&] { layout.parameter_shape(1, std::vector<uint64_t>{128, 8}); }),
              static_cast<int>(ErrorKind::bad_input));
    EXPECT_NO_THROW(layout.parameter_shape(8, std::vector<uint64_t>{32, 8}));   // 256 rows
    EXPECT_NO_THROW(layout.parameter_shape(2, std::vector<uint64_t>{128, 8}));  // 256 rows
  }
  // is_guinterleave pads no rows: any expert count.
  EXPECT_NO_THROW(AiterShuffleScaleLayout(AiterScaleShuffle::guinterleave).parameter_shape(3, std::vector<uint64_t>{32, 8}));
}

// Expected bytes from a throwaway re-run of aiter/ops/shuffle.py `shuffle_scale` (both
// branches) on plain lists. N = 32, G = 8, S(n, g) = 8n + g: every lane's dword is
// S(nl, kl) S(16+nl, kl) S(nl, 4+kl) S(16+nl, 4+kl).
const std::vector<uint8_t> kN32G8 = {
    0x00, 0x80, 0x04, 0x84, 0x08, 0x88, 0x0C, 0x8C, 0x10, 0x90, 0x14, 0x94, 0x18, 0x98, 0x1C, 0x9C,
    0x20, 0xA0, 0x24, 0xA4, 0x28, 0xA8, 0x2C, 0xAC, 0x30, 0xB0, 0x34, 0xB4, 0x38, 0xB8, 0x3C, 0xBC,
    0x40, 0xC0, 0x44, 0xC4, 0x48, 0xC8, 0x4C, 0xCC, 0x50, 0xD0, 0x54, 0xD4, 0x58, 0xD8, 0x5C, 0xDC,
    0x60, 0xE0, 0x64, 0xE4, 0x68, 0xE8, 0x6C, 0xEC, 0x70, 0xF0, 0x74, 0xF4, 0x78, 0xF8, 0x7C, 0xFC,
    0x01, 0x81, 0x05, 0x85, 0x09, 0x89, 0x0D, 0x8D, 0x11, 0x91, 0x15, 0x95, 0x19, 0x99, 0x1D, 0x9D,
    0x21, 0xA1, 0x25, 0xA5, 0x29, 0xA9, 0x2D, 0xAD, 0x31, 0xB1, 0x35, 0xB5, 0x39, 0xB9, 0x3D, 0xBD,
    0x41, 0xC1, 0x45, 0xC5, 0x49, 0xC9, 0x4D, 0xCD, 0x51, 0xD1, 0x55, 0xD5, 0x59, 0xD9, 0x5D, 0xDD,
    0x61, 0xE1, 0x65, 0xE5, 0x69, 0xE9, 0x6D, 0xED, 0x71, 0xF1, 0x75, 0xF5, 0x79, 0xF9, 0x7D, 0xFD,
    0x02, 0x82, 0x06, 0x86, 0x0A, 0x8A, 0x0E, 0x8E, 0x12, 0x92, 0x16, 0x96, 0x1A, 0x9A, 0x1E, 0x9E,
    0x22, 0xA2, 0x26, 0xA6, 0x2A, 0xAA, 0x2E, 0xAE, 0x32, 0xB2, 0x36, 0xB6, 0x3A, 0xBA, 0x3E, 0xBE,
    0x42, 0xC2, 0x46, 0xC6, 0x4A, 0xCA, 0x4E, 0xCE, 0x52, 0xD2, 0x56, 0xD6, 0x5A, 0xDA, 0x5E, 0xDE,
    0x62, 0xE2, 0x66, 0xE6, 0x6A, 0xEA, 0x6E, 0xEE, 0x72, 0xF2, 0x76, 0xF6, 0x7A, 0xFA, 0x7E, 0xFE,
    0x03, 0x83, 0x07, 0x87, 0x0B, 0x8B, 0x0F, 0x8F, 0x13, 0x93, 0x17, 0x97, 0x1B, 0x9B, 0x1F, 0x9F,
    0x23, 0xA3, 0x27, 0xA7, 0x2B, 0xAB, 0x2F, 0xAF, 0x33, 0xB3, 0x37, 0xB7, 0x3B, 0xBB, 0x3F, 0xBF,
    0x43, 0xC3, 0x47, 0xC7, 0x4B, 0xCB, 0x4F, 0xCF, 0x53, 0xD3, 0x57, 0xD7, 0x5B, 0xDB, 0x5F, 0xDF,
    0x63, 0xE3, 0x67, 0xE7, 0x6B, 0xEB, 0x6F, 0xEF, 0x73, 0xF3, 0x77, 0xF7, 0x7B, 0xFB, 0x7F, 0xFF,
};

TEST(AiterShuffleScale, WorkedExampleOneBlockIsTheSameInEveryForm) {
  // With 32 rows the gate_up split (rows 0-15 | 16-31) is the same as the plain 16-row pairing.
  const OwnedTensor s = tagged_scale(32, 8);
  for (AiterScaleShuffle v : kVariants) {
    SCOPED_TRACE(AiterShuffleScaleLayout(v).name());
    EXPECT_EQ(pack_all(AiterShuffleScaleLayout(v), s), kN32G8);
  }
}

// Same re-run, gate_up=1, N = 64 (I = 32: gate rows 0-31, up rows 32-63), G = 4 padded to 8,
// S(n, g) = 4n + g. Block 0 pairs gate rows 0-15 with up rows 32-47 (bytes 0, 1 = S(0,0),
// S(32,0)); block 1 (from byte 256) gate rows 16-31 with up rows 48-63; columns 4-7 are 0x7F.
const std::vector<uint8_t> kGateUpN64G4 = {
    0x00, 0x80, 0x7F, 0x7F, 0x04, 0x84, 0x7F, 0x7F, 0x08, 0x88, 0x7F, 0x7F, 0x0C, 0x8C, 0x7F, 0x7F,
    0x10, 0x90, 0x7F, 0x7F, 0x14, 0x94, 0x7F, 0x7F, 0x18, 0x98, 0x7F, 0x7F, 0x1C, 0x9C, 0x7F, 0x7F,
    0x20, 0xA0, 0x7F, 0x7F, 0x24, 0xA4, 0x7F, 0x7F, 0x28, 0xA8, 0x7F, 0x7F, 0x2C, 0xAC, 0x7F, 0x7F,
    0x30, 0xB0, 0x7F, 0x7F, 0x34, 0xB4, 0x7F, 0x7F, 0x38, 0xB8, 0x7F, 0x7F, 0x3C, 0xBC, 0x7F, 0x7F,
    0x01, 0x81, 0x7F, 0x7F, 0x05, 0x85, 0x7F, 0x7F, 0x09, 0x89, 0x7F, 0x7F, 0x0D, 0x8D, 0x7F, 0x7F,
    0x11, 0x91, 0x7F, 0x7F, 0x15, 0x95, 0x7F, 0x7F, 0x19, 0x99, 0x7F, 0x7F, 0x1D, 0x9D, 0x7F, 0x7F,
    0x21, 0xA1, 0x7F, 0x7F, 0x25, 0xA5, 0x7F, 0x7F, 0x29, 0xA9, 0x7F, 0x7F, 0x2D, 0xAD, 0x7F, 0x7F,
    0x31, 0xB1, 0x7F, 0x7F, 0x35, 0xB5, 0x7F, 0x7F, 0x39, 0xB9, 0x7F, 0x7F, 0x3D, 0xBD, 0x7F, 0x7F,
    0x02, 0x82, 0x7F, 0x7F, 0x06, 0x86, 0x7F, 0x7F, 0x0A, 0x8A, 0x7F, 0x7F, 0x0E, 0x8E, 0x7F, 0x7F,
    0x12, 0x92, 0x7F, 0x7F, 0x16, 0x96, 0x7F, 0x7F, 0x1A, 0x9A, 0x7F, 0x7F, 0x1E, 0x9E, 0x7F, 0x7F,
    0x22, 0xA2, 0x7F, 0x7F, 0x26, 0xA6, 0x7F, 0x7F, 0x2A, 0xAA, 0x7F, 0x7F, 0x2E, 0xAE, 0x7F, 0x7F,
    0x32, 0xB2, 0x7F, 0x7F, 0x36, 0xB6, 0x7F, 0x7F, 0x3A, 0xBA, 0x7F, 0x7F, 0x3E, 0xBE, 0x7F, 0x7F,
    0x03, 0x83, 0x7F, 0x7F, 0x07, 0x87, 0x7F, 0x7F, 0x0B, 0x8B, 0x7F, 0x7F, 0x0F, 0x8F, 0x7F, 0x7F,
    0x13, 0x93, 0x7F, 0x7F, 0x17, 0x97, 0x7F, 0x7F, 0x1B, 0x9B, 0x7F, 0x7F, 0x1F, 0x9F, 0x7F, 0x7F,
    0x23, 0xA3, 0x7F, 0x7F, 0x27, 0xA7, 0x7F, 0x7F, 0x2B, 0xAB, 0x7F, 0x7F, 0x2F, 0xAF, 0x7F, 0x7F,
    0x33, 0xB3, 0x7F, 0x7F, 0x37, 0xB7, 0x7F, 0x7F, 0x3B, 0xBB, 0x7F, 0x7F, 0x3F, 0xBF, 0x7F, 0x7F,
    0x40, 0xC0, 0x7F, 0x7F, 0x44, 0xC4, 0x7F, 0x7F, 0x48, 0xC8, 0x7F, 0x7F, 0x4C, 0xCC, 0x7F, 0x7F,
    0x50, 0xD0, 0x7F, 0x7F, 0x54, 0xD4, 0x7F, 0x7F, 0x58, 0xD8, 0x7F, 0x7F, 0x5C, 0xDC, 0x7F, 0x7F,
    0x60, 0xE0, 0x7F, 0x7F, 0x64, 0xE4, 0x7F, 0x7F, 0x68, 0xE8, 0x7F, 0x7F, 0x6C, 0xEC, 0x7F, 0x7F,
    0x70, 0xF0, 0x7F, 0x7F, 0x74, 0xF4, 0x7F, 0x7F, 0x78, 0xF8, 0x7F, 0x7F, 0x7C, 0xFC, 0x7F, 0x7F,
    0x41, 0xC1, 0x7F, 0x7F, 0x45, 0xC5, 0x7F, 0x7F, 0x49, 0xC9, 0x7F, 0x7F, 0x4D, 0xCD, 0x7F, 0x7F,
    0x51, 0xD1, 0x7F, 0x7F, 0x55, 0xD5, 0x7F, 0x7F, 0x59, 0xD9, 0x7F, 0x7F, 0x5D, 0xDD, 0x7F, 0x7F,
    0x61, 0xE1, 0x7F, 0x7F, 0x65, 0xE5, 0x7F, 0x7F, 0x69, 0xE9, 0x7F, 0x7F, 0x6D, 0xED, 0x7F, 0x7F,
    0x71, 0xF1, 0x7F, 0x7F, 0x75, 0xF5, 0x7F, 0x7F, 0x79, 0xF9, 0x7F, 0x7F, 0x7D, 0xFD, 0x7F, 0x7F,
    0x42, 0xC2, 0x7F, 0x7F, 0x46, 0xC6, 0x7F, 0x7F, 0x4A, 0xCA, 0x7F, 0x7F, 0x4E, 0xCE, 0x7F, 0x7F,
    0x52, 0xD2, 0x7F, 0x7F, 0x56, 0xD6, 0x7F, 0x7F, 0x5A, 0xDA, 0x7F, 0x7F, 0x5E, 0xDE, 0x7F, 0x7F,
    0x62, 0xE2, 0x7F, 0x7F, 0x66, 0xE6, 0x7F, 0x7F, 0x6A, 0xEA, 0x7F, 0x7F, 0x6E, 0xEE, 0x7F, 0x7F,
    0x72, 0xF2, 0x7F, 0x7F, 0x76, 0xF6, 0x7F, 0x7F, 0x7A, 0xFA, 0x7F, 0x7F, 0x7E, 0xFE, 0x7F, 0x7F,
    0x43, 0xC3, 0x7F, 0x7F, 0x47, 0xC7, 0x7F, 0x7F, 0x4B, 0xCB, 0x7F, 0x7F, 0x4F, 0xCF, 0x7F, 0x7F,
    0x53, 0xD3, 0x7F, 0x7F, 0x57, 0xD7, 0x7F, 0x7F, 0x5B, 0xDB, 0x7F, 0x7F, 0x5F, 0xDF, 0x7F, 0x7F,
    0x63, 0xE3, 0x7F, 0x7F, 0x67, 0xE7, 0x7F, 0x7F, 0x6B, 0xEB, 0x7F, 0x7F, 0x6F, 0xEF, 0x7F, 0x7F,
    0x73, 0xF3, 0x7F, 0x7F, 0x77, 0xF7, 0x7F, 0x7F, 0x7B, 0xFB, 0x7F, 0x7F, 0x7F, 0xFF, 0x7F, 0x7F,
};

TEST(AiterShuffleScale, WorkedExampleGateUpPairsGateAndUpRowsAndPadsWithOne) {
  const OwnedTensor s = tagged_scale(64, 4);
  EXPECT_EQ(pack_all(AiterShuffleScaleLayout(AiterScaleShuffle::guinterleave_gate_up), s), kGateUpN64G4);

  // Without gate_up, block 0 pairs rows 0-15 with 16-31 instead (byte 1 = S(16,0) = 0x40).
  const std::vector<uint8_t> plain = pack_all(AiterShuffleScaleLayout(AiterScaleShuffle::guinterleave), s);
  EXPECT_EQ(plain[1], 0x40);
  EXPECT_EQ(plain[2], 0x7F);
  // e8m0_shuffle pads the same columns with zero (vLLM: uninitialised memory).
  const std::vector<uint8_t> e8m0 = pack_all(AiterShuffleScaleLayout(AiterScaleShuffle::e8m0_param3d), s);
  EXPECT_EQ(e8m0[1], 0x40);
  EXPECT_EQ(e8m0[2], 0x00);
  EXPECT_EQ(e8m0[3], 0x00);
}


// The torch program on the flattened [E*N, G] tensor vLLM passes equals the per-expert slabs
// concatenated. is_guinterleave: pad G with 0x7F, view [E, (2,) N1, (2,) 16, G8/8, 2, 4].
// e8m0_shuffle: pad to [round_up(E*N, 256), G8] (padding taken as zero here), view
// [M/32, 2, 16, G8/8, 2, 4], permute (0,3,5,2,4,1); compared where E*N % 256 == 0.
TEST(AiterShuffleScale, PerExpertSlabsEqualTorchOpsOnTheWholeParameter) {
  const std::vector<std::pair<uint64_t, std::vector<uint64_t>>> cases = {
      {8, {32, 8}}, {8, {32, 5}}, {2, {128, 12}}, {1, {256, 90}}, {3, {256, 17}}, {4, {96, 3}}, {3, {160, 9}}};
  uint64_t seed = 200;
  for (AiterScaleShuffle v : kVariants) {
    AiterShuffleScaleLayout layout(v);
    for (const auto& [experts, shape] : cases) {
      const uint64_t n = shape[0], g = shape[1], g8 = (g + 7) / 8 * 8, m = experts * n;
      if (!is_guinterleave(v) && m % 256 != 0) continue;
      SCOPED_TRACE(layout.name() + " E=" + std::to_string(experts) + " " + shape_string(shape));
      const OwnedTensor all = random_tensor(DType::U8, {m, g}, seed++);
      std::vector<uint8_t> padded(m * g8, is_guinterleave(v) ? uint8_t{0x7F} : uint8_t{0});
      for (uint64_t r = 0; r < m; ++r)
        for (uint64_t c = 0; c < g; ++c) padded[r * g8 + c] = all.bytes[r * g + c];
      std::vector<uint8_t> expected;
      switch (v) {
        case AiterScaleShuffle::guinterleave:
          expected = testing::permute_contiguous(padded, {experts, n / 32, 2, 16, g8 / 8, 2, 4}, {0, 1, 4, 6, 3, 5, 2});
          break;
        case AiterScaleShuffle::guinterleave_gate_up:
          expected = testing::permute_contiguous(padded, {experts, 2, n / 32, 16, g8 / 8, 2, 4}, {0, 2, 4, 6, 3, 5, 1});
          break;
        case AiterScaleShuffle::e8m0_param2d:
        case AiterScaleShuffle::e8m0_param3d:
          expected = testing::permute_contiguous(padded, {m / 32, 2, 16, g8 / 8, 2, 4}, {0, 3, 5, 2, 4, 1});
          break;
      }
      std::vector<uint8_t> slabs;
      for (uint64_t e = 0; e < experts; ++e) {
        OwnedTensor one(DType::U8, shape);
        std::copy(all.bytes.begin() + static_cast<std::ptrdiff_t>(e * n * g),
                  all.bytes.begin() + static_cast<std::ptrdiff_t>((e + 1) * n * g), one.bytes.begin());
        const std::vector<uint8_t> slab = pack_all(layout, one);
        slabs.insert(slabs.end(), slab.begin(), slab.end());
      }
      EXPECT_EQ(slabs, expected);
      EXPECT_EQ(byte_size(DType::U8, layout.parameter_shape(experts, shape)), expected.size());
    }
  }
}

TEST(AiterShuffleScale, BothBranchesOfShuffleScaleOrderBytesAlike) {
  // Where neither pads (G % 8 == 0), shuffle_scale(is_guinterleave=False) = e8m0_shuffle and
  // shuffle_scale(is_guinterleave=True, gate_up=False) give the same bytes.
  for (const std::vector<uint64_t>& shape : {std::vector<uint64_t>{32, 8}, {96, 16}, {288, 96}}) {
    const OwnedTensor s = random_tensor(DType::U8, shape, 300 + shape[0]);
    EXPECT_EQ(pack_all(AiterShuffleScaleLayout(AiterScaleShuffle::e8m0_param3d), s),
              pack_all(AiterShuffleScaleLayout(AiterScaleShuffle::guinterleave), s));
  }
}


TEST(AiterShuffleScale, RefusesRowsOutsideWhole32RowBlocks) {
  for (AiterScaleShuffle v : kVariants) {
    AiterShuffleScaleLayout layout(v);
    for (uint64_t rows : {1u, 16u, 31u, 48u, 100u}) testing::expect_refused(layout, DType::U8, {rows, 8});
    testing::expect_refused(layout, DType::U8, {2, 32, 8});
    testing::expect_refused(layout, DType::U8, {32});
    testing::expect_refused(layout, DType::U8, {32, 0});
    testing::expect_dtype_refused(layout, DType::BF16, {32, 8});
  }
}

TEST(E8m0View, RetagsBytesAsE8m0) {
  const E8m0ViewLayout view;
  EXPECT_EQ(view.name(), "torch.view(float8_e8m0fnu)");
  EXPECT_EQ(view.packed_dtype(DType::U8), DType::F8_E8M0);
  const std::vector<uint64_t> shape{96, 12};
  EXPECT_EQ(view.packed_shape(shape), shape);
  const OwnedTensor s = random_tensor(DType::U8, shape, 500);
  EXPECT_EQ(pack_all(view, s), s.bytes);
  testing::expect_round_trip(view, DType::U8, shape, 501);
  testing::expect_dtype_refused(view, DType::BF16, shape);
}

TEST(E8m0View, SituScalePipelinesKeepTheBytesAndReportE8m0) {
  // Generic AITER_MXFP4_BF16 with SITU: scales are viewed as float8_e8m0fnu, then shuffled.
  for (const char* shuffle : {"aiter.shuffle_scale(is_guinterleave=1,gate_up=0,v0.1.19)",
                              "aiter.shuffle_scale(is_guinterleave=1,gate_up=1,v0.1.19)",
                              "aiter.e8m0_shuffle(param=2d,v0.1.19)"}) {
    const std::string id = std::string("torch.view(float8_e8m0fnu) | ") + shuffle;
    SCOPED_TRACE(id);
    const std::unique_ptr<Layout> pipeline = make_layout(id);
    const std::unique_ptr<Layout> alone = make_layout(shuffle);
    EXPECT_EQ(pipeline->packed_dtype(DType::U8), DType::F8_E8M0);
    const std::vector<uint64_t> shape{256, 12};
    EXPECT_EQ(pipeline->parameter_shape(3, shape), (std::vector<uint64_t>{768, 16}));
    const OwnedTensor s = random_tensor(DType::U8, shape, 502);
    EXPECT_EQ(pack_all(*pipeline, s), pack_all(*alone, s));
    testing::expect_round_trip(*pipeline, DType::U8, shape, 503);
  }
}

}  // namespace
}  // namespace moepack::packers
