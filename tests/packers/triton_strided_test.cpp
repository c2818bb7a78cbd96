// StridedLayout (identity) and its SM90-scale variant with the group pad to 4;
// vLLM's generic-converter shuffle_weight. (Bulk pack against the index map, round trips and
// refusals on awkward sizes: layout_contract_test.cpp.)
#include "packers/triton_strided.h"

#include <gtest/gtest.h>

#include <cstring>

#include "packers/triton_shuffle_weight.h"
#include "tests/packers/triton_reference_ops.h"

namespace moepack::packers {
namespace {

using testing::pack_all;
using testing::random_tensor;

TEST(TritonStrided, IdentityKeepsBytes) {
  TritonStridedLayout layout;
  EXPECT_EQ(layout.name(), "triton_kernels.Strided(v3.5.1)");
  const std::vector<uint64_t> shape{17, 33};
  const OwnedTensor t = random_tensor(DType::U8, shape, 1);
  EXPECT_EQ(layout.packed_shape(shape), shape);
  EXPECT_EQ(pack_all(layout, t), t.bytes);
}

TEST(TritonStrided, Sm90ScalePadsGroupsToFour) {
  TritonStridedLayout layout(4);
  EXPECT_EQ(layout.name(), "triton_kernels.Strided(k_groups_pad=4,v3.5.1)");
  // ERRATA 1: 6 scale groups become 8. Drawn example [2, 3] -> [2, 4].
  const std::vector<uint64_t> six{5, 6};
  EXPECT_EQ(layout.packed_shape(six), (std::vector<uint64_t>{5, 8}));
  OwnedTensor s(DType::U8, {2, 3});
  s.bytes = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(pack_all(layout, s), (std::vector<uint8_t>{1, 2, 3, 0, 4, 5, 6, 0}));
  testing::expect_refused(layout, DType::U8, {4});
}

TEST(TritonShuffleWeight, DrawnExample) {
  TritonShuffleWeightLayout layout;
  EXPECT_EQ(layout.name(), "vllm.mxfp4_triton_shuffle_weight(e9d1398d9)");
  OwnedTensor t(DType::U8, {1, 6});
  t.bytes = {0xA0, 0xA1, 0xA2, 0xB0, 0xB1, 0xB2};
  EXPECT_EQ(pack_all(layout, t), (std::vector<uint8_t>{0xA0, 0xB0, 0xA1, 0xB1, 0xA2, 0xB2}));
}

TEST(TritonShuffleWeight, MovesWholeF32BiasElements) {
  TritonShuffleWeightLayout layout;
  OwnedTensor bias(DType::F32, {4});
  const float values[4] = {1.f, 2.f, -3.f, -4.f};
  std::memcpy(bias.bytes.data(), values, sizeof(values));
  const std::vector<uint8_t> packed = pack_all(layout, bias);
  float out[4];
  std::memcpy(out, packed.data(), sizeof(out));
  EXPECT_EQ(out[0], 1.f);
  EXPECT_EQ(out[1], -3.f);
  EXPECT_EQ(out[2], 2.f);
  EXPECT_EQ(out[3], -4.f);
}

TEST(TritonShuffleWeight, RefusesOddLastAxis) {
  TritonShuffleWeightLayout layout;
  testing::expect_refused(layout, DType::U8, {4, 3});
  testing::expect_refused(layout, DType::U8, {1});
  testing::expect_refused(layout, DType::U8, {2, 2, 2});
  testing::expect_dtype_refused(layout, DType::F4, {2, 4});
}

}  // namespace
}  // namespace moepack::packers
