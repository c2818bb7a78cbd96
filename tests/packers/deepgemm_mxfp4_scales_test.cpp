// DeepGEMM packed-UE8M0 MXFP4 scales: the spec's worked example pinned word for word, refusals.
// (Round trips and zero padding on awkward sizes: layout_contract_test.cpp.)
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

TEST(DeepGemmMxfp4Scales, RefusesNonMatrices) {
  const DeepGemmMxfp4ScaleLayout layout;
  expect_refused(layout, DType::U8, {8});
  expect_refused(layout, DType::U8, {0, 4});
  expect_refused(layout, DType::F32, {4, 4}, false);
  EXPECT_EQ(layout.packed_dtype(DType::U8), DType::I32);
}

}  // namespace
}  // namespace moepack::packers
