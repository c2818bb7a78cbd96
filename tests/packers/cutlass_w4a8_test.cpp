// CUTLASS W4A8 layouts (packers/cutlass_w4a8.h) against loop transliterations of the upstream
// steps: vLLM's convert_packed_uint4b8_to_signed_int4_inplace and unified_encode_int4b, CUTLASS
// reorder_tensor into tile_to_shape(compute_memory_reordering_atom<float_e4m3_t>()) with the atom
// built from the GMMA ALayout_64x32 strides, and packed_scale_t with CUTLASS's software
// float -> e4m3; drawn examples; round trips; refusals.
#include "packers/cutlass_w4a8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

#include "lib/core/codecs.h"
#include "lib/core/error.h"
#include "packers/registry.h"
#include "tests/packers/triton_reference_ops.h"

namespace moepack::packers {
namespace {

using testing::pack_all;
using testing::random_tensor;

uint32_t word(const std::vector<uint8_t>& b, uint64_t i) {
  uint32_t w;
  std::memcpy(&w, b.data() + 4 * i, 4);
  return w;
}

// compute_memory_reordering_atom<float_e4m3_t>(): the A-operand register layout of the
// 64x16x32 E4M3 RS GMMA, ALayout_64x32 = ((4,8,4),(4,2,2)) : ((256,1,16),(64,8,1024)) over a
// column-major (m, k) 64 x 32 space, cut to one warp (thread modes (4,8)), inverted to
// (m, k) -> (thread, value) and composed with "the 16 values of a thread contiguous":
// offset = 16 * thread + value. Returns atom[m + 16 k] for the warp's 16 x 32 block.
std::vector<uint64_t> reordering_atom() {
  std::vector<uint64_t> atom(512, ~uint64_t{0});
  for (uint64_t t0 = 0; t0 < 4; ++t0)
    for (uint64_t t1 = 0; t1 < 8; ++t1)
      for (uint64_t v0 = 0; v0 < 4; ++v0)
        for (uint64_t v1 = 0; v1 < 2; ++v1)
          for (uint64_t v2 = 0; v2 < 2; ++v2) {
            const uint64_t offset = 256 * t0 + 1 * t1 + 64 * v0 + 8 * v1 + 1024 * v2;  // warp 0: t2 = 0
            const uint64_t m = offset % 64, k = offset / 64;
            const uint64_t thread = t0 + 4 * t1, value = v0 + 4 * v1 + 8 * v2;
            atom[m + 16 * k] = 16 * thread + value;
          }
  return atom;
}

// The upstream sequence on one expert's I32 [n, k/8] uint4b8 words: signed int4 in place, then
// the unified encoding per byte, then reorder_tensor D[dst(n, k)] = S[src(n, k)] with
// src(n, k) = n*K + k (make_cute_packed_stride of the K-major B) and dst = tile_to_shape(atom,
// (N, K)): 16 x 32 blocks in column-major block order.
std::vector<uint8_t> reference_weight(const OwnedTensor& w) {
  const uint64_t rows = w.shape[0], k = w.shape[1] * 8;
  std::vector<uint8_t> t = w.bytes;
  for (uint64_t i = 0; i < w.bytes.size() / 4; ++i) {
    uint32_t x = word(t, i);
    for (int n = 0; n < 8; ++n) {
      const int shift = 4 * n;
      const uint32_t nib = (x >> shift) & 0xF;
      x &= ~(0xFu << shift);
      x |= ((nib - 8) & 0xF) << shift;
    }
    std::memcpy(t.data() + 4 * i, &x, 4);
  }
  auto map_nib = [](uint8_t v) -> uint8_t { return (v == 0 || (v & 0x8)) ? v : static_cast<uint8_t>(8 - v); };
  for (uint8_t& b : t) b = static_cast<uint8_t>((map_nib(static_cast<uint8_t>(b >> 4)) << 4) | map_nib(static_cast<uint8_t>(b & 0xF)));
  const std::vector<uint64_t> atom = reordering_atom();
  std::vector<uint8_t> out(t.size(), 0);
  for (uint64_t n = 0; n < rows; ++n)
    for (uint64_t c = 0; c < k; ++c) {
      const uint64_t src = n * k + c;
      const uint64_t dst = atom[(n % 16) + 16 * (c % 32)] + 512 * ((n / 16) + (rows / 16) * (c / 32));
      const uint8_t nib = (t[src / 2] >> (4 * (src % 2))) & 0xF;
      out[dst / 2] = static_cast<uint8_t>(out[dst / 2] | (nib << (4 * (dst % 2))));
    }
  return out;
}

TEST(CutlassW4a8, ReorderingAtomIsTheDrawnClosedForm) {
  const std::vector<uint64_t> atom = reordering_atom();
  for (uint64_t m = 0; m < 16; ++m)
    for (uint64_t k = 0; k < 32; ++k) EXPECT_EQ(atom[m + 16 * k], CutlassW4a8WeightLayout::reordered_nibble(m, k, 16)) << m << ", " << k;
  // The drawn tile: rows 0, 1, 8 and 15 at k = 0, 4, 16 and 31.
  EXPECT_EQ(CutlassW4a8WeightLayout::reordered_nibble(0, 4, 16), 16u);
  EXPECT_EQ(CutlassW4a8WeightLayout::reordered_nibble(0, 16, 16), 8u);
  EXPECT_EQ(CutlassW4a8WeightLayout::reordered_nibble(1, 0, 16), 64u);
  EXPECT_EQ(CutlassW4a8WeightLayout::reordered_nibble(8, 0, 16), 4u);
  EXPECT_EQ(CutlassW4a8WeightLayout::reordered_nibble(15, 0, 16), 452u);
  EXPECT_EQ(CutlassW4a8WeightLayout::reordered_nibble(15, 31, 16), 511u);
  // Blocks go down the rows first: (16, 0) opens block 1, (0, 32) block N/16.
  EXPECT_EQ(CutlassW4a8WeightLayout::reordered_nibble(16, 0, 48), 512u);
  EXPECT_EQ(CutlassW4a8WeightLayout::reordered_nibble(0, 32, 48), 3u * 512u);
}

TEST(CutlassW4a8, WeightFollowsTheUpstreamSequence) {
  const CutlassW4a8WeightLayout layout;
  EXPECT_EQ(layout.name(), "vllm.cutlass_encode_and_reorder_int4b_grouped(from=uint4b8,cutlass v4.4.2,e9d1398d9)");
  EXPECT_EQ(layout.packed_dtype(DType::I32), DType::I32);
  for (const auto& shape : std::vector<std::vector<uint64_t>>{{16, 32}, {48, 32}, {80, 96}, {32, 160}}) {
    SCOPED_TRACE(shape_string(shape));
    const OwnedTensor w = random_tensor(DType::I32, shape, shape[0] * 131 + shape[1]);
    EXPECT_EQ(layout.packed_shape(shape), shape);
    EXPECT_EQ(pack_all(layout, w), reference_weight(w));
    std::vector<uint8_t> by_map(w.bytes.size(), 0xA5);
    layout.pack_by_map(w.view(), by_map);
    EXPECT_EQ(by_map, reference_weight(w));
    testing::expect_round_trip(layout, DType::I32, shape, 7);
  }
}

TEST(CutlassW4a8, Uint4b8BecomesTheUnifiedSignedCode) {
  // w = u - 8: -8..-1 two's complement (8..F), 0 -> 0, 1..7 -> the low bits of -w (7..1).
  const uint8_t expected[16] = {8, 9, 10, 11, 12, 13, 14, 15, 0, 7, 6, 5, 4, 3, 2, 1};
  for (uint8_t u = 0; u < 16; ++u) {
    EXPECT_EQ(CutlassW4a8WeightLayout::encode_nibble(u), expected[u]) << int(u);
    EXPECT_EQ(CutlassW4a8WeightLayout::decode_nibble(expected[u]), u) << int(u);
  }
  // One row of 256 values: word 0 = 0x76543210 (u = 0..7) -> codes F E D C B A 9 8 at the
  // atom's offsets 0, 1, 2, 3, 16, 17, 18, 19 (bytes 0, 1, 8, 9 of the 16-row tile).
  OwnedTensor w(DType::I32, {16, 32});
  const uint32_t first = 0x76543210u;
  std::memcpy(w.bytes.data(), &first, 4);
  for (size_t i = 4; i < w.bytes.size(); ++i) w.bytes[i] = 0x88;  // zeros everywhere else
  const std::vector<uint8_t> p = pack_all(CutlassW4a8WeightLayout{}, w);
  EXPECT_EQ(p[0], 0x98);
  EXPECT_EQ(p[1], 0xBA);
  EXPECT_EQ(p[8], 0xDC);
  EXPECT_EQ(p[9], 0xFE);
  EXPECT_EQ(std::count(p.begin(), p.end(), uint8_t{0}), static_cast<std::ptrdiff_t>(p.size() - 4));
}

TEST(CutlassW4a8, WeightRefusesWhatReorderTensorCannotTake) {
  const CutlassW4a8WeightLayout layout;
  for (const auto& shape : std::vector<std::vector<uint64_t>>{{8, 32}, {24, 32}, {16, 16}, {16, 33}}) {
    SCOPED_TRACE(shape_string(shape));
    try {
      layout.packed_shape(shape);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::bad_input);
      EXPECT_NE(std::string(e.what()).find("divisible by"), std::string::npos) << e.what();
    }
  }
}

// cutlass/float8.h convert_float_to_fp8 for E4M3 (FP8_MAX_EXPONENT 7, satfinite), step by step.
uint8_t cutlass_convert_float_to_fp8(float flt) {
  uint32_t s;
  std::memcpy(&s, &flt, 4);
  const uint8_t sign = static_cast<uint8_t>((s >> 24) & 0x80);
  int32_t exp = static_cast<int32_t>((s >> 23) & 0xff) - 127;
  int mantissa = static_cast<int>(s & 0x7fffff);
  uint8_t u = 0;
  if ((s & 0x7fffffff) > 0x7f800000) return 0x7f;
  if ((s & 0x7fffffff) == 0x7f800000) return sign | 0x7e;
  int sticky = 0;
  bool skip_sign = false, may_be_nan = false;
  if (exp >= -6 && exp <= 7) {
    u = static_cast<uint8_t>(((exp + 7) & 0xF) << 3);
    u = static_cast<uint8_t>(u | (mantissa >> 20));
  } else if (exp < -6) {
    const int rshift = -6 - exp;
    if (rshift < 32) {
      mantissa |= 1 << 23;
      sticky = (mantissa & ((1 << rshift) - 1)) != 0;
      mantissa >>= rshift;
      u = static_cast<uint8_t>((mantissa >> 20) & 0x7);
    } else {
      mantissa = 0;
      u = 0;
    }
  } else if (exp == 8) {
    const uint8_t m = static_cast<uint8_t>(mantissa >> 20);
    if (m < 7) {
      u = static_cast<uint8_t>(((exp + 7) << 3) | m);
      may_be_nan = m == 6;
    } else {
      return sign | 0x7e;
    }
  } else {
    return sign | 0x7e;
  }
  const int round = (mantissa >> 19) & 1;
  sticky |= (mantissa & ((1 << 19) - 1)) != 0;
  if ((round && sticky) || (round && (u & 1))) {
    u = static_cast<uint8_t>(u + 1);
    if (may_be_nan) skip_sign = true;
  }
  if (u > 0x7e) u = sign | 0x7e;
  if (!skip_sign) u |= sign;
  return u;
}

// packed_scale_t<float_e4m3_t, int4b_t>: storage[0] = pack4(s*-8, s*-7, s*-6, s*-5),
// storage[1] = pack4(s*-4, ..., s*-1); pack4 puts its first argument in the low byte.
std::vector<uint8_t> reference_table(uint8_t code) {
  const float s = e4m3_to_float(code);
  uint32_t storage[2] = {0, 0};
  for (int half = 0; half < 2; ++half)
    for (int i = 0; i < 4; ++i) storage[half] |= static_cast<uint32_t>(cutlass_convert_float_to_fp8(s * static_cast<float>(-8 + 4 * half + i))) << (8 * i);
  std::vector<uint8_t> out(8);
  std::memcpy(out.data(), storage, 8);
  return out;
}

TEST(CutlassW4a8, ScaleTableIsPackedScaleT) {
  for (int c = 0; c < 256; ++c) {
    const std::array<uint8_t, 8> t = CutlassW4a8ScaleLayout::lookup_table(static_cast<uint8_t>(c));
    EXPECT_EQ(std::vector<uint8_t>(t.begin(), t.end()), reference_table(static_cast<uint8_t>(c))) << "code " << c;
  }
  // The drawn table of 1.0 (0x38): -8 .. -1.
  const std::array<uint8_t, 8> one = CutlassW4a8ScaleLayout::lookup_table(0x38);
  EXPECT_EQ(std::vector<uint8_t>(one.begin(), one.end()), (std::vector<uint8_t>{0xD0, 0xCE, 0xCC, 0xCA, 0xC8, 0xC4, 0xC0, 0xB8}));
  // 448 * -8 saturates; 1.125 * -7 = -7.875 rounds to -8; zero gives -0.
  EXPECT_EQ(CutlassW4a8ScaleLayout::lookup_table(0x7E)[0], 0xFE);
  EXPECT_EQ(CutlassW4a8ScaleLayout::lookup_table(0x39)[1], 0xD0);
  EXPECT_EQ(CutlassW4a8ScaleLayout::lookup_table(0x00)[7], 0x80);
}

TEST(CutlassW4a8, ScalesArePermutedThenPacked) {
  const CutlassW4a8ScaleLayout layout;
  EXPECT_EQ(layout.name(), "vllm.cutlass_pack_scale_fp8(permute=0,2,1,int4b_t,cutlass v4.4.2,e9d1398d9)");
  for (const auto& shape : std::vector<std::vector<uint64_t>>{{2, 2}, {3, 5}, {17, 1}, {64, 16}}) {
    SCOPED_TRACE(shape_string(shape));
    const uint64_t rows = shape[0], groups = shape[1];
    OwnedTensor s = random_tensor(DType::F8_E4M3, shape, rows * 17 + groups);
    for (uint8_t& b : s.bytes) b = static_cast<uint8_t>(b % 0x7F);  // finite, non-negative
    // permute(0, 2, 1).contiguous() per expert, then 8 table bytes per scale.
    std::vector<uint8_t> expected;
    for (uint64_t g = 0; g < groups; ++g)
      for (uint64_t n = 0; n < rows; ++n) {
        const std::vector<uint8_t> t = reference_table(s.bytes[n * groups + g]);
        expected.insert(expected.end(), t.begin(), t.end());
      }
    EXPECT_EQ(layout.packed_shape(shape), (std::vector<uint64_t>{groups, rows, 8}));
    EXPECT_EQ(layout.parameter_shape(3, shape), (std::vector<uint64_t>{3 * groups * rows * 8}));
    EXPECT_EQ(pack_all(layout, s), expected);
    OwnedTensor back(DType::F8_E4M3, shape);
    layout.unpack(expected, back);
    EXPECT_EQ(back.bytes, s.bytes);
  }
  // The drawn example: s8 = [[1.0, 0.5], [2.0, 0.25]] -> LUT(1.0) LUT(2.0) LUT(0.5) LUT(0.25).
  OwnedTensor s(DType::F8_E4M3, {2, 2});
  s.bytes = {0x38, 0x30, 0x40, 0x28};
  const std::vector<uint8_t> p = pack_all(layout, s);
  EXPECT_EQ(std::vector<uint8_t>(p.begin(), p.begin() + 8), reference_table(0x38));
  EXPECT_EQ(std::vector<uint8_t>(p.begin() + 8, p.begin() + 16), reference_table(0x40));
  EXPECT_EQ(std::vector<uint8_t>(p.begin() + 16, p.begin() + 24), reference_table(0x30));
}

TEST(CutlassW4a8, ScalesRefuseNegativeAndNanCodes) {
  const CutlassW4a8ScaleLayout layout;
  for (uint8_t bad : {uint8_t{0x7F}, uint8_t{0x80}, uint8_t{0xB8}, uint8_t{0xFF}}) {
    OwnedTensor s(DType::F8_E4M3, {2, 2});
    s.bytes = {0x38, bad, 0x00, 0x7E};
    std::vector<uint8_t> out(32);
    try {
      layout.pack(s.view(), out);
      ADD_FAILURE() << "accepted code " << int(bad);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::bad_input) << e.what();
    }
  }
}

