// NVFP4 layouts: the worked examples of packers/nvfp4_layouts.h (layouts-fp4.md 4 for the
// 128x4 swizzle; flashinfer_fp4_moe.py's row orders; marlin_utils_fp4.py's S0E5M3 bytes).
#include <gtest/gtest.h>

#include <numeric>

#include "lib/core/codecs.h"
#include "lib/core/error.h"
#include "packers/nvfp4_layouts.h"
#include "packers/registry.h"

namespace moepack::packers {
namespace {

// Every element of an [M, C] byte matrix tagged by its row and column (mod 256).
OwnedTensor tagged(uint64_t rows, uint64_t cols, DType dtype = DType::F8_E4M3) {
  OwnedTensor t(dtype, {rows, cols});
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t c = 0; c < cols; ++c) t.bytes[r * cols + c] = static_cast<uint8_t>((r * 7 + c * 3) % 250 + 1);
  return t;
}

std::vector<uint8_t> pack(const Layout& l, const OwnedTensor& t) {
  std::vector<uint8_t> out(byte_size(l.packed_dtype(t.dtype), l.packed_shape(t.shape)));
  l.pack(t.view(), out);
  return out;
}

void expect_round_trip(const Layout& l, const OwnedTensor& t) {
  const std::vector<uint8_t> packed = pack(l, t);
  OwnedTensor back(t.dtype, t.shape);
  l.unpack(packed, back);
  EXPECT_EQ(back.bytes, t.bytes) << l.name();
}

TEST(SwizzleBlockscale, SpecExampleWithPadding) {
  const SwizzleBlockscaleLayout l(RowOrder::identity);
  const OwnedTensor s = tagged(130, 5);
  EXPECT_EQ(l.packed_shape(s.shape), (std::vector<uint64_t>{256, 8}));
  const std::vector<uint8_t> p = pack(l, s);
  ASSERT_EQ(p.size(), 2048u);
  EXPECT_EQ(p[21], s.bytes[33 * 5 + 1]);     // S[33][1]
  EXPECT_EQ(p[1552], s.bytes[129 * 5 + 4]);  // S[129][4]
  EXPECT_EQ(p[0], s.bytes[0]);
  EXPECT_EQ(p[16], s.bytes[5]);  // S[1][0]
  // Padding: rows 130..255 and columns 5..7 hold zeros, so 2048 - 650 bytes are zero (the
  // tags are never zero).
  EXPECT_EQ(std::count(p.begin(), p.end(), 0), 2048 - 650);
  expect_round_trip(l, s);
  EXPECT_EQ(l.name(), "vllm.swizzle_blockscale(rows=identity,sf=128x4,e9d1398d9)");
  EXPECT_EQ(l.parameter_shape(3, s.shape), (std::vector<uint64_t>{3, 256, 8}));
}

TEST(SwizzleBlockscale, W31SwapComesBeforeTheSwizzle) {
  const SwizzleBlockscaleLayout l(RowOrder::swap_halves);
  const OwnedTensor s = tagged(256, 8);  // I = 128
  const std::vector<uint8_t> p = pack(l, s);
  EXPECT_EQ(p[0], s.bytes[128 * 8]);        // packed row 0 = up row 0
  EXPECT_EQ(p[16], s.bytes[129 * 8]);       // packed row 1 = up row 1
  EXPECT_EQ(p[8 * 128], s.bytes[0]);        // packed row 128 (second tile row) = gate row 0
  expect_round_trip(l, s);
}

TEST(ReorderW13Rows, CuteDslSixtyFourRowGroups) {
  const ReorderW13RowsLayout stacked(RowOrder::cutedsl_w31_interleave64);
  const ReorderW13RowsLayout interleaved(RowOrder::cutedsl_deinterleave_interleave64);
  const OwnedTensor w = tagged(256, 1, DType::U8);  // I = 128, one byte per row: row r holds its tag
  auto row_of = [&](const std::vector<uint8_t>& p, uint64_t r) {
    for (uint64_t s = 0; s < 256; ++s)
      if (w.bytes[s] == p[r]) return s;
    return uint64_t{999};
  };
  const std::vector<uint8_t> a = pack(stacked, w);
  EXPECT_EQ(row_of(a, 0), 128u);    // up 0
  EXPECT_EQ(row_of(a, 63), 191u);   // up 63
  EXPECT_EQ(row_of(a, 64), 0u);     // gate 0
  EXPECT_EQ(row_of(a, 128), 192u);  // up 64
  EXPECT_EQ(row_of(a, 192), 64u);   // gate 64
  const std::vector<uint8_t> b = pack(interleaved, w);
  EXPECT_EQ(row_of(b, 0), 1u);    // up 0 = row 1 of [g0, u0, g1, u1, ...]
  EXPECT_EQ(row_of(b, 64), 0u);   // gate 0
  EXPECT_EQ(row_of(b, 128), 129u);  // up 64
  expect_round_trip(stacked, tagged(256, 7, DType::U8));
  expect_round_trip(interleaved, tagged(384, 3, DType::U8));
  // interleave_linear_and_gate needs 2I % 128 == 0.
  EXPECT_THROW(stacked.packed_shape(std::vector<uint64_t>{192, 4}), Error);
}

TEST(MarlinNvfp4Scales, S0E5M3BytesAndThePermutation) {
  const MarlinNvfp4ScaleLayout l;
  // 64 rows (N), 2 groups; row n holds E4M3 codes chosen so that their S0E5M3 bytes are known.
  OwnedTensor s(DType::F8_E4M3, {64, 2});
  for (uint64_t n = 0; n < 64; ++n) {
    s.bytes[2 * n] = static_cast<uint8_t>(0x08 + n);  // 2^-6 and up: normal codes
    s.bytes[2 * n + 1] = n % 2 ? 0x00 : 0x38;         // zero, or 1.0
  }
  const std::vector<uint8_t> p = pack(l, s);
  ASSERT_EQ(p.size(), 128u);
  EXPECT_EQ(l.packed_shape(s.shape), (std::vector<uint64_t>{2, 64}));
  // Row g = 0, columns 0..7 come from rows 0 16 8 24 32 48 40 56 (grouped perm, then 0 2 1 3).
  const uint64_t rows[8] = {0, 16, 8, 24, 32, 48, 40, 56};
  for (int x = 0; x < 8; ++x) EXPECT_EQ(p[x], 0x08 + rows[x] + 120) << x;  // b + 120 for normal codes
  EXPECT_EQ(p[64 + 0], 0xB0);  // 1.0 -> 0xB0
  EXPECT_EQ(p[64 + 2], 0xB0);  // column 2 comes from row 8 (even): 1.0
  expect_round_trip(l, s);
  // 448 -> 0xF6, 2^-6 -> 0x80.
  OwnedTensor edge(DType::F8_E4M3, {64, 1});
  std::fill(edge.bytes.begin(), edge.bytes.end(), 0x7E);
  edge.bytes[0] = 0x08;
  const std::vector<uint8_t> q = pack(l, edge);
  EXPECT_EQ(q[0], 0x80);
  EXPECT_EQ(q[1], 0xF6);
  // Negative scales and NaN have no byte (the value stage zeroes negative ones first).
  edge.bytes[5] = 0x81;
  EXPECT_THROW(pack(l, edge), Error);
  edge.bytes[5] = 0x7F;
  EXPECT_THROW(pack(l, edge), Error);
  // A subnormal (which the stage zeroes) would be the half of 2^-9 * 3 * 128 = 0.75: byte 116.
  edge.bytes[5] = 0x03;
  EXPECT_EQ(pack(l, edge)[1 * 8 + 1], 0xF6);  // unaffected neighbour
  const std::vector<uint8_t> r = pack(l, edge);
  EXPECT_NE(std::find(r.begin(), r.end(), 116), r.end());
}

TEST(Nvfp4Layouts, RegisteredUnderTheirIds) {
  for (const char* id : {"vllm.swizzle_blockscale(rows=identity,sf=128x4,e9d1398d9)", "vllm.swizzle_blockscale(rows=swap_halves,sf=128x4,e9d1398d9)",
                         "vllm.reorder_w13_rows(rows=swap_halves,e9d1398d9)", "vllm.reorder_w13_rows(rows=cutedsl_w31_interleave64,e9d1398d9)",
                         "vllm.nvfp4_marlin_process_scales(group_size=16,e9d1398d9)"})
    EXPECT_NE(find_layout(id), nullptr) << id;
}

}  // namespace
}  // namespace moepack::packers
