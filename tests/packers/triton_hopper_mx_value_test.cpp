// HopperMXValueLayout (triton_kernels v3.5.1): worked examples, the twiddle against the
// upstream shift formulation, the bulk pack against a torch-op emulation of swizzle_data.
// (Bulk pack against the bit-level index map and round trips: layout_contract_test.cpp.)
#include "packers/triton_hopper_mx_value.h"

#include <gtest/gtest.h>

#include "tests/packers/triton_reference_ops.h"

namespace moepack::packers {
namespace {

using testing::pack_all;
using testing::random_tensor;

// The upstream bit twiddle in its own formulation (compress the first three nibbles with a
// shared pattern shifted right by 0/3/6, the fourth with its own pattern), per 16-bit lane.
uint32_t upstream_style_twiddle(const uint8_t* g) {
  auto compress = [](uint32_t x) { return ((x & 0x8) << 12) | ((x & 0x7) << 6); };
  auto compress_fourth = [](uint32_t x) { return ((x & 0x8) << 11) | ((x & 0x6) << 9) | ((x & 0x1) << 13); };
  auto both = [](auto f, uint8_t byte) { return f(byte & 0xFu) | (f(static_cast<uint32_t>(byte >> 4)) << 16); };
  return both(compress, g[0]) | (both(compress, g[1]) >> 3) | (both(compress, g[2]) >> 6) | both(compress_fourth, g[3]);
}

std::vector<uint8_t> twiddle_all(std::vector<uint8_t> bytes) {
  for (size_t i = 0; i < bytes.size(); i += 4) {
    const uint32_t w = upstream_style_twiddle(&bytes[i]);
    for (int j = 0; j < 4; ++j) bytes[i + j] = static_cast<uint8_t>(w >> (8 * j));
  }
  return bytes;
}

TEST(TritonHopperMXValue, NameAndShapes) {
  TritonHopperMXValueLayout layout;
  EXPECT_EQ(layout.name(), "triton_kernels.HopperMXValue(mx_axis=1,v3.5.1)");
  const std::vector<uint64_t> gpt_oss_w13{5760, 1440}, gpt_oss_w2{2880, 1440}, tiny{2, 32}, odd{17, 33};
  EXPECT_EQ(layout.packed_shape(gpt_oss_w13), (std::vector<uint64_t>{1440, 5760}));
  EXPECT_EQ(layout.packed_shape(gpt_oss_w2), (std::vector<uint64_t>{720, 5760}));
  EXPECT_EQ(layout.packed_shape(tiny), (std::vector<uint64_t>{4, 128}));
  EXPECT_EQ(layout.packed_shape(odd), (std::vector<uint64_t>{8, 256}));  // Np = 32, Kbp = 64
  EXPECT_EQ(layout.parameter_shape(32, gpt_oss_w13), (std::vector<uint64_t>{32, 1440, 5760}));
}

TEST(TritonHopperMXValue, TwiddleWorkedExample) {
  // layouts-fp4.md 3.2: bytes 21 43 65 87 -> word 0x40A62C5D, stored 5D 2C A6 40.
  EXPECT_EQ(TritonHopperMXValueLayout::twiddle({0x21, 0x43, 0x65, 0x87}), 0x40A62C5Du);
}

TEST(TritonHopperMXValue, TwiddleMatchesUpstreamFormulationForEveryLane) {
  // Every combination of four nibbles in the low lane, with a different pattern in the high lane.
  for (uint32_t v = 0; v < (1u << 16); ++v) {
    uint8_t g[4];
    for (int i = 0; i < 4; ++i) g[i] = static_cast<uint8_t>(((v >> (4 * i)) & 0xF) | ((((v * 7) >> (4 * i)) & 0xF) << 4));
    const uint32_t word = TritonHopperMXValueLayout::twiddle({g[0], g[1], g[2], g[3]});
    ASSERT_EQ(word, upstream_style_twiddle(g)) << "v=" << v;
  }
}

TEST(TritonHopperMXValue, WorkedExampleTwoRowsK64) {
  // E=1, N=2, K=64 (Kb=32): storage [4][128]; only row 0 carries data.
  OwnedTensor q(DType::U8, {2, 32});
  q.bytes[0 * 32 + 0] = 0x21;  // (n=0, b=0) -> group at col 0, slot 0
  q.bytes[0 * 32 + 4] = 0x65;  // (n=0, b=4) -> same group, slot 2 (w1 = 1)
  q.bytes[1 * 32 + 1] = 0x87;  // (n=1, b=1) -> col 64*s0 + 16*t1 = 80, slot 0
  const std::vector<uint8_t> packed = pack_all(TritonHopperMXValueLayout{}, q);
  ASSERT_EQ(packed.size(), 4u * 128u);
  std::vector<uint8_t> expected(packed.size(), 0);
  // Group (21 00 65 00): low lane x0=1 -> 0x0040, x2=5 -> 0x0005; high lane x0=2 -> 0x0080, x2=6 -> 0x0006.
  expected[0] = 0x45, expected[1] = 0x00, expected[2] = 0x86, expected[3] = 0x00;
  // Group (87 00 00 00): low lane x0=7 -> 0x01C0; high lane x0=8 (sign only) -> 0x8000.
  expected[80] = 0xC0, expected[81] = 0x01, expected[82] = 0x00, expected[83] = 0x80;
  EXPECT_EQ(packed, expected);
}

TEST(TritonHopperMXValue, PretwiddleMapOfTheWorkedExample) {
  // Row 0: column 16*t1 + 4*kt + 2*w1 holds (n=0, b = 8*kt + 4*w1 + t1); columns 64.. hold n=1.
  const std::vector<uint64_t> shape{2, 32};
  for (uint64_t b = 0; b < 32; ++b) {
    const uint64_t kt = b / 8 % 4, w1 = b / 4 % 2, t1 = b % 4;
    EXPECT_EQ(TritonHopperMXValueLayout::pretwiddle_offset(shape, 0, b), 16 * t1 + 4 * kt + 2 * w1);
    EXPECT_EQ(TritonHopperMXValueLayout::pretwiddle_offset(shape, 1, b), 64 + 16 * t1 + 4 * kt + 2 * w1);
  }
  EXPECT_EQ(TritonHopperMXValueLayout::pretwiddle_offset(shape, 8, 0), 1u);  // "pad" slot = row n+8
}

// Sizes for the torch-op emulation: tails of the 16-row and 32-byte tiles.
const std::vector<std::vector<uint64_t>> kAwkwardShapes = {
    {1, 1}, {1, 2}, {2, 3}, {3, 17}, {16, 32}, {17, 33}, {33, 17}, {127, 129}, {129, 127}, {48, 96}, {130, 64},
};

TEST(TritonHopperMXValue, BulkPackEqualsTorchOpEmulation) {
  // swizzle_data with mma_version 3: pad M to 16 and K to 32, view as
  // [M/16, 1, 2, 4, 2, 1, K/32, 4, 2, 4, 1, 1], permute [0,3,6,10,4,9,7,1,8,2,5,11], then _pack_bits.
  TritonHopperMXValueLayout layout;
  uint64_t seed = 100;
  for (const auto& shape : kAwkwardShapes) {
    SCOPED_TRACE(shape_string(shape));
    const OwnedTensor q = random_tensor(DType::U8, shape, seed++);
    const uint64_t np = (shape[0] + 15) / 16 * 16, kbp = (shape[1] + 31) / 32 * 32;
    const std::vector<uint8_t> padded = testing::pad_matrix(q.bytes, shape[0], shape[1], np, kbp);
    const std::vector<uint8_t> swizzled = testing::permute_contiguous(
        padded, {np / 16, 1, 2, 4, 2, 1, kbp / 32, 4, 2, 4, 1, 1}, {0, 3, 6, 10, 4, 9, 7, 1, 8, 2, 5, 11});
    EXPECT_EQ(pack_all(layout, q), twiddle_all(swizzled));
  }
}

// Every bulk path (AVX-512 VBMI and AVX2 where this CPU has them, and the portable tables)
// against the index map, on sizes with partial tiles in both axes and a garbage-filled output buffer (the
// bulk paths must write every byte, padding included).
TEST(TritonHopperMXValue, BothBulkPathsEqualTheIndexMap) {
  TritonHopperMXValueLayout layout;
  uint64_t seed = 300;
  std::vector<std::vector<uint64_t>> shapes = kAwkwardShapes;
  shapes.push_back({40, 1440 / 8});  // gpt-oss rows of 1440 bytes, cut short: full tiles and a tail row block
  shapes.push_back({8, 31});
  shapes.push_back({9, 64});
  for (const auto& shape : shapes) {
    SCOPED_TRACE(shape_string(shape));
    const OwnedTensor q = random_tensor(DType::U8, shape, seed++);
    const std::vector<uint64_t> packed_shape = layout.packed_shape(shape);
    const size_t size = static_cast<size_t>(packed_shape[0] * packed_shape[1]);
    std::vector<uint8_t> by_map(size, 0x5A), bulk(size, 0xA5), portable(size, 0xC3);
    layout.pack_by_map(q.view(), by_map);
    layout.pack(q.view(), bulk);
    layout.pack_portable(q.view(), portable);
    EXPECT_EQ(bulk, by_map) << (TritonHopperMXValueLayout::simd_available() ? "SIMD path" : "portable path");
    EXPECT_EQ(portable, by_map);
    if (TritonHopperMXValueLayout::avx2_available()) {
      std::vector<uint8_t> avx2(size, 0x3C);
      layout.pack_avx2(q.view(), avx2);
      EXPECT_EQ(avx2, by_map) << "AVX2 path";
    }
  }
}

TEST(TritonHopperMXValue, RefusesWhatIsNotOneExpertsByteMatrix) {
  TritonHopperMXValueLayout layout;
  testing::expect_refused(layout, DType::U8, {4});
  testing::expect_refused(layout, DType::U8, {2, 4, 4});
  testing::expect_refused(layout, DType::U8, {0, 4});
  testing::expect_dtype_refused(layout, DType::BF16, {4, 4});
}

}  // namespace
}  // namespace moepack::packers