// unpack reads only tables pack writes: a foreign table (a negative scale's, or bytes that are no
// scale's table at all) is bad input, not a canonical scale that would not pack again (found by
// fuzz_packer_unpack; tests/fuzz/regressions/packer_unpack/cutlass_w4a8_foreign_table_of_negative_scale).
TEST(CutlassW4a8, UnpackRefusesTablesPackDoesNotWrite) {
  const CutlassW4a8ScaleLayout layout;
  std::vector<uint8_t> good = reference_table(0x38);  // one [1, 1] scale
  OwnedTensor back(DType::F8_E4M3, {1, 1});
  layout.unpack(good, back);
  EXPECT_EQ(back.bytes, (std::vector<uint8_t>{0x38}));
  std::vector<uint8_t> negative(8, 0x00);
  negative[7] = 0x08;  // byte 7 holds -s8: this one says s8 = 0x88, a negative scale
  std::vector<uint8_t> tampered = good;
  tampered[3] ^= 0x01;  // byte 7 fine, another entry not the table's
  for (const auto& table : {negative, tampered}) {
    try {
      layout.unpack(table, back);
      ADD_FAILURE() << "accepted a foreign table";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::bad_input) << e.what();
    }
  }
}

TEST(CutlassW4a8, BothLayoutsAreRegistered) {
  EXPECT_NE(find_layout(CutlassW4a8WeightLayout{}.name()), nullptr);
  EXPECT_NE(find_layout(CutlassW4a8ScaleLayout{}.name()), nullptr);
}

}  // namespace
}  // namespace moepack::packers
