// HopperMXScaleLayout (triton_kernels v3.5.1) with vLLM's SM90 group pad to 4: worked example,
// pack against a torch-op emulation. (Round trips on awkward sizes: layout_contract_test.cpp.)
#include "packers/triton_hopper_mx_scale.h"

#include <gtest/gtest.h>

#include "tests/packers/triton_reference_ops.h"

namespace moepack::packers {
namespace {

using testing::pack_all;
using testing::random_tensor;

// Sizes for the torch-op emulation: tails of the 32*num_warps-row blocks and of the group pad.
const std::vector<std::vector<uint64_t>> kAwkwardShapes = {
    {1, 1}, {2, 2}, {3, 3}, {17, 5}, {33, 6}, {127, 7}, {129, 9}, {256, 4}, {257, 90}, {300, 16},
};

TEST(TritonHopperMXScale, NamesAndShapes) {
  TritonHopperMXScaleLayout eight(8), four(4);
  EXPECT_EQ(eight.name(), "triton_kernels.HopperMXScale(mx_axis=1,num_warps=8,k_groups_pad=4,v3.5.1)");
  EXPECT_EQ(four.name(), "triton_kernels.HopperMXScale(mx_axis=1,num_warps=4,k_groups_pad=4,v3.5.1)");
  const std::vector<uint64_t> gpt_oss_w13{5760, 90}, six_groups{2, 6};
  // Np = round_up(5760, 256) = 5888 -> 184 rows; Ksp = round_up(90, 4) = 92 -> 2944 columns.
  EXPECT_EQ(eight.packed_shape(gpt_oss_w13), (std::vector<uint64_t>{184, 2944}));
  EXPECT_EQ(four.packed_shape(gpt_oss_w13), (std::vector<uint64_t>{180, 2944}));
  // ERRATA 1: 6 scale groups become 8 (not 6, which triton's own pad to 2 would give).
  EXPECT_EQ(eight.packed_shape(six_groups), (std::vector<uint64_t>{8, 8 * 32}));
  EXPECT_THROW(TritonHopperMXScaleLayout(2), Error);
}

TEST(TritonHopperMXScale, WorkedExampleTwoRowsTwoGroups) {
  // layouts-fp4.md 3.3 (with ERRATA 1's pad): E=1, N=2, Ks=2 -> 8 warps: storage 8 x 128;
  // row 0 starts s<0,0> 0 s<0,1> 0 s<1,0> 0 s<1,1> 0, everything else zero.
  OwnedTensor s(DType::U8, {2, 2});
  s.bytes = {0x7F, 0x80, 0x81, 0x82};
  const std::vector<uint8_t> packed = pack_all(TritonHopperMXScaleLayout(8), s);
  std::vector<uint8_t> expected(8 * 128, 0);
  expected[0] = 0x7F, expected[2] = 0x80, expected[4] = 0x81, expected[6] = 0x82;
  EXPECT_EQ(packed, expected);
  // With 4 warps the same bytes lead a 4 x 128 storage.
  expected.resize(4 * 128);
  EXPECT_EQ(pack_all(TritonHopperMXScaleLayout(4), s), expected);
}

TEST(TritonHopperMXScale, PackEqualsTorchOpEmulation) {
  // vLLM pads K to 4; swizzle_data pads M to 32*W, views [M/(32W), 2, W, 2, 8, K/2, 2] and
  // permutes [0, 2, 5, 1, 4, 6, 3].
  for (uint64_t warps : {8u, 4u}) {
    TritonHopperMXScaleLayout layout(warps);
    uint64_t seed = 50 + warps;
    for (const auto& shape : kAwkwardShapes) {
      SCOPED_TRACE(shape_string(shape));
      const OwnedTensor s = random_tensor(DType::U8, shape, seed++);
      const uint64_t np = (shape[0] + 32 * warps - 1) / (32 * warps) * (32 * warps), kp = (shape[1] + 3) / 4 * 4;
      const std::vector<uint8_t> padded = testing::pad_matrix(s.bytes, shape[0], shape[1], np, kp);
      const std::vector<uint8_t> expected =
          testing::permute_contiguous(padded, {np / (32 * warps), 2, warps, 2, 8, kp / 2, 2}, {0, 2, 5, 1, 4, 6, 3});
      EXPECT_EQ(pack_all(layout, s), expected);
    }
  }
}

TEST(TritonHopperMXScale, RefusesWhatIsNotOneExpertsByteMatrix) {
  TritonHopperMXScaleLayout layout;
  testing::expect_refused(layout, DType::U8, {8});
  testing::expect_refused(layout, DType::U8, {1, 8, 8});
  testing::expect_refused(layout, DType::U8, {8, 0});
  testing::expect_dtype_refused(layout, DType::F32, {8, 2});
}

}  // namespace
}  // namespace moepack::packers
