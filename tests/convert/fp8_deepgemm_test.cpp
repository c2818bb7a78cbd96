// vLLM's UE8M0 requantization of FP8 block weights for DeepGEMM (lib/convert/fp8_deepgemm.h):
// the worked example, the ceil at powers of two, the two stages agreeing, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>

#include "lib/convert/fp8_deepgemm.h"
#include "lib/convert/reductions.h"
#include "lib/core/codecs.h"
#include "lib/core/error.h"
#include "support/reduction_input.h"
#include "support/tensors.h"

namespace moepack::convert {
namespace {

constexpr auto f32 = test::f32_tensor;
constexpr auto floats = test::f32_values;
constexpr auto input_of = test::reduction_input;

constexpr const char* kWeightStage = "deep_gemm.requant_ue8m0(weight,block=128x128,vllm e9d1398d9)";
constexpr const char* kScaleStage = "deep_gemm.requant_ue8m0(scale,block=128x128,vllm e9d1398d9)";

TEST(Fp8DeepGemm, WorkedExample) {
  OwnedTensor w(DType::F8_E4M3, {2, 2});
  w.bytes = {0x38, 0xC0, 0x00, 0x7E};  // 1, -2, 0, 448
  const Ue8m0Requant r = requant_ue8m0(w, f32({1, 1}, {0.3f}), "w", "s");
  EXPECT_EQ(r.codes, (std::vector<uint8_t>{0x32, 0xBA, 0x00, 0x78}));
  EXPECT_EQ(r.scales, (std::vector<float>{0.5f}));
}

TEST(Fp8DeepGemm, CeilToUe8m0AtPowersOfTwo) {
  EXPECT_EQ(ceil_to_ue8m0(0.125f), 0.125f);
  EXPECT_EQ(ceil_to_ue8m0(std::nextafter(0.125f, 1.0f)), 0.25f);
  // 2^-9 (1 + 2^-23): log2 rounds to -9 in fp32 (vLLM's result on the CPU; DeepGEMM's bit test gives 2^-8).
  EXPECT_EQ(ceil_to_ue8m0(std::nextafter(std::ldexp(1.0f, -9), 1.0f)), std::ldexp(1.0f, -9));
  EXPECT_EQ(ceil_to_ue8m0(0.3f), 0.5f);
  EXPECT_EQ(ceil_to_ue8m0(1e-4f / 448.0f), std::ldexp(1.0f, -22));
}

// Measured on an H100 with vLLM's compiled cast: amax 0.006835939362645149 (2 ulps above
// 448 * 2^-16) gets 2^-15, where a true division amax / 448 would give 2^-16.
TEST(Fp8DeepGemm, BlockScaleMultipliesByTheFp32Reciprocal) {
  const float amax = 0.006835939362645149f;
  EXPECT_EQ(ue8m0_block_scale(amax), std::ldexp(1.0f, -15));
  EXPECT_EQ(ceil_to_ue8m0(amax / 448.0f), std::ldexp(1.0f, -16));
  EXPECT_EQ(ue8m0_block_scale(0.0f), std::ldexp(1.0f, -22));
  EXPECT_EQ(ue8m0_block_scale(448.0f), 1.0f);
}

TEST(Fp8DeepGemm, TinyBlocksClampTo1e4) {
  OwnedTensor w(DType::F8_E4M3, {1, 3});
  w.bytes = {0x00, 0x80, 0x08};  // 0, -0, 2^-6 (1/64)
  const Ue8m0Requant r = requant_ue8m0(w, f32({1, 1}, {1e-6f}), "w", "s");
  // amax 1.5625e-8 < 1e-4: s' = 2^ceil(log2(1e-4 / 448)) = 2^-22, and 1/64 * 1e-6 * 2^22 = 0.0655.
  EXPECT_EQ(r.scales, (std::vector<float>{std::ldexp(1.0f, -22)}));
  EXPECT_EQ(r.codes[0], 0x00);
  EXPECT_EQ(r.codes[1], 0x80);  // the sign of zero survives
  EXPECT_EQ(r.codes[2], float_to_e4m3(e4m3_to_float(0x08) * 1e-6f * std::ldexp(1.0f, 22)));
}

// An awkward shape (partial blocks on both axes): every block requantized on its own, the new
// weight times the new scale close to the old one, the block's largest value at most 448.
TEST(Fp8DeepGemm, BlocksAreIndependentAndKeepTheValues) {
  const uint64_t M = 130, K = 257;
  OwnedTensor w(DType::F8_E4M3, {M, K});
  for (uint64_t i = 0; i < M * K; ++i) {
    uint8_t c = static_cast<uint8_t>((i * 2654435761u) >> 7);
    if ((c & 0x7F) == 0x7F) c ^= 0x01;
    w.bytes[i] = c;
  }
  const std::vector<float> old = {0.001f, 0.5f, 3.0f, 1e-3f, 7.25f, 0.0625f};
  const Ue8m0Requant r = requant_ue8m0(w, f32({2, 3}, old), "w", "s");
  ASSERT_EQ(r.scales.size(), 6u);
  for (uint64_t b = 0; b < 6; ++b) {
    int e = 0;
    EXPECT_EQ(std::frexp(r.scales[b], &e), 0.5f) << "power of two";
  }
  for (uint64_t i = 0; i < M; ++i)
    for (uint64_t j = 0; j < K; ++j) {
      const uint64_t b = (i / 128) * 3 + j / 128;
      const float before = e4m3_to_float(w.bytes[i * K + j]) * old[b];
      const float after = e4m3_to_float(r.codes[i * K + j]) * r.scales[b];
      EXPECT_LE(std::fabs(after - before), std::fabs(before) * 0.0625f + r.scales[b] * std::ldexp(1.0f, -9)) << i << ", " << j;
    }
}

TEST(Fp8DeepGemm, StagesAgreeOnEveryExpert) {
  const ValueStage* ws = find_value_stage(kWeightStage);
  const ValueStage* ss = find_value_stage(kScaleStage);
  ASSERT_NE(ws, nullptr);
  ASSERT_NE(ss, nullptr);
  OwnedTensor w0(DType::F8_E4M3, {2, 2}), w1(DType::F8_E4M3, {2, 2});
  w0.bytes = {0x38, 0xC0, 0x00, 0x7E};
  w1.bytes = {0x7E, 0x00, 0x00, 0x00};
  std::map<std::string, std::vector<OwnedTensor>> params = {{"w13_weight", {w0, w1}},
                                                            {"w13_weight_scale_inv", {f32({1, 1}, {0.3f}), f32({1, 1}, {0.125f})}}};
  auto pw = ws->prepare(input_of("w13_weight", params));
  auto ps = ss->prepare(input_of("w13_weight_scale_inv", params));
  OwnedTensor a = w0, b = w1, sa = f32({1, 1}, {0.3f}), sb = f32({1, 1}, {0.125f});
  pw.change(0, a);
  pw.change(1, b);
  ps.change(0, sa);
  ps.change(1, sb);
  EXPECT_EQ(a.bytes, (std::vector<uint8_t>{0x32, 0xBA, 0x00, 0x78}));
  EXPECT_EQ(floats(sa), (std::vector<float>{0.5f}));
  EXPECT_EQ(b.bytes, w1.bytes);  // 448 * 0.125 = 56: amax / 448 is 2^-3 exactly, nothing moves
  EXPECT_EQ(floats(sb), (std::vector<float>{0.125f}));
  EXPECT_EQ(pw.multiplier(0, 1.0f), 1.0f);
}

TEST(Fp8DeepGemm, BadInputNamesTheParam) {
  OwnedTensor w(DType::F8_E4M3, {1, 2});
  w.bytes = {0x38, 0x7F};
  try {
    requant_ue8m0(w, f32({1, 1}, {1.0f}), "layer L, expert 3, w2_weight", "s");
    FAIL() << "a NaN code was requantized";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::bad_input);
    EXPECT_NE(std::string(e.what()).find("expert 3, w2_weight"), std::string::npos) << e.what();
  }
  w.bytes = {0x38, 0x38};
  for (float bad : {0.0f, -1.0f, INFINITY, NAN}) {
    try {
      requant_ue8m0(w, f32({1, 1}, {bad}), "w", "layer L, expert 0, w2_weight_scale_inv");
      FAIL() << "scale " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::bad_input);
      EXPECT_NE(std::string(e.what()).find("w2_weight_scale_inv"), std::string::npos) << e.what();
    }
  }
}

