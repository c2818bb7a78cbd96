// CDNA4MXScaleLayout (triton_kernels v3.5.1, gfx950): worked example, pack against a torch-op
// emulation, refusals of unaligned shapes. (Round trips: layout_contract_test.cpp.)
#include "packers/triton_cdna4_mx_scale.h"

#include <gtest/gtest.h>

#include "tests/packers/triton_reference_ops.h"

namespace moepack::packers {
namespace {

using testing::pack_all;
using testing::random_tensor;

const std::vector<std::vector<uint64_t>> kShapes = {{32, 8}, {64, 8}, {32, 24}, {96, 16}, {2880 / 10, 48}};

TEST(TritonCdna4MXScale, NameShapeAndWorkedExample) {
  TritonCdna4MXScaleLayout layout;
  EXPECT_EQ(layout.name(), "triton_kernels.CDNA4MXScale(v3.5.1)");
  const std::vector<uint64_t> gpt_oss_w13{5888, 96};  // I, H padded to 256 on gfx950
  EXPECT_EQ(layout.packed_shape(gpt_oss_w13), (std::vector<uint64_t>{184, 3072}));
  // layouts-fp4.md 3.6: N=32, Ks=8, first bytes (0,0) (16,0) (0,4) (16,4) (1,0) (17,0) (1,4) (17,4) (2,0); byte 64 = (0,1).
  OwnedTensor s(DType::U8, {32, 8});
  for (uint64_t n = 0; n < 32; ++n)
    for (uint64_t k = 0; k < 8; ++k) s.bytes[n * 8 + k] = static_cast<uint8_t>(n * 8 + k);  // tag = canonical index
  const std::vector<uint8_t> packed = pack_all(layout, s);
  auto tag = [](uint64_t n, uint64_t k) { return static_cast<uint8_t>(n * 8 + k); };
  const std::vector<uint8_t> head(packed.begin(), packed.begin() + 9);
  EXPECT_EQ(head, (std::vector<uint8_t>{tag(0, 0), tag(16, 0), tag(0, 4), tag(16, 4), tag(1, 0), tag(17, 0), tag(1, 4),
                                        tag(17, 4), tag(2, 0)}));
  EXPECT_EQ(packed[64], tag(0, 1));
}

TEST(TritonCdna4MXScale, PackEqualsTorchOpEmulation) {
  // swizzle_data: view [N/32, 2, 16, Ks/8, 2, 4], permute to [n0, k0, d, b, c, a].
  TritonCdna4MXScaleLayout layout;
  uint64_t seed = 3;
  for (const auto& shape : kShapes) {
    SCOPED_TRACE(shape_string(shape));
    const OwnedTensor s = random_tensor(DType::U8, shape, seed++);
    const std::vector<uint8_t> by_torch =
        testing::permute_contiguous(s.bytes, {shape[0] / 32, 2, 16, shape[1] / 8, 2, 4}, {0, 3, 5, 2, 4, 1});
    EXPECT_EQ(pack_all(layout, s), by_torch);
  }
}

TEST(TritonCdna4MXScale, RefusesUnalignedShapes) {
  TritonCdna4MXScaleLayout layout;
  for (std::vector<uint64_t> shape : {std::vector<uint64_t>{1, 8}, {33, 8}, {31, 8}, {32, 1}, {32, 7}, {32, 9}, {32}})
    testing::expect_refused(layout, DType::U8, shape);
}

}  // namespace
}  // namespace moepack::packers
