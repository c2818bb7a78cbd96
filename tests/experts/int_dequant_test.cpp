// The integer (WNA16) weight rule of lib/experts/int_dequant.h pinned on hand-packed words:
// GPTQ / compressed-tensors K packing, AutoAWQ's field order, zero points of both packings,
// act-order groups, and bad shapes or g_idx named as bad input.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "lib/core/codecs.h"
#include "lib/core/error.h"
#include "lib/experts/int_dequant.h"
#include "support/tensors.h"

namespace moepack::experts {
namespace {

constexpr auto i32 = test::i32_tensor;
constexpr auto bf16 = test::bf16_tensor;

TEST(IntDequant, GptqPacksAlongKAndIsSymmetricAroundEight) {
  // K = 8, N = 2: word (0, n) holds k = 0..7 in nibbles, low first. Column 0 codes 0..7, column 1
  // codes 15..8. Without zero points the zero is 2^(4-1) = 8 (vLLM's uint4b8).
  const OwnedTensor codes = i32({1, 2}, {0x76543210u, 0x89ABCDEFu});
  const OwnedTensor scales = bf16({1, 2}, {0.5f, 2.0f});
  IntWeight w{IntPacking::k_packed, &codes, &scales};
  EXPECT_EQ(int_weight_bits(w, 2, 8, "t"), 4u);
  const std::vector<float> v = dequantize_int(w, 2, 8, "t");  // [N, K]
  EXPECT_EQ(v, (std::vector<float>{-4.0f, -3.5f, -3.0f, -2.5f, -2.0f, -1.5f, -1.0f, -0.5f,  //
                                   14.0f, 12.0f, 10.0f, 8.0f, 6.0f, 4.0f, 2.0f, 0.0f}));
}

TEST(IntDequant, EightBitGptqHoldsFourCodesPerWordAroundOneHundredTwentyEight) {
  const OwnedTensor codes = i32({1, 1}, {0xFF80017Fu});  // k = 0..3: 0x7F, 0x01, 0x80, 0xFF
  const OwnedTensor scales = bf16({1, 1}, {1.0f});
  IntWeight w{IntPacking::k_packed, &codes, &scales};
  EXPECT_EQ(dequantize_int(w, 1, 4, "t"), (std::vector<float>{-1.0f, -127.0f, 0.0f, 127.0f}));
}

TEST(IntDequant, AwqUndoesItsFieldOrderForCodesAndZeros) {
  // K = 1, N = 8: AutoAWQ puts logical column j in field AWQ_ORDER^-1[j] = {0,4,1,5,2,6,3,7}[j].
  // Field f holds code f, so column j reads code {0,4,1,5,2,6,3,7}[j]; the zeros word holds 3 in
  // every field but field 4 (column 1), which holds 0.
  const OwnedTensor codes = i32({1, 1}, {0x76543210u});
  const OwnedTensor scales = bf16({1, 8}, {1, 1, 1, 1, 1, 1, 1, 1});
  const OwnedTensor zeros = i32({1, 1}, {0x33303333u});
  IntWeight w{IntPacking::awq, &codes, &scales, &zeros};
  EXPECT_EQ(int_weight_bits(w, 8, 1, "t"), 4u);
  EXPECT_EQ(dequantize_int(w, 8, 1, "t"), (std::vector<float>{-3.0f, 4.0f, -2.0f, 2.0f, -1.0f, 3.0f, 0.0f, 4.0f}));
}

TEST(IntDequant, SequentialZeroPointsAndActOrderGroups) {
  // compressed-tensors asymmetric: K = 8, N = 8, two groups picked by g_idx; zero points packed
  // along N in order (field n of word (g, 0)).
  std::vector<uint32_t> words(8, 0);
  for (int n = 0; n < 8; ++n) words[static_cast<size_t>(n)] = 0x55555555u;  // every code 5
  const OwnedTensor codes = i32({1, 8}, words);
  std::vector<float> s(16);
  for (int n = 0; n < 8; ++n) s[static_cast<size_t>(n)] = 1.0f, s[static_cast<size_t>(8 + n)] = 0.25f;
  const OwnedTensor scales = bf16({2, 8}, s);
  const OwnedTensor zeros = i32({2, 1}, {0x76543210u, 0x11111111u});  // group 0: zero n; group 1: zero 1
  const OwnedTensor g_idx = i32({8}, {1, 0, 0, 1, 0, 0, 0, 0});
  IntWeight w{IntPacking::k_packed, &codes, &scales, &zeros, &g_idx};
  const std::vector<float> v = dequantize_int(w, 8, 8, "t");
  for (uint64_t n = 0; n < 8; ++n) {
    EXPECT_EQ(v[n * 8 + 0], 1.0f) << n;                              // group 1: (5 - 1) * 0.25
    EXPECT_EQ(v[n * 8 + 1], 5.0f - static_cast<float>(n)) << n;      // group 0: (5 - n) * 1
    EXPECT_EQ(v[n * 8 + 3], 1.0f) << n;
  }
  // Without g_idx, K / G = 4 consecutive inputs share a group.
  IntWeight in_order{IntPacking::k_packed, &codes, &scales, &zeros};
  const std::vector<float> u = dequantize_int(in_order, 8, 8, "t");
  EXPECT_EQ(u[2 * 8 + 3], 3.0f);
  EXPECT_EQ(u[2 * 8 + 4], 1.0f);
}

TEST(IntDequant, UnpackedZeroValuesOverrideThePackedOnes) {
  // The CPU INT4 layout's zero points come one int8 per (group, output), up to 16 (GPTQ's 15 + 1):
  // K = 8, N = 2, one group, codes 0..7 (column 0) and 15..8 (column 1), zeros 16 and 1.
  const OwnedTensor codes = i32({1, 2}, {0x76543210u, 0x89ABCDEFu});
  const OwnedTensor scales = bf16({1, 2}, {1.0f, 1.0f});
  const OwnedTensor packed = i32({1, 1}, {0x88888888u});  // ignored when zero_values are given
  OwnedTensor values(DType::I8, {1, 2});
  values.bytes = {16, 1};
  IntWeight w{IntPacking::k_packed, &codes, &scales, &packed, nullptr, &values};
  EXPECT_EQ(dequantize_int(w, 2, 8, "t"), (std::vector<float>{-16, -15, -14, -13, -12, -11, -10, -9, 14, 13, 12, 11, 10, 9, 8, 7}));
  OwnedTensor wrong(DType::I8, {1, 3});
  w.zero_values = &wrong;
  EXPECT_THROW(dequantize_int(w, 2, 8, "t"), Error);
}

TEST(IntDequant, BadShapesAndGIdxAreBadInputNamingTheWeight) {
  const OwnedTensor codes = i32({1, 2}, {0, 0});
  const OwnedTensor scales = bf16({2, 2}, {1, 1, 1, 1});
  const OwnedTensor g_idx = i32({8}, {0, 1, 2, 0, 0, 0, 0, 0});
  auto expect_bad = [](const IntWeight& w, uint64_t n, uint64_t k, const std::string& needle) {
    try {
      dequantize_int(w, n, k, "layer L w13_");
      ADD_FAILURE() << "expected bad input";
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 4);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_bad(IntWeight{IntPacking::k_packed, &codes, &scales, nullptr, &g_idx}, 2, 8, "layer L w13_: g_idx element 2 is 2");
  expect_bad(IntWeight{IntPacking::k_packed, &codes, &scales}, 2, 16, "no 4- or 8-bit packing");
  expect_bad(IntWeight{IntPacking::k_packed, &codes, &scales}, 3, 8, "no 4- or 8-bit packing");
  const OwnedTensor three_groups = bf16({3, 2}, {1, 1, 1, 1, 1, 1});
  expect_bad(IntWeight{IntPacking::k_packed, &codes, &three_groups}, 2, 8, "3 scale groups do not divide 8 inputs");
}

}  // namespace
}  // namespace moepack::experts

namespace moepack::experts {
namespace {

// CUTLASS W4A8: codes N-first [N, K/8] (not transposed), a 16-value table per row and group.
TEST(IntDequant, W4a8TableIsIndexedByRowGroupAndCode) {
  // N = 2, K = 16, two groups of 8: row 0 word 0 = codes 0..7, word 1 = codes 8..15; row 1 the
  // same words swapped.
  const OwnedTensor codes = test::i32_tensor({2, 2}, {0x76543210u, 0xFEDCBA98u, 0xFEDCBA98u, 0x76543210u});
  std::vector<float> table(2 * 32);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i);  // value = its own index
  const OwnedTensor t = test::f32_tensor({2, 32}, table);
  const std::vector<float> v = dequantize_int4_table(codes, t, 2, 16, "t");
  ASSERT_EQ(v.size(), 32u);
  for (uint64_t k = 0; k < 8; ++k) {
    EXPECT_EQ(v[k], static_cast<float>(k));                     // row 0, group 0, code k
    EXPECT_EQ(v[8 + k], static_cast<float>(16 + 8 + k));        // row 0, group 1, code 8 + k
    EXPECT_EQ(v[16 + k], static_cast<float>(32 + 8 + k));       // row 1, group 0, code 8 + k
    EXPECT_EQ(v[24 + k], static_cast<float>(32 + 16 + k));      // row 1, group 1, code k
  }
  EXPECT_THROW(dequantize_int4_table(codes, test::f32_tensor({2, 24}, std::vector<float>(48)), 2, 16, "t"), Error);  // not 16 per group
  EXPECT_THROW(dequantize_int4_table(codes, t, 2, 24, "t"), Error);                                                  // codes are [2, 2]
}

}  // namespace
}  // namespace moepack::experts
