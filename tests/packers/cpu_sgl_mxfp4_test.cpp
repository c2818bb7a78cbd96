// sgl-kernel CPU convert_weight_packed (MXFP4) and convert_scale_packed (E8M0): the spec's
// worked example, the pack against a line-by-line transliteration of the upstream loop,
// refusals; vllm.bias_f32 and vllm.scalar_f32. (Bulk pack against the nibble index map and
// round trips: layout_contract_test.cpp.)
#include "packers/cpu_sgl_mxfp4.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "packers/cpu_bias_f32.h"
#include "tests/packers/triton_reference_ops.h"

namespace moepack::packers {
namespace {

using testing::pack_all;
using testing::random_tensor;

const std::vector<std::vector<uint64_t>> kWeightShapes = {{32, 16}, {32, 48}, {64, 16}, {96, 32}, {160, 80}, {2880 / 30, 1440 / 30}};

// The upstream uint8 pack_vnni for one 32-row block, as written there: list the 64 nibbles of a
// byte column row by row, then byte n = nibble[n] | nibble[n + 32] << 4.
std::vector<uint8_t> upstream_style_pack(const std::vector<uint8_t>& w, uint64_t rows, uint64_t bytes_per_row) {
  std::vector<uint8_t> out(w.size());
  for (uint64_t block = 0; block < rows / 32; ++block)
    for (uint64_t k = 0; k < bytes_per_row; ++k) {
      uint8_t unpacked[64];
      for (uint64_t n = 0; n < 32; ++n) {
        const uint8_t value = w[(block * 32 + n) * bytes_per_row + k];
        unpacked[2 * n] = value & 0xF;
        unpacked[2 * n + 1] = value >> 4;
      }
      for (uint64_t n = 0; n < 32; ++n)
        out[block * 32 * bytes_per_row + k * 32 + n] = static_cast<uint8_t>((unpacked[n + 32] << 4) | unpacked[n]);
    }
  return out;
}

TEST(CpuSglWeightPacked, WorkedExample) {
  // layouts-marlin-vnni-e8m0.md 3.4: W[n][0] = (1 << 4) | (n % 16) -> packed row kb=0 starts
  // 00 11 11 11 22 11 ...
  CpuSglWeightPackedMxfp4Layout layout;
  EXPECT_EQ(layout.name(), "cpu.sgl_convert_weight_packed(mxfp4)");
  OwnedTensor w(DType::U8, {32, 16});
  for (uint64_t n = 0; n < 32; ++n) w.bytes[n * 16] = static_cast<uint8_t>(0x10 | (n % 16));
  const std::vector<uint8_t> packed = pack_all(layout, w);
  const std::vector<uint8_t> head(packed.begin(), packed.begin() + 6);
  EXPECT_EQ(head, (std::vector<uint8_t>{0x00, 0x11, 0x11, 0x11, 0x22, 0x11}));
  // Byte 2j holds (row j, k0) and (row 16+j, k0): both j % 16; byte 2j+1 holds the two k1 = 1 codes.
  for (uint64_t j = 0; j < 16; ++j) {
    EXPECT_EQ(packed[2 * j], static_cast<uint8_t>(j | (j << 4)));
    EXPECT_EQ(packed[2 * j + 1], 0x11);
  }
  EXPECT_EQ(packed[32], 0x00);  // byte column kb = 1 is all zero
}

TEST(CpuSglWeightPacked, PackEqualsUpstreamLoop) {
  CpuSglWeightPackedMxfp4Layout layout;
  uint64_t seed = 1;
  for (const auto& shape : kWeightShapes) {
    SCOPED_TRACE(shape_string(shape));
    const OwnedTensor w = random_tensor(DType::U8, shape, seed++);
    EXPECT_EQ(layout.packed_shape(shape), shape);
    EXPECT_EQ(pack_all(layout, w), upstream_style_pack(w.bytes, shape[0], shape[1]));
  }
}

// The bulk path (row-pair words, transposed in tiles of 64 columns) against the index map, at
// gpt-oss's 1440 byte columns (22 full tiles and a half one) and narrower tails.
TEST(CpuSglWeightPacked, BulkPackEqualsTheIndexMap) {
  CpuSglWeightPackedMxfp4Layout layout;
  uint64_t seed = 40;
  for (const std::vector<uint64_t>& shape : {std::vector<uint64_t>{64, 1440}, {32, 16}, {96, 80}, {32, 64 + 48}}) {
    SCOPED_TRACE(shape_string(shape));
    const OwnedTensor w = random_tensor(DType::U8, shape, seed++);
    std::vector<uint8_t> bulk(w.bytes.size(), 0xA5), by_map(w.bytes.size(), 0x5A);
    layout.pack(w.view(), bulk);
    layout.pack_by_map(w.view(), by_map);
    EXPECT_EQ(bulk, by_map);
  }
}

TEST(CpuSglWeightPacked, RefusesShapesTheKernelCannotPack) {
  CpuSglWeightPackedMxfp4Layout layout;
  // 16-row tail (upstream reads an uninitialised buffer), rows not a multiple of 16, K not a multiple of 32.
  for (std::vector<uint64_t> shape : {std::vector<uint64_t>{16, 16}, {48, 16}, {33, 16}, {1, 16}, {32, 8}, {32, 17}, {32, 1}, {32}})
    testing::expect_refused(layout, DType::U8, shape);
  testing::expect_dtype_refused(layout, DType::F8_E8M0, {32, 16});
}

TEST(CpuSglScalePacked, WorkedExampleAndRefusals) {
  CpuSglScalePackedLayout layout;
  EXPECT_EQ(layout.name(), "cpu.sgl_convert_scale_packed(e8m0)");
  // [32, 2] block: packed = column 0 of all 32 rows, then column 1.
  OwnedTensor s(DType::U8, {32, 2});
  for (uint64_t n = 0; n < 32; ++n) s.bytes[n * 2] = static_cast<uint8_t>(n), s.bytes[n * 2 + 1] = static_cast<uint8_t>(100 + n);
  std::vector<uint8_t> expected;
  for (uint64_t n = 0; n < 32; ++n) expected.push_back(static_cast<uint8_t>(n));
  for (uint64_t n = 0; n < 32; ++n) expected.push_back(static_cast<uint8_t>(100 + n));
  EXPECT_EQ(pack_all(layout, s), expected);
  for (std::vector<uint64_t> shape : {std::vector<uint64_t>{16, 2}, {33, 2}, {1, 1}, {32}}) testing::expect_refused(layout, DType::U8, shape);
}

TEST(BiasToF32, DrawnExampleAndRefusals) {
  BiasToF32Layout layout;
  EXPECT_EQ(layout.name(), "vllm.bias_f32");
  EXPECT_EQ(layout.packed_dtype(DType::BF16), DType::F32);
  OwnedTensor bias(DType::BF16, {3});
  bias.bytes = {0x80, 0x3F, 0x20, 0xC0, 0x00, 0x00};  // 1.0, -2.5, 0.0
  EXPECT_EQ(pack_all(layout, bias),
            (std::vector<uint8_t>{0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x20, 0xC0, 0x00, 0x00, 0x00, 0x00}));
  OwnedTensor half(DType::F16, {1});
  half.bytes = {0x00, 0x3C};  // 1.0
  EXPECT_EQ(pack_all(layout, half), (std::vector<uint8_t>{0x00, 0x00, 0x80, 0x3F}));
  testing::expect_refused(layout, DType::BF16, {2, 2});
  testing::expect_dtype_refused(layout, DType::U8, {4});
}

TEST(ScalarToF32, DrawnExampleAndRefusals) {
  ScalarToF32Layout layout;
  EXPECT_EQ(layout.name(), "vllm.scalar_f32");
  EXPECT_TRUE(layout.packed_shape(std::vector<uint64_t>{}).empty());
  EXPECT_EQ(layout.parameter_shape(4, std::vector<uint64_t>{}), (std::vector<uint64_t>{4}));
  OwnedTensor half(DType::BF16, {});
  half.bytes = {0x00, 0x3F};  // 0.5
  EXPECT_EQ(pack_all(layout, half), (std::vector<uint8_t>{0x00, 0x00, 0x00, 0x3F}));
  testing::expect_refused(layout, DType::F32, {1});
  testing::expect_dtype_refused(layout, DType::U8, {});
}

// The generic pack_vnni<packed_t> as written upstream (VNNI_BLK 2), applied per 32-row block with
// n_size = min(32, rows - n0) at the block's offset, as convert_weight_packed calls it.
std::vector<uint8_t> upstream_pack_vnni2(const std::vector<uint8_t>& w, uint64_t rows, uint64_t k) {
  std::vector<uint8_t> out(w.size());
  for (uint64_t n0 = 0; n0 < rows; n0 += 32) {
    const uint64_t N = std::min<uint64_t>(32, rows - n0);
    const uint8_t* weight = w.data() + n0 * k;
    uint8_t* packed = out.data() + n0 * k;
    for (uint64_t n = 0; n < N; ++n)
      for (uint64_t kk = 0; kk < k / 2; ++kk)
        for (uint64_t d = 0; d < 2; ++d) packed[kk * N * 2 + n * 2 + d] = weight[n * k + kk * 2 + d];
  }
  return out;
}

TEST(CpuSglWeightPackedFp8, DrawnExampleAndUpstreamLoop) {
  CpuSglWeightPackedFp8Layout layout;
  EXPECT_EQ(layout.name(), "cpu.sgl_convert_weight_packed(fp8)");
  // 32 rows, K = 32: byte (n, k) = n + 32 * (k % 2) + 64 * (k / 2) would overflow; use tags.
  OwnedTensor w(DType::F8_E4M3, {32, 32});
  for (uint64_t n = 0; n < 32; ++n)
    for (uint64_t k = 0; k < 32; ++k) w.bytes[n * 32 + k] = static_cast<uint8_t>(n * 7 + k);
  const std::vector<uint8_t> p = pack_all(layout, w);
  // Header: w<0,0> w<0,1> w<1,0> w<1,1> ... w<31,0> w<31,1> w<0,2> w<0,3> ...
  EXPECT_EQ(p[0], w.bytes[0]);
  EXPECT_EQ(p[1], w.bytes[1]);
  EXPECT_EQ(p[2], w.bytes[32]);
  EXPECT_EQ(p[63], w.bytes[31 * 32 + 1]);
  EXPECT_EQ(p[64], w.bytes[2]);
  for (const auto& shape : std::vector<std::vector<uint64_t>>{{32, 32}, {48, 64}, {16, 96}, {96, 160}, {2 * 7168 / 64, 256}}) {
    SCOPED_TRACE(shape_string(shape));
    const OwnedTensor r = random_tensor(DType::F8_E4M3, shape, shape[0] + shape[1]);
    EXPECT_EQ(pack_all(layout, r), upstream_pack_vnni2(r.bytes, shape[0], shape[1]));
    testing::expect_round_trip(layout, DType::F8_E4M3, shape, 5);
  }
  testing::expect_refused(layout, DType::F8_E4M3, {24, 32});  // OC % 16 (TILE_N)
  testing::expect_refused(layout, DType::F8_E4M3, {32, 48});  // K % 32 (TILE_K)
  testing::expect_dtype_refused(layout, DType::BF16, {32, 32});
}

TEST(CpuSglVnni4Int8, IndexMapLeavesTheCompensationBytes) {
  CpuSglVnni4Int8Layout layout;
  EXPECT_EQ(layout.packed_shape(std::vector<uint64_t>{64, 32}), (std::vector<uint64_t>{64, 36}));
  OwnedTensor w(DType::I8, {32, 32});
  for (uint64_t n = 0; n < 32; ++n)
    for (uint64_t k = 0; k < 32; ++k) w.bytes[n * 32 + k] = static_cast<uint8_t>(n * 3 + k);
  const std::vector<uint8_t> p = pack_all(layout, w);
  // pack_vnni<int8_t>: packed[k*32*4 + n*4 + d] = weight[n*K + 4k + d]
  for (uint64_t n = 0; n < 32; ++n)
    for (uint64_t k = 0; k < 8; ++k)
      for (uint64_t d = 0; d < 4; ++d) EXPECT_EQ(p[k * 128 + n * 4 + d], w.bytes[n * 32 + 4 * k + d]);
  for (uint64_t i = 32 * 32; i < 32 * 36; ++i) EXPECT_EQ(p[i], 0) << i;  // the sums' place, written by the derivation
  testing::expect_round_trip(layout, DType::I8, {96, 64}, 7);
  testing::expect_refused(layout, DType::I8, {48, 32});  // N == BLOCK_N
}

}  // namespace
}  // namespace moepack::packers
