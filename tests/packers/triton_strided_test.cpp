// StridedLayout (identity) and its SM90-scale variant with the group pad to 4;
// vLLM's generic-converter shuffle_weight.
#include "packers/triton_strided.h"

#include <gtest/gtest.h>

#include <cstring>

#include "packers/triton_shuffle_weight.h"
#include "tests/packers/triton_reference_ops.h"

namespace moepack::packers {
namespace {

using testing::pack_all;
using testing::random_tensor;

const std::vector<std::vector<uint64_t>> kAwkwardShapes = {{1, 1}, {2, 3}, {3, 2}, {17, 33}, {127, 129}, {129, 6}};

TEST(TritonStrided, IdentityKeepsBytes) {
  TritonStridedLayout layout;
  EXPECT_EQ(layout.name(), "triton_kernels.Strided(v3.5.1)");
  uint64_t seed = 1;
  for (const auto& shape : kAwkwardShapes) {
    const OwnedTensor t = random_tensor(DType::U8, shape, seed++);
    EXPECT_EQ(layout.packed_shape(shape), shape);
    EXPECT_EQ(pack_all(layout, t), t.bytes);
    testing::expect_round_trip(layout, DType::U8, shape, seed++);
  }
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
  uint64_t seed = 10;
  for (const auto& shape : kAwkwardShapes) {
    SCOPED_TRACE(shape_string(shape));
    const OwnedTensor t = random_tensor(DType::U8, shape, seed++);
    const std::vector<uint64_t> ps = layout.packed_shape(shape);
    std::vector<uint8_t> expected(ps[0] * ps[1], 0);
    for (uint64_t n = 0; n < shape[0]; ++n)
      for (uint64_t c = 0; c < shape[1]; ++c) expected[layout.packed_offset(shape, n, c)] = t.bytes[n * shape[1] + c];
    EXPECT_EQ(pack_all(layout, t), expected);
    testing::expect_round_trip(layout, DType::U8, shape, seed++);
  }
  testing::expect_refused(layout, DType::U8, {4});
}

TEST(TritonShuffleWeight, DrawnExampleAndIndexMap) {
  TritonShuffleWeightLayout layout;
  EXPECT_EQ(layout.name(), "vllm.mxfp4_triton_shuffle_weight(e9d1398d9)");
  OwnedTensor t(DType::U8, {1, 6});
  t.bytes = {0xA0, 0xA1, 0xA2, 0xB0, 0xB1, 0xB2};
  EXPECT_EQ(pack_all(layout, t), (std::vector<uint8_t>{0xA0, 0xB0, 0xA1, 0xB1, 0xA2, 0xB2}));
  uint64_t seed = 20;
  for (std::vector<uint64_t> shape : {std::vector<uint64_t>{1, 2}, {3, 34}, {17, 2}, {129, 128}}) {
    SCOPED_TRACE(shape_string(shape));
    const OwnedTensor in = random_tensor(DType::U8, shape, seed++);
    std::vector<uint8_t> expected(in.bytes.size());
    for (uint64_t r = 0; r < shape[0]; ++r)
      for (uint64_t c = 0; c < shape[1]; ++c)
        expected[r * shape[1] + TritonShuffleWeightLayout::shuffled_index(shape[1], c)] = in.bytes[r * shape[1] + c];
    EXPECT_EQ(pack_all(layout, in), expected);
    testing::expect_round_trip(layout, DType::U8, shape, seed++);
  }
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
  testing::expect_round_trip(layout, DType::F32, {10}, 30);
  testing::expect_round_trip(layout, DType::BF16, {3, 10}, 31);
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
