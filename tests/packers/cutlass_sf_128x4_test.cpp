// CUTLASS 128x4 scale swizzle and vLLM's CUTLASS W4A4 MXFP4 scale layout: offsets pinned to the
// spec's examples, the offset formula re-derived from vLLM's reshape/permute description of
// `swizzle_mxfp4_scales`, ERRATA 8 refusals. (Round trips: layout_contract_test.cpp.)
#include <gtest/gtest.h>

#include "packers/cutlass_sf_128x4.h"
#include "tests/packers/flashinfer_test_support.h"

namespace moepack::packers {
namespace {

using namespace fi_test;

TEST(CutlassSf128x4, OffsetsPinnedToSpecExamples) {
  // layouts-fp4.md 4: [1,2,4] -> (0,0..3) at 0..3, (1,0..3) at 16..19; [1,130,5] (Cp = 8):
  // (33,1) -> 21, (129,4) -> 1552.
  for (uint64_t c = 0; c < 4; ++c) {
    EXPECT_EQ(sf_128x4_offset(0, c, 4), c);
    EXPECT_EQ(sf_128x4_offset(1, c, 4), 16 + c);
  }
  EXPECT_EQ(sf_128x4_offset(33, 1, 8), 21u);
  EXPECT_EQ(sf_128x4_offset(129, 4, 8), 1552u);
}

// vLLM: padded [Mp, Cp] viewed [Mp/128, 4, 32, Cp/4, 4] (m tile, inner m, outer m, k tile,
// inner k) and permuted to (m tile, k tile, outer m, inner m, inner k).
TEST(CutlassSf128x4, OffsetEqualsVllmReshapePermute) {
  const uint64_t m_tiles = 3, k_tiles = 5;
  for (uint64_t mt = 0; mt < m_tiles; ++mt)
    for (uint64_t inner = 0; inner < 4; ++inner)
      for (uint64_t outer = 0; outer < 32; ++outer)
        for (uint64_t kt = 0; kt < k_tiles; ++kt)
          for (uint64_t ik = 0; ik < 4; ++ik) {
            const uint64_t m = mt * 128 + inner * 32 + outer, c = kt * 4 + ik;
            const uint64_t permuted = (((mt * k_tiles + kt) * 32 + outer) * 4 + inner) * 4 + ik;
            ASSERT_EQ(sf_128x4_offset(m, c, 4 * k_tiles), permuted);
          }
}

TEST(CutlassMxfp4ScaleSwizzle, RefusesErrata8Shapes) {
  const CutlassMxfp4ScaleSwizzleLayout layout;
  expect_refused(layout, DType::U8, {64, 4});
  expect_refused(layout, DType::U8, {130, 4});
  expect_refused(layout, DType::U8, {128, 6});
  expect_refused(layout, DType::U8, {128});
  expect_refused(layout, DType::F32, {128, 4}, false);
  EXPECT_EQ(layout.name(), "vllm.cutlass_moe.swizzle_mxfp4_scales(sf=128x4,e9d1398d9)");
}

}  // namespace
}  // namespace moepack::packers
