// AITER shuffle_weight (layout 16x16; plain, is_guinterleave, is_guinterleave + gate_up):
// worked examples re-derived from the torch ops, pack against a torch-op emulation of the whole
// [E, N, C] tensor, refusals. (Bulk pack against the index map and round trips:
// layout_contract_test.cpp.)
#include "packers/aiter_shuffle_weight.h"

#include <gtest/gtest.h>

#include <cstring>
#include <utility>

#include "tests/packers/triton_reference_ops.h"

namespace moepack::packers {
namespace {

using testing::pack_all;
using testing::random_tensor;

constexpr AiterWeightShuffle kVariants[] = {AiterWeightShuffle::plain, AiterWeightShuffle::guinterleave,
                                            AiterWeightShuffle::guinterleave_gate_up};

// Sizes for the torch-op emulation, per variant: rows an odd multiple of the row unit, bytes an
// odd multiple of the byte unit, plus one realistic gpt-oss-on-ROCm shape (I = H = 3072 padded).
std::vector<std::vector<uint64_t>> awkward_shapes(AiterWeightShuffle v) {
  switch (v) {
    case AiterWeightShuffle::plain: return {{16, 32}, {48, 96}, {208, 160}, {272, 32}, {16, 1056}};
    case AiterWeightShuffle::guinterleave: return {{16, 64}, {48, 192}, {208, 320}, {272, 64}, {3072, 1536}};
    case AiterWeightShuffle::guinterleave_gate_up: return {{32, 64}, {96, 192}, {160, 320}, {544, 64}, {6144, 1536}};
  }
  return {};
}

// Expected packed bytes when the packed storage is a sequence of 16-row x 16-byte tiles, given
// as (first canonical row, 16-byte chunk) per tile in packed order.
std::vector<uint8_t> from_tiles(const OwnedTensor& canonical, const std::vector<std::pair<uint64_t, uint64_t>>& tiles) {
  const uint64_t cols = canonical.shape[1];
  std::vector<uint8_t> out;
  for (const auto& [row0, chunk] : tiles)
    for (uint64_t lane = 0; lane < 16; ++lane)
      for (uint64_t b = 0; b < 16; ++b) out.push_back(canonical.bytes[(row0 + lane) * cols + 16 * chunk + b]);
  return out;
}

TEST(AiterShuffleWeight, Names) {
  EXPECT_EQ(AiterShuffleWeightLayout(AiterWeightShuffle::plain).name(), "aiter.shuffle_weight(layout=16x16,v0.1.19)");
  EXPECT_EQ(AiterShuffleWeightLayout(AiterWeightShuffle::guinterleave).name(),
            "aiter.shuffle_weight(layout=16x16,is_guinterleave=1,gate_up=0,v0.1.19)");
  EXPECT_EQ(AiterShuffleWeightLayout(AiterWeightShuffle::guinterleave_gate_up).name(),
            "aiter.shuffle_weight(layout=16x16,is_guinterleave=1,gate_up=1,v0.1.19)");
}

TEST(AiterShuffleWeight, ShapeAndDtypeAreKept) {
  for (AiterWeightShuffle v : kVariants) {
    AiterShuffleWeightLayout layout(v);
    const std::vector<uint64_t> gpt_oss_w13{6144, 1536};
    EXPECT_EQ(layout.packed_shape(gpt_oss_w13), gpt_oss_w13);
    EXPECT_EQ(layout.packed_dtype(DType::U8), DType::U8);
    EXPECT_EQ(layout.packed_dtype(DType::F8_E4M3), DType::F8_E4M3);
    EXPECT_EQ(layout.parameter_shape(32, gpt_oss_w13), (std::vector<uint64_t>{32, 6144, 1536}));
  }
}

// Tile orders from a throwaway re-run of aiter/ops/shuffle.py's view/permute on plain lists
// (canonical byte (n, kb) tagged n*C + kb, each 16-byte packed run read back as a tile).
TEST(AiterShuffleWeight, WorkedExampleGateUpAlternatesGateAndUpBlocks) {
  // N = 64 (I = 32: gate rows 0-31, up rows 32-63), C = 64 bytes: 16 tiles.
  const OwnedTensor w = random_tensor(DType::U8, {64, 64}, 1);
  const std::vector<std::pair<uint64_t, uint64_t>> tiles = {
      {0, 0},  {0, 1},  {0, 2},  {0, 3},  {32, 0}, {32, 1}, {32, 2}, {32, 3},
      {16, 0}, {16, 1}, {16, 2}, {16, 3}, {48, 0}, {48, 1}, {48, 2}, {48, 3}};
  EXPECT_EQ(pack_all(AiterShuffleWeightLayout(AiterWeightShuffle::guinterleave_gate_up), w), from_tiles(w, tiles));
}

TEST(AiterShuffleWeight, WorkedExampleWithoutGateUpKeepsBlockOrder) {
  const OwnedTensor w = random_tensor(DType::U8, {64, 64}, 2);
  const std::vector<std::pair<uint64_t, uint64_t>> tiles = {
      {0, 0},  {0, 1},  {0, 2},  {0, 3},  {16, 0}, {16, 1}, {16, 2}, {16, 3},
      {32, 0}, {32, 1}, {32, 2}, {32, 3}, {48, 0}, {48, 1}, {48, 2}, {48, 3}};
  EXPECT_EQ(pack_all(AiterShuffleWeightLayout(AiterWeightShuffle::guinterleave), w), from_tiles(w, tiles));
  // The plain branch on the smallest tensor it takes: [32, 32] -> 4 tiles.
  const OwnedTensor small = random_tensor(DType::U8, {32, 32}, 3);
  EXPECT_EQ(pack_all(AiterShuffleWeightLayout(AiterWeightShuffle::plain), small),
            from_tiles(small, {{0, 0}, {0, 1}, {16, 0}, {16, 1}}));
}

TEST(AiterShuffleWeight, WorkedExampleFirstBytes) {
  // gate_up, N = 32 (gate rows 0-15, up rows 16-31), C = 64, byte (n, kb) = 3*n + kb: packed
  // byte 16 is row 1 byte 0, byte 256 row 0 byte 16, byte 1024 the first up tile's row 16.
  OwnedTensor w(DType::U8, {32, 64});
  for (uint64_t n = 0; n < 32; ++n)
    for (uint64_t kb = 0; kb < 64; ++kb) w.bytes[n * 64 + kb] = static_cast<uint8_t>(3 * n + kb);
  const std::vector<uint8_t> p = pack_all(AiterShuffleWeightLayout(AiterWeightShuffle::guinterleave_gate_up), w);
  EXPECT_EQ(p[0], 0);
  EXPECT_EQ(p[15], 15);
  EXPECT_EQ(p[16], 3);      // row 1, byte 0
  EXPECT_EQ(p[255], 60);    // row 15, byte 15
  EXPECT_EQ(p[256], 16);    // row 0, byte 16
  EXPECT_EQ(p[1024], 48);   // first up tile: row 16, byte 0
  EXPECT_EQ(p[2047], 156);  // last byte: row 31, byte 63 (3*31 + 63)
}

TEST(AiterShuffleWeight, PerExpertSlabsEqualTorchOpsOnTheWholeParameter) {
  uint64_t seed = 40;
  for (AiterWeightShuffle v : kVariants) {
    AiterShuffleWeightLayout layout(v);
    for (const auto& shape : awkward_shapes(v)) {
      if (shape[0] * shape[1] > (1u << 20)) continue;  // keep the emulation quick
      for (uint64_t experts : {1u, 3u}) {
        SCOPED_TRACE(layout.name() + " E=" + std::to_string(experts) + " " + shape_string(shape));
        const uint64_t n = shape[0], c = shape[1];
        const OwnedTensor all = random_tensor(DType::U8, {experts, n, c}, seed++);
        std::vector<uint64_t> sizes;
        std::vector<int> perm;
        switch (v) {
          case AiterWeightShuffle::plain: sizes = {experts, n / 16, 16, c / 32, 2, 16}, perm = {0, 1, 3, 4, 2, 5}; break;
          case AiterWeightShuffle::guinterleave: sizes = {experts, n / 16, 16, c / 64, 4, 16}, perm = {0, 1, 3, 4, 2, 5}; break;
          case AiterWeightShuffle::guinterleave_gate_up:
            sizes = {experts, 2, n / 32, 16, c / 64, 4, 16}, perm = {0, 2, 1, 4, 5, 3, 6};
            break;
        }
        const std::vector<uint8_t> expected = testing::permute_contiguous(all.bytes, sizes, perm);
        std::vector<uint8_t> slabs;
        for (uint64_t e = 0; e < experts; ++e) {
          OwnedTensor one(DType::U8, {n, c});
          std::copy(all.bytes.begin() + static_cast<std::ptrdiff_t>(e * n * c),
                    all.bytes.begin() + static_cast<std::ptrdiff_t>((e + 1) * n * c), one.bytes.begin());
          const std::vector<uint8_t> slab = pack_all(layout, one);
          slabs.insert(slabs.end(), slab.begin(), slab.end());
        }
        EXPECT_EQ(slabs, expected);
      }
    }
  }
}

// The plain form on the FP8 and 16-bit weights of the FP8 and unquantized AITER backends:
// shuffle_weight views [E, N/16, 16, C/32, 32/K, K] with K = 16 / element_size and permutes
// (0, 1, 3, 4, 2, 5); emulated here on whole elements of a 3-expert parameter.
TEST(AiterShuffleWeight, PlainOnWiderElementsEqualsTorchOpsOnElements) {
  const AiterShuffleWeightLayout layout(AiterWeightShuffle::plain);
  uint64_t seed = 70;
  for (DType dtype : {DType::F8_E4M3, DType::BF16, DType::F16, DType::F32}) {
    const uint64_t width = static_cast<uint64_t>(dtype_bits(dtype)) / 8, k = 16 / width;
    for (const std::vector<uint64_t>& shape : std::vector<std::vector<uint64_t>>{{16, 32}, {48, 96}, {208, 160}}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + shape_string(shape));
      const uint64_t experts = 3, n = shape[0], c = shape[1];
      const OwnedTensor all = random_tensor(dtype, {experts, n, c}, seed++);
      // Element e -> its byte run: permute element indices, then gather whole elements.
      std::vector<uint8_t> index_bytes(experts * n * c * 4);
      for (uint64_t i = 0; i < experts * n * c; ++i) std::memcpy(&index_bytes[i * 4], &i, 4);
      std::vector<uint64_t> sizes = {experts, n / 16, 16, c / 32, 32 / k, k * 4};
      const std::vector<uint8_t> permuted = testing::permute_contiguous(index_bytes, sizes, {0, 1, 3, 4, 2, 5});
      std::vector<uint8_t> expected;
      for (uint64_t i = 0; i < experts * n * c; ++i) {
        uint32_t from = 0;
        std::memcpy(&from, &permuted[i * 4], 4);
        expected.insert(expected.end(), all.bytes.begin() + static_cast<std::ptrdiff_t>(from * width),
                        all.bytes.begin() + static_cast<std::ptrdiff_t>((from + 1) * width));
      }
      std::vector<uint8_t> slabs;
      for (uint64_t e = 0; e < experts; ++e) {
        OwnedTensor one(dtype, {n, c});
        std::copy(all.bytes.begin() + static_cast<std::ptrdiff_t>(e * n * c * width),
                  all.bytes.begin() + static_cast<std::ptrdiff_t>((e + 1) * n * c * width), one.bytes.begin());
        const std::vector<uint8_t> slab = pack_all(layout, one);
        slabs.insert(slabs.end(), slab.begin(), slab.end());
      }
      EXPECT_EQ(slabs, expected);
    }
    // K % 32 elements, whatever the width.
    testing::expect_refused(layout, dtype, {16, 16});
    testing::expect_refused(layout, dtype, {16, 48});
  }
}

TEST(AiterShuffleWeight, PlainAndGuinterleaveWithoutGateUpAgreeWhereBothApply) {
  const OwnedTensor w = random_tensor(DType::U8, {48, 192}, 60);
  EXPECT_EQ(pack_all(AiterShuffleWeightLayout(AiterWeightShuffle::plain), w),
            pack_all(AiterShuffleWeightLayout(AiterWeightShuffle::guinterleave), w));
}

TEST(AiterShuffleWeight, RefusesSizesTorchCannotView) {
  const AiterShuffleWeightLayout plain(AiterWeightShuffle::plain), gu(AiterWeightShuffle::guinterleave),
      gate_up(AiterWeightShuffle::guinterleave_gate_up);
  // Rows not in whole 16-row tiles.
  for (uint64_t rows : {1u, 8u, 17u, 33u}) {
    testing::expect_refused(plain, DType::U8, {rows, 32});
    testing::expect_refused(gu, DType::U8, {rows, 64});
  }
  // gate_up needs both halves in whole tiles: 16 and 48 rows are refused, 32 and 96 accepted.
  testing::expect_refused(gate_up, DType::U8, {16, 64});
  testing::expect_refused(gate_up, DType::U8, {48, 64});
  // Bytes per row: plain takes multiples of 32, the is_guinterleave forms multiples of 64.
  testing::expect_refused(plain, DType::U8, {16, 16});
  testing::expect_refused(plain, DType::U8, {16, 48});
  testing::expect_refused(gu, DType::U8, {16, 32});
  testing::expect_refused(gu, DType::U8, {16, 96});
  testing::expect_refused(gate_up, DType::U8, {32, 1440});  // gpt-oss H = 2880 unpadded
  // Not one expert's 2-D byte matrix.
  testing::expect_refused(gu, DType::U8, {2, 16, 64});
  testing::expect_refused(gu, DType::U8, {16});
  testing::expect_refused(gu, DType::U8, {0, 64});
  testing::expect_dtype_refused(gu, DType::BF16, {16, 64});
}

}  // namespace
}  // namespace moepack::packers
