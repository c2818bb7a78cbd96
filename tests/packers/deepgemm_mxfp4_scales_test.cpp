// DeepGEMM packed-UE8M0 MXFP4 scales: the spec's worked example pinned word for word, bulk pack
// checked against the byte index map (padding zero), round trips on awkward sizes.
#include <gtest/gtest.h>

#include "packers/deepgemm_mxfp4_scales.h"
#include "tests/packers/flashinfer_test_support.h"

namespace moepack::packers {
namespace {

using namespace fi_test;

TEST(DeepGemmMxfp4Scales, WorkedExamplePinned) {
  // layouts-marlin 4.1: MN = 5, SFK = 5, sf[r][c] = 2^(r-c) -> E8M0 byte 127 + r - c.
  const DeepGemmMxfp4ScaleLayout layout;
  OwnedTensor canonical(DType::U8, {5, 5});
  for (uint64_t r = 0; r < 5; ++r)
    for (uint64_t c = 0; c < 5; ++c) canonical.bytes[r * 5 + c] = static_cast<uint8_t>(127 + r - c);
  EXPECT_EQ(layout.packed_shape(canonical.shape), (std::vector<uint64_t>{2, 8}));
  const std::vector<uint8_t> packed = pack(layout, canonical);
  const std::vector<uint32_t> expected = {0x7c7d7e7f, 0x7d7e7f80, 0x7e7f8081, 0x7f808182, 0x80818283, 0, 0, 0,
                                          0x7b,       0x7c,       0x7d,       0x7e,       0x7f,       0, 0, 0};
  ASSERT_EQ(packed.size(), expected.size() * 4);
  for (size_t w = 0; w < expected.size(); ++w) {
    uint32_t got;
    std::memcpy(&got, packed.data() + 4 * w, 4);
    EXPECT_EQ(got, expected[w]) << "word " << w;
  }
}

TEST(DeepGemmMxfp4Scales, PackFollowsIndexMapWithZeroPadding) {
  const DeepGemmMxfp4ScaleLayout layout;
  for (auto [rows, cols] : {std::pair<uint64_t, uint64_t>{256, 24}, {130, 12}, {17, 9}, {1, 1}, {3, 129}}) {
    const OwnedTensor canonical = random_tensor(DType::U8, {rows, cols}, static_cast<uint32_t>(rows * 131 + cols));
    const std::vector<uint8_t> packed = pack(layout, canonical);
    const uint64_t mn_aligned = (rows + 3) / 4 * 4;
    std::vector<bool> written(packed.size(), false);
    for (uint64_t mn = 0; mn < rows; ++mn)
      for (uint64_t c = 0; c < cols; ++c) {
        const uint64_t at = DeepGemmMxfp4ScaleLayout::packed_offset(mn, c, mn_aligned);
        ASSERT_EQ(packed[at], canonical.bytes[mn * cols + c]);
        written[at] = true;
      }
    for (size_t i = 0; i < packed.size(); ++i) {
      if (!written[i]) {
        ASSERT_EQ(packed[i], 0) << "padding byte " << i;
      }
    }
    expect_round_trip(layout, canonical);
  }
}

TEST(DeepGemmMxfp4Scales, RefusesNonMatrices) {
  const DeepGemmMxfp4ScaleLayout layout;
  expect_refused(layout, DType::U8, {8});
  expect_refused(layout, DType::U8, {0, 4});
  expect_refused(layout, DType::F32, {4, 4}, false);
  EXPECT_EQ(layout.packed_dtype(DType::U8), DType::I32);
}

}  // namespace
}  // namespace moepack::packers
