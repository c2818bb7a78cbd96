// BlackwellMXValueLayout and BlackwellMXScaleLayout (triton_kernels v3.5.1): worked examples,
// bulk pack against the index map and against a torch-op emulation, round trips, refusals.
#include "packers/triton_blackwell_mx.h"

#include <gtest/gtest.h>

#include "tests/packers/triton_reference_ops.h"

namespace moepack::packers {
namespace {

using testing::pack_all;
using testing::random_tensor;

const std::vector<std::vector<uint64_t>> kAwkwardShapes = {
    {1, 2}, {2, 1}, {2, 3}, {3, 17}, {17, 33}, {33, 127}, {127, 129}, {129, 128}, {128, 8}, {300, 16},
};

TEST(TritonBlackwellMXValue, NameShapesAndWorkedExample) {
  TritonBlackwellMXValueLayout layout;
  EXPECT_EQ(layout.name(), "triton_kernels.BlackwellMXValue(v3.5.1)");
  const std::vector<uint64_t> gpt_oss_w13{5760, 1440}, small{2, 3};
  EXPECT_EQ(layout.packed_shape(gpt_oss_w13), (std::vector<uint64_t>{5760, 1536}));
  EXPECT_EQ(layout.packed_shape(small), (std::vector<uint64_t>{2, 128}));
  OwnedTensor q(DType::U8, {2, 3});
  q.bytes = {1, 2, 3, 4, 5, 6};
  std::vector<uint8_t> expected(256, 0);
  expected[0] = 1, expected[1] = 2, expected[2] = 3, expected[128] = 4, expected[129] = 5, expected[130] = 6;
  EXPECT_EQ(pack_all(layout, q), expected);
}

TEST(TritonBlackwellMXValue, BulkPackEqualsIndexMapAndRoundTrips) {
  TritonBlackwellMXValueLayout layout;
  uint64_t seed = 1;
  for (const auto& shape : kAwkwardShapes) {
    SCOPED_TRACE(shape_string(shape));
    const OwnedTensor q = random_tensor(DType::U8, shape, seed++);
    const std::vector<uint64_t> ps = layout.packed_shape(shape);
    std::vector<uint8_t> expected(ps[0] * ps[1], 0);
    for (uint64_t n = 0; n < shape[0]; ++n)
      for (uint64_t b = 0; b < shape[1]; ++b)
        expected[TritonBlackwellMXValueLayout::packed_offset(shape, n, b)] = q.bytes[n * shape[1] + b];
    EXPECT_EQ(pack_all(layout, q), expected);
    testing::expect_round_trip(layout, DType::U8, shape, seed++);
  }
}

TEST(TritonBlackwellMXValue, RefusesTheStrideTieCase) {
  TritonBlackwellMXValueLayout layout;
  testing::expect_refused(layout, DType::U8, {1, 1});
  testing::expect_refused(layout, DType::U8, {4});
}

TEST(TritonBlackwellMXScale, NameShapesAndWorkedExample) {
  TritonBlackwellMXScaleLayout layout;
  EXPECT_EQ(layout.name(), "triton_kernels.BlackwellMXScale(v3.5.1)");
  const std::vector<uint64_t> gpt_oss_w13{5760, 90}, small{2, 2};
  EXPECT_EQ(layout.packed_shape(gpt_oss_w13), (std::vector<uint64_t>{45, 24, 2, 256}));
  EXPECT_EQ(layout.parameter_shape(32, gpt_oss_w13), (std::vector<uint64_t>{1, 32 * 45, 24, 2, 256}));
  // layouts-fp4.md 3.5: N=2, Ks=2 -> 1024 bytes; (0,0)->0 (0,1)->1 (1,0)->16 (1,1)->17.
  EXPECT_EQ(layout.packed_shape(small), (std::vector<uint64_t>{1, 2, 2, 256}));
  OwnedTensor s(DType::U8, {2, 2});
  s.bytes = {0x11, 0x22, 0x33, 0x44};
  std::vector<uint8_t> expected(1024, 0);
  expected[0] = 0x11, expected[1] = 0x22, expected[16] = 0x33, expected[17] = 0x44;
  EXPECT_EQ(pack_all(layout, s), expected);
  // Same 128x4 offsets as layouts-fp4.md 4's [1,130,5] example, whose Cp (8) agrees with Kp here.
  const std::vector<uint64_t> s130{130, 5};
  EXPECT_EQ(TritonBlackwellMXScaleLayout::packed_offset(s130, 33, 1), 21u);
  EXPECT_EQ(TritonBlackwellMXScaleLayout::packed_offset(s130, 129, 4), 1552u);
}

TEST(TritonBlackwellMXScale, BulkPackEqualsIndexMapAndTorchOpEmulation) {
  // swizzle_data: pad to [Np, Kp], view [B, Np/128, 4, 32, Kp/4, 4], transpose(2, 4).
  TritonBlackwellMXScaleLayout layout;
  uint64_t seed = 20;
  for (const auto& shape : kAwkwardShapes) {
    SCOPED_TRACE(shape_string(shape));
    const OwnedTensor s = random_tensor(DType::U8, shape, seed++);
    const uint64_t np = (shape[0] + 127) / 128 * 128, kp = (shape[1] + 7) / 8 * 8;
    std::vector<uint8_t> by_map(np * kp, 0);
    for (uint64_t n = 0; n < shape[0]; ++n)
      for (uint64_t k = 0; k < shape[1]; ++k)
        by_map[TritonBlackwellMXScaleLayout::packed_offset(shape, n, k)] = s.bytes[n * shape[1] + k];
    const std::vector<uint8_t> by_torch = testing::permute_contiguous(
        testing::pad_matrix(s.bytes, shape[0], shape[1], np, kp), {np / 128, 4, 32, kp / 4, 4}, {0, 3, 2, 1, 4});
    const std::vector<uint8_t> packed = pack_all(layout, s);
    EXPECT_EQ(packed, by_map);
    EXPECT_EQ(packed, by_torch);
    testing::expect_round_trip(layout, DType::U8, shape, seed++);
  }
}

TEST(TritonBlackwellMXScale, RefusesWhatIsNotOneExpertsByteMatrix) {
  TritonBlackwellMXScaleLayout layout;
  testing::expect_refused(layout, DType::U8, {4});
  testing::expect_refused(layout, DType::U8, {0, 4});
  testing::expect_dtype_refused(layout, DType::BF16, {4, 4});
}

}  // namespace
}  // namespace moepack::packers
