// FlashInfer TRT-LLM-gen MXFP4 layouts: row maps pinned to layouts-fp4.md 5.1/5.4, the shuffle
// rebuilt the way FlashInfer builds it, the f32 bias, refusals. (Bulk pack against the index map
// and round trips: layout_contract_test.cpp.)
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "lib/core/codecs.h"
#include "lib/core/error.h"
#include "tests/packers/flashinfer_test_support.h"
#include "packers/flashinfer_trtllm_mxfp4.h"
#include "packers/registry.h"

namespace moepack::packers {
namespace {


using namespace fi_test;

// FlashInfer's own construction (get_shuffle_matrix_a_row_indices): a forward map of old rows to
// new rows inside blocks of 32, inverted into row_indices[new] = old.
std::vector<uint64_t> flashinfer_shuffle_row_indices(uint64_t rows) {
  const uint64_t src_to_dst[32] = {0, 8, 16, 24, 1, 9, 17, 25, 2, 10, 18, 26, 3, 11, 19, 27,
                                   4, 12, 20, 28, 5, 13, 21, 29, 6, 14, 22, 30, 7, 15, 23, 31};
  std::vector<uint64_t> indices(rows);
  for (uint64_t old_row = 0; old_row < rows; ++old_row) indices[(old_row / 32) * 32 + src_to_dst[old_row % 32]] = old_row;
  return indices;
}

TEST(FlashinferTrtllmMxfp4, ShuffleMatchesFlashinferConstruction) {
  const FlashinferTrtllmMxfp4Layout w2(TrtllmTensor::weight, RowOrder::identity);
  for (uint64_t rows : {32u, 96u, 256u}) {
    const std::vector<uint64_t> expected = flashinfer_shuffle_row_indices(rows);
    for (uint64_t r = 0; r < rows; ++r) EXPECT_EQ(w2.source_row(r, rows), expected[r]) << r;
  }
}

TEST(FlashinferTrtllmMxfp4, RowMapsPinnedToSpecExamples) {
  const FlashinferTrtllmMxfp4Layout w2(TrtllmTensor::weight, RowOrder::identity);
  const FlashinferTrtllmMxfp4Layout gpt_oss(TrtllmTensor::weight, RowOrder::swap_pairs);
  const FlashinferTrtllmMxfp4Layout generic(TrtllmTensor::weight, RowOrder::w3w1_interleave);
  const std::vector<uint64_t> s = {0, 4, 8, 12, 16, 20, 24, 28, 1, 5};
  const std::vector<uint64_t> g = {1, 5, 9, 13, 17, 21, 25, 29, 0, 4};              // S(r) XOR 1
  const std::vector<uint64_t> w = {128, 130, 132, 134, 136, 138, 140, 142, 0, 2};  // I = 128
  for (uint64_t r = 0; r < 10; ++r) {
    EXPECT_EQ(w2.source_row(r, 256), s[r]);
    EXPECT_EQ(gpt_oss.source_row(r, 256), g[r]);
    EXPECT_EQ(generic.source_row(r, 256), w[r]);
  }
}

// The generic order equals FlashInfer's reorder_rows_for_gated_act_gemm applied to [w3; w1]
// (G(r) = r/2 for even r, M/2 + r/2 for odd r), which is how vLLM describes it.
TEST(FlashinferTrtllmMxfp4, W3W1InterleaveIsGatedActReorderOfSwappedHalves) {
  const uint64_t rows = 64, half = 32;
  for (uint64_t r = 0; r < rows; ++r) {
    const uint64_t g = (r % 2 == 0) ? r / 2 : half + r / 2;           // row of [w3; w1]
    const uint64_t in_w13 = g < half ? g + half : g - half;          // that row in [w1; w3]
    EXPECT_EQ(row_order_source(RowOrder::w3w1_interleave, r, rows), in_w13) << r;
  }
}

TEST(FlashinferTrtllmMxfp4, BiasWidenedToF32AndShuffled) {
  const FlashinferTrtllmMxfp4Layout layout(TrtllmTensor::bias, RowOrder::swap_pairs);
  const OwnedTensor canonical = random_bf16_bias(64, 11);
  EXPECT_EQ(layout.packed_dtype(DType::BF16), DType::F32);
  const std::vector<uint8_t> packed = pack(layout, canonical);
  ASSERT_EQ(packed.size(), 64u * 4);
  for (uint64_t r = 0; r < 64; ++r) {
    float got;
    std::memcpy(&got, packed.data() + 4 * r, 4);
    uint16_t h;
    std::memcpy(&h, canonical.bytes.data() + 2 * layout.source_row(r, 64), 2);
    EXPECT_EQ(got, bf16_to_float(h)) << r;
  }
  expect_round_trip(layout, canonical);
}

TEST(FlashinferTrtllmMxfp4, RefusesShapesUpstreamCannotTake) {
  expect_refused(FlashinferTrtllmMxfp4Layout(TrtllmTensor::weight, RowOrder::identity), DType::U8, {48, 8});
  expect_refused(FlashinferTrtllmMxfp4Layout(TrtllmTensor::scale, RowOrder::swap_pairs), DType::U8, {64, 4});
  expect_refused(FlashinferTrtllmMxfp4Layout(TrtllmTensor::scale, RowOrder::swap_pairs), DType::U8, {128, 6});
  expect_refused(FlashinferTrtllmMxfp4Layout(TrtllmTensor::bias, RowOrder::identity), DType::F32, {20});
  expect_refused(FlashinferTrtllmMxfp4Layout(TrtllmTensor::bias, RowOrder::identity), DType::U8, {32}, false);
  expect_refused(FlashinferTrtllmMxfp4Layout(TrtllmTensor::weight, RowOrder::identity), DType::BF16, {32, 8}, false);
}

TEST(FlashinferTrtllmMxfp4, NamesAndDtypes) {
  // vLLM views the swizzled E8M0 scales as float8_e4m3fn; the bytes stay E8M0 codes.
  EXPECT_EQ(FlashinferTrtllmMxfp4Layout(TrtllmTensor::scale, RowOrder::identity).packed_dtype(DType::U8), DType::F8_E4M3);
  EXPECT_EQ(FlashinferTrtllmMxfp4Layout(TrtllmTensor::weight, RowOrder::swap_pairs).name(),
            "flashinfer.trtllm_shuffle_matrix_a(rows=swap_pairs,epilogue_tile_m=128,v0.6.17)");
  EXPECT_EQ(FlashinferTrtllmMxfp4Layout(TrtllmTensor::scale, RowOrder::identity).name(),
            "flashinfer.trtllm_shuffle_matrix_sf_a(rows=identity,epilogue_tile_m=128,sf=128x4,v0.6.17)");
  EXPECT_EQ(FlashinferTrtllmMxfp4Layout(TrtllmTensor::bias, RowOrder::w3w1_interleave).name(),
            "flashinfer.trtllm_shuffle_bias(rows=w3w1_interleave,epilogue_tile_m=128,f32,v0.6.17)");
}

// MXFP8's scales (flashinfer_utils.py `_shuffle_mxfp8_moe_weights`) stay uint8: the same bytes
// under a `u8` id with a U8 packed dtype.
TEST(FlashinferTrtllmMxfp4, Mxfp8ScalesKeepUint8) {
  const FlashinferTrtllmMxfp4Layout e4m3(TrtllmTensor::scale, RowOrder::w3w1_interleave);
  const FlashinferTrtllmMxfp4Layout u8(TrtllmTensor::scale, RowOrder::w3w1_interleave, TrtllmScaleDtype::u8);
  EXPECT_EQ(u8.packed_dtype(DType::U8), DType::U8);
  EXPECT_EQ(u8.name(), "flashinfer.trtllm_shuffle_matrix_sf_a(rows=w3w1_interleave,epilogue_tile_m=128,sf=128x4,u8,v0.6.17)");
  ASSERT_NE(find_layout(u8.name()), nullptr);
  std::vector<uint8_t> canonical(256 * 4);
  for (size_t i = 0; i < canonical.size(); ++i) canonical[i] = static_cast<uint8_t>(i * 37 + 11);
  const std::vector<uint64_t> shape{256, 4};
  std::vector<uint8_t> a(canonical.size()), b(canonical.size());
  e4m3.pack(TensorView{DType::U8, shape, canonical}, a);
  u8.pack(TensorView{DType::U8, shape, canonical}, b);
  EXPECT_EQ(a, b);
}

TEST(FlashinferTrtllmMxfp4, Gemm1ScalarsArePerExpertF32) {
  const TrtllmGemm1Scalars s = trtllm_mxfp4_gemm1_scalars(3, 1.702f, 1.0f, std::nullopt);
  ASSERT_TRUE(s.alpha && s.beta);
  EXPECT_FALSE(s.clamp_limit);
  EXPECT_EQ(s.alpha->dtype, DType::F32);
  EXPECT_EQ(s.alpha->shape, std::vector<uint64_t>{3});
  for (uint64_t e = 0; e < 3; ++e) {
    float a, b;
    std::memcpy(&a, s.alpha->bytes.data() + 4 * e, 4);
    std::memcpy(&b, s.beta->bytes.data() + 4 * e, 4);
    EXPECT_EQ(a, 1.702f);
    EXPECT_EQ(b, 1.0f);
  }
}

}  // namespace
}  // namespace moepack::packers
