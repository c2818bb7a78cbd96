// FlashInfer CUTLASS MXFP4 layouts: gate/up row orders pinned, hand-derived bytes of the SM90
// FP4 weight interleave (the bulk path runs the kernel's own loop), SM90 scale interleave, bf16
// bias, refusals. (The bulk paths against the per-value index maps, and round trips:
// layout_contract_test.cpp.)
#include <gtest/gtest.h>

#include "packers/flashinfer_cutlass_mxfp4.h"
#include "tests/packers/flashinfer_test_support.h"

namespace moepack::packers {
namespace {


using namespace fi_test;

TEST(FlashinferCutlassMxfp4, GateUpRowOrdersPinned) {
  // [g0,u0,g1,u1,g2,u2,g3,u3] -> [u0..u3; g0..g3];  [w1 (0..3); w3 (4..7)] -> [w3; w1].
  const std::vector<uint64_t> deinterleave = {1, 3, 5, 7, 0, 2, 4, 6};
  const std::vector<uint64_t> halves = {4, 5, 6, 7, 0, 1, 2, 3};
  for (uint64_t r = 0; r < 8; ++r) {
    EXPECT_EQ(row_order_source(RowOrder::deinterleave_up_first, r, 8), deinterleave[r]);
    EXPECT_EQ(row_order_source(RowOrder::swap_halves, r, 8), halves[r]);
  }
}

// Worked by hand from interleave_fp4_weights_for_sm90_mixed_gemm_kernel: lane 1 of row pair
// (0, 8) in the first 32-byte run writes packed row 0, bytes 4 and 5; lane 9 writes row 8 there.
TEST(FlashinferCutlassMxfp4, Sm90WeightPinnedBytes) {
  const FlashinferCutlassMxfp4Layout layout(FiCutlassTensor::weight_sm90, RowOrder::identity);
  OwnedTensor canonical(DType::U8, {16, 32});  // N = 16, K = 64
  canonical.bytes[0 * 32 + 1] = 0x21;          // a: row 0, lane 1
  canonical.bytes[8 * 32 + 1] = 0x43;          // b: row 8, lane 1
  canonical.bytes[0 * 32 + 9] = 0x65;          // a: row 0, lane 9
  canonical.bytes[8 * 32 + 9] = 0x87;          // b: row 8, lane 9
  const std::vector<uint8_t> packed = pack(layout, canonical);
  EXPECT_EQ(packed[0 * 32 + 4], 0x31);  // a.lo | b.lo << 4
  EXPECT_EQ(packed[0 * 32 + 5], 0x42);  // a.hi | b.hi << 4
  EXPECT_EQ(packed[8 * 32 + 4], 0x75);
  EXPECT_EQ(packed[8 * 32 + 5], 0x86);
  uint64_t nonzero = 0;
  for (uint8_t b : packed) nonzero += b != 0;
  EXPECT_EQ(nonzero, 4u);
}

TEST(FlashinferCutlassMxfp4, Sm90ScalesInterleavedByFour) {
  const FlashinferCutlassMxfp4Layout layout(FiCutlassTensor::scale_sm90, RowOrder::identity);
  OwnedTensor canonical(DType::U8, {2, 8});
  for (uint64_t i = 0; i < 16; ++i) canonical.bytes[i] = static_cast<uint8_t>(i);  // s(n, c) = 8n + c
  EXPECT_EQ(layout.packed_shape(canonical.shape), (std::vector<uint64_t>{2, 8}));
  const std::vector<uint8_t> expected = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15};
  EXPECT_EQ(pack(layout, canonical), expected);
  const FlashinferCutlassMxfp4Layout w13(FiCutlassTensor::scale_sm90, RowOrder::deinterleave_up_first);
  EXPECT_EQ(w13.packed_shape(std::vector<uint64_t>{10, 12}), (std::vector<uint64_t>{3, 40}));
}

TEST(FlashinferCutlassMxfp4, BiasReorderedAndCastToBf16) {
  const FlashinferCutlassMxfp4Layout layout(FiCutlassTensor::bias_bf16, RowOrder::deinterleave_up_first);
  OwnedTensor canonical(DType::F32, {4});
  const float values[4] = {1.0f + 1.0f / 256, -2.5f, 3.0f, 1.0f + 3.0f / 256};  // g0 u0 g1 u1
  std::memcpy(canonical.bytes.data(), values, sizeof values);
  EXPECT_EQ(layout.packed_dtype(DType::F32), DType::BF16);
  const std::vector<uint8_t> packed = pack(layout, canonical);
  auto at = [&](uint64_t i) {
    uint16_t h;
    std::memcpy(&h, packed.data() + 2 * i, 2);
    return bf16_to_float(h);
  };
  EXPECT_EQ(at(0), -2.5f);                  // u0
  EXPECT_EQ(at(1), 1.0f + 1.0f / 64);       // u1: 1 + 3/256 is a tie, rounds to even (up)
  EXPECT_EQ(at(2), 1.0f);                   // g0: 1 + 1/256 is a tie, rounds to even
  EXPECT_EQ(at(3), 3.0f);                   // g1
  expect_round_trip(layout, random_bf16_bias(64, 4));
}

TEST(FlashinferCutlassMxfp4, RefusesShapesUpstreamCannotTake) {
  expect_refused(FlashinferCutlassMxfp4Layout(FiCutlassTensor::weight_sm90, RowOrder::identity), DType::U8, {24, 32});
  expect_refused(FlashinferCutlassMxfp4Layout(FiCutlassTensor::weight_sm90, RowOrder::identity), DType::U8, {16, 48});
  expect_refused(FlashinferCutlassMxfp4Layout(FiCutlassTensor::scale_sm90, RowOrder::identity), DType::U8, {16, 6});
  expect_refused(FlashinferCutlassMxfp4Layout(FiCutlassTensor::scale_128x4, RowOrder::identity), DType::U8, {64, 4});
  expect_refused(FlashinferCutlassMxfp4Layout(FiCutlassTensor::weight, RowOrder::swap_halves), DType::U8, {5, 4});
  expect_refused(FlashinferCutlassMxfp4Layout(FiCutlassTensor::bias_bf16, RowOrder::identity), DType::U8, {4}, false);
}

TEST(FlashinferCutlassMxfp4, Names) {
  EXPECT_EQ(FlashinferCutlassMxfp4Layout(FiCutlassTensor::weight_sm90, RowOrder::deinterleave_up_first).name(),
            "flashinfer.interleave_moe_weights_for_sm90_mixed_gemm(rows=deinterleave_up_first,fp4,v0.6.17)");
  EXPECT_EQ(FlashinferCutlassMxfp4Layout(FiCutlassTensor::scale_128x4, RowOrder::swap_halves).name(),
            "flashinfer.block_scale_interleave(rows=swap_halves,sf=128x4,v0.6.17)");
}

}  // namespace
}  // namespace moepack::packers
