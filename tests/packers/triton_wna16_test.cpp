// Triton WNA16 layouts (packers/triton_wna16.h) against the torch op sequence of vLLM's TRITON
// branch, executed step by step on byte arrays (transpose, view as uint8, reshape, permute);
// the drawn examples; round trips; the scale transpose's own id.
#include "packers/triton_wna16.h"

#include <gtest/gtest.h>

#include <cstring>

#include "packers/registry.h"
#include "packers/unquantized_rows.h"
#include "tests/packers/triton_reference_ops.h"

namespace moepack::packers {
namespace {

using testing::pack_all;
using testing::random_tensor;

// w.transpose(0, 1).contiguous() of a row-major [rows, cols] tensor of `eb`-byte elements.
std::vector<uint8_t> transpose_bytes(const std::vector<uint8_t>& in, uint64_t rows, uint64_t cols, uint64_t eb) {
  std::vector<uint8_t> out(in.size());
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t c = 0; c < cols; ++c) std::memcpy(out.data() + (c * rows + r) * eb, in.data() + (r * cols + c) * eb, eb);
  return out;
}

TEST(TritonWna16, WeightIsTheTransposedInt32ViewedAsBytes) {
  const TritonWna16WeightLayout layout;
  EXPECT_EQ(layout.name(), "vllm.wna16_triton_weight(transpose,int32_as_u8,e9d1398d9)");
  EXPECT_EQ(layout.packed_shape(std::vector<uint64_t>{16, 256}), (std::vector<uint64_t>{256, 64}));
  EXPECT_EQ(layout.packed_dtype(DType::I32), DType::U8);
  for (const auto& shape : std::vector<std::vector<uint64_t>>{{2, 3}, {16, 256}, {32, 96}, {5, 7}}) {
    SCOPED_TRACE(shape_string(shape));
    const OwnedTensor w = random_tensor(DType::I32, shape, shape[0] * 31 + shape[1]);
    // torch: [K/pf, N] int32 -> transpose -> [N, K/pf] int32 contiguous -> view(uint8) [N, 4K/pf]
    EXPECT_EQ(pack_all(layout, w), transpose_bytes(w.bytes, shape[0], shape[1], 4));
    testing::expect_round_trip(layout, DType::I32, shape, 3);
  }
  // The drawn example: packed row n = 1 starts with word (0, 1)'s bytes, then word (1, 1)'s.
  OwnedTensor w(DType::I32, {2, 3});
  for (uint64_t i = 0; i < w.bytes.size(); ++i) w.bytes[i] = static_cast<uint8_t>(i);
  const std::vector<uint8_t> p = pack_all(layout, w);
  EXPECT_EQ(std::vector<uint8_t>(p.begin() + 8, p.begin() + 16), (std::vector<uint8_t>{4, 5, 6, 7, 16, 17, 18, 19}));
}

TEST(TritonWna16, ZeroPointsFollowTheTorchOpSequence) {
  const TritonWna16ZeroPointLayout layout;
  for (const auto& shape : std::vector<std::vector<uint64_t>>{{1, 16}, {4, 32}, {2, 1}, {3, 5}}) {
    SCOPED_TRACE(shape_string(shape));
    const uint64_t G = shape[0], NP = shape[1];
    const OwnedTensor z = random_tensor(DType::I32, shape, G * 7 + NP);
    // transpose(1, 2).contiguous(): [NP, G] int32; view(uint8): [NP, 4G]; reshape(NP, G, 4);
    // permute(0, 2, 1): [NP, 4, G]; reshape(4NP, G).
    const std::vector<uint8_t> t = transpose_bytes(z.bytes, G, NP, 4);
    std::vector<uint8_t> expected(t.size());
    for (uint64_t p = 0; p < NP; ++p)
      for (uint64_t b = 0; b < 4; ++b)
        for (uint64_t g = 0; g < G; ++g) expected[(p * 4 + b) * G + g] = t[(p * G + g) * 4 + b];
    EXPECT_EQ(pack_all(layout, z), expected);
    EXPECT_EQ(layout.packed_shape(shape), (std::vector<uint64_t>{4 * NP, G}));
    testing::expect_round_trip(layout, DType::I32, shape, 9);
  }
}

TEST(TritonWna16, ScalesTransposeUnderItsOwnIdAndAllAreRegistered) {
  const XpuTransposeLayout scales(TransposeUse::wna16_triton_scales);
  EXPECT_EQ(scales.name(), "vllm.wna16_triton_transpose(e9d1398d9)");
  const OwnedTensor s = random_tensor(DType::BF16, {2, 64}, 4);
  EXPECT_EQ(pack_all(scales, s), transpose_bytes(s.bytes, 2, 64, 2));
  for (const char* id : {"vllm.wna16_triton_transpose(e9d1398d9)", "vllm.wna16_triton_weight(transpose,int32_as_u8,e9d1398d9)",
                         "vllm.wna16_triton_zero_points(transpose,int32_as_u8,e9d1398d9)", "vllm.xpu_transpose(e9d1398d9)"})
    EXPECT_NE(find_layout(id), nullptr) << id;
  testing::expect_dtype_refused(TritonWna16WeightLayout(), DType::U8, {4, 4});
}

}  // namespace
}  // namespace moepack::packers