// SM100: the header's worked example (s' = 0.5, E8M0 126) broadcast to both rows of the 2-row
// weight, packed four bytes per int32 along the groups, MN padded to 4 rows.
TEST(Fp8DeepGemm, Sm100ScalesBroadcastRowsAndPackUe8m0) {
  const std::string inner = "deep_gemm.transform_sf_into_required_layout(recipe=1x128x128,sm100,packed_ue8m0,mn_major,8b1392b9)";
  const auto d = make_deepgemm_sm100_scales("w13_weight_scale_inv", "deep_gemm.fp8_block_scales(requant_ue8m0,broadcast_rows,vllm e9d1398d9) | " + inner);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->inputs(), (std::vector<std::string>{"w13_weight_scale_inv", "w13_weight"}));
  OwnedTensor w(DType::F8_E4M3, {2, 2});
  w.bytes = {0x38, 0xC0, 0x00, 0x7E};
  const std::vector<OwnedTensor> in = {f32({1, 1}, {0.3f}), w};
  RankGeometry g;
  std::vector<uint8_t> out(byte_size(d->dtype(), d->slab_shape(in, g)));
  EXPECT_EQ(d->slab_shape(in, g), (std::vector<uint64_t>{1, 4}));  // [ceil(1/4), round_up(2, 4)]
  d->produce(in, g, out, "layer L expert 0");
  EXPECT_EQ(out, (std::vector<uint8_t>{126, 0, 0, 0, 126, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(d->unpacked(in, g)->shape, (std::vector<uint64_t>{2, 1}));
  EXPECT_EQ(d->reference_stage(RankGeometry{}), "deep_gemm.requant_ue8m0(scale,block=128x128,vllm e9d1398d9)");
}

}  // namespace
}  // namespace moepack::convert
