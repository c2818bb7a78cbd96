// BlackwellMXValueLayout and BlackwellMXScaleLayout (triton_kernels v3.5.1): worked examples,
// the scale's pack against a torch-op emulation, refusals. (Bulk pack against the index map and
// round trips: layout_contract_test.cpp, for every registered layout.)
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
  OwnedTensor s130(DType::U8, {130, 5});
  s130.bytes[33 * 5 + 1] = 0xAA;
  s130.bytes[129 * 5 + 4] = 0xBB;
  const std::vector<uint8_t> packed130 = pack_all(layout, s130);
  EXPECT_EQ(packed130[21], 0xAA);
  EXPECT_EQ(packed130[1552], 0xBB);
}

TEST(TritonBlackwellMXScale, PackEqualsTorchOpEmulation) {
  // swizzle_data: pad to [Np, Kp], view [B, Np/128, 4, 32, Kp/4, 4], transpose(2, 4).
  TritonBlackwellMXScaleLayout layout;
  uint64_t seed = 20;
  for (const auto& shape : kAwkwardShapes) {
    SCOPED_TRACE(shape_string(shape));
    const OwnedTensor s = random_tensor(DType::U8, shape, seed++);
    const uint64_t np = (shape[0] + 127) / 128 * 128, kp = (shape[1] + 7) / 8 * 8;
    const std::vector<uint8_t> by_torch = testing::permute_contiguous(
        testing::pad_matrix(s.bytes, shape[0], shape[1], np, kp), {np / 128, 4, 32, kp / 4, 4}, {0, 3, 2, 1, 4});
    EXPECT_EQ(pack_all(layout, s), by_torch);
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
