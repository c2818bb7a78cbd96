// FP8 per-tensor requantization, the per-expert w13 maximum, the whole-layer input-scale maximum
// and the FP8 scale loader, on hand-computed values (lib/convert/fp8_prepare.h's examples).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>

#include "lib/convert/fp8_prepare.h"
#include "lib/core/codecs.h"
#include "lib/core/error.h"
#include "support/reduction_input.h"
#include "support/tensors.h"

namespace moepack::convert {
namespace {

constexpr auto f32 = test::f32_tensor;
constexpr auto bf16 = test::bf16_tensor;
constexpr auto floats = test::f32_values;
constexpr auto input_of = test::reduction_input;

TEST(Fp8Prepare, W13MaxScalePerExpert) {
  const LayerReduction* r = find_reduction("vllm.fp8_w13_max_scale(e9d1398d9)");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->shape(3), (std::vector<uint64_t>{3}));
  std::vector<float> out(3);
  r->reduce(input_of("w13_weight_scale", {{"w13_weight_scale", {f32({2}, {0.5f, 2.0f}), f32({2}, {0.25f, 0.125f}), f32({2}, {3.0f, 3.0f})}}}),
            std::span<uint8_t>(reinterpret_cast<uint8_t*>(out.data()), 12));
  EXPECT_EQ(out, (std::vector<float>{2.0f, 0.25f, 3.0f}));
}

TEST(Fp8Prepare, RequantizationWorkedExamples) {
  const ValueStage* stage = find_value_stage("vllm.fp8_requant_w13_max_scale(e9d1398d9)");
  ASSERT_NE(stage, nullptr);
  // Expert 0: s1 = 0.5, s3 = 2 -> m = 2. Expert 1: s1 = 0.3f, s3 = 1 -> m = 1.
  auto prepared = stage->prepare(input_of("w13_weight", {{"w13_weight_scale", {f32({2}, {0.5f, 2.0f}), f32({2}, {0.3f, 1.0f})}}}));
  EXPECT_EQ(prepared.multiplier(0, 1.0f), 2.0f);
  EXPECT_EQ(prepared.multiplier(1, 1.0f), 1.0f);
  OwnedTensor w(DType::F8_E4M3, {2, 2});  // rows: gate, up
  w.bytes = {0x38, 0xB8, 0x38, 0x00};      // 1.0, -1.0 | 1.0, 0
  prepared.change(0, w);
  EXPECT_EQ(w.bytes, (std::vector<uint8_t>{0x28, 0xA8, 0x38, 0x00}));  // 0.25, -0.25 | unchanged
  OwnedTensor v(DType::F8_E4M3, {2, 1});
  v.bytes = {0x3B, 0x3B};  // 1.375 in both shards
  prepared.change(1, v);
  // Gate: fp16(1.375 * 0.3f) = 0.41259765625 -> E4M3 0.40625 (0x2D). Up: 1.375 * 1 stays.
  EXPECT_EQ(v.bytes, (std::vector<uint8_t>{0x2D, 0x3B}));
  // The scale is rounded to fp16 before the multiply (torch: fp16 tensor times a 0-dim fp32 CUDA
  // tensor, checked on an H100): s1 = 0x3BB12F3B (0.0054072416), m = 0x3C28AF81 (0.01029575);
  // q = 0x12 becomes 0x0A, where an fp32 scale would give 0x0B.
  auto rounded = stage->prepare(input_of("w13_weight", {{"w13_weight_scale", {f32({2}, {std::bit_cast<float>(0x3BB12F3Bu), std::bit_cast<float>(0x3C28AF81u)})}}}));
  OwnedTensor r(DType::F8_E4M3, {2, 1});
  r.bytes = {0x12, 0x38};
  rounded.change(0, r);
  EXPECT_EQ(r.bytes[0], 0x0A);
  // fp16 overflow of q * s (448 * 512 > 65504) is clamped to 448 like the kernel's fminf.
  auto big = stage->prepare(input_of("w13_weight", {{"w13_weight_scale", {f32({2}, {512.0f, 1.0f})}}}));
  OwnedTensor o(DType::F8_E4M3, {2, 1});
  o.bytes = {0x7E, 0x38};
  big.change(0, o);
  // Gate: fp16(448 * 512) is inf, times 1/512 still inf, clamped to 448. Up: 1 * 1 / 512 = 2^-9,
  // the smallest E4M3 subnormal.
  EXPECT_EQ(o.bytes, (std::vector<uint8_t>{0x7E, 0x01}));
}

TEST(Fp8Prepare, NonPositiveOrNonFiniteScalesAreBadInput) {
  const ValueStage* stage = find_value_stage("vllm.fp8_requant_w13_max_scale(e9d1398d9)");
  for (float bad : {0.0f, -1.0f, std::nanf(""), INFINITY}) {
    try {
      stage->prepare(input_of("w13_weight", {{"w13_weight_scale", {f32({2}, {1.0f, bad})}}}));
      ADD_FAILURE() << "expected bad input for " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 4);
      EXPECT_NE(std::string(e.what()).find("expert 0, w13_weight_scale"), std::string::npos) << e.what();
    }
  }
}

TEST(Fp8Prepare, InputScaleMaximumOverTheRankOrTheLayer) {
  const LayerReduction* rank = find_reduction("vllm.max_over_experts(f32)");
  const LayerReduction* layer = find_reduction("vllm.max_over_experts(f32,all_experts)");
  ASSERT_NE(rank, nullptr);
  ASSERT_NE(layer, nullptr);
  // Two experts on this rank (0.25, 0.5); the layer's other experts reach 4.
  ReductionInput in;
  in.role = "w13_input_scale";
  in.local_experts = 2;
  in.each = [](const std::string&, bool whole, const std::function<void(uint64_t, const OwnedTensor&)>& fn) {
    fn(0, f32({}, {0.25f}));
    fn(1, f32({}, {0.5f}));
    if (whole) fn(2, f32({}, {4.0f}));
  };
  float a = 0, b = 0;
  rank->reduce(in, std::span<uint8_t>(reinterpret_cast<uint8_t*>(&a), 4));
  layer->reduce(in, std::span<uint8_t>(reinterpret_cast<uint8_t*>(&b), 4));
  EXPECT_EQ(a, 0.5f);
  EXPECT_EQ(b, 4.0f);
}

// FlashInfer CUTLASS per-tensor: g1_alphas[e] = max(s1, s3)[e] * max(a13), g2_alphas[e] = s2[e] *
// max(a2), one fp32 multiply each (the input maximum over the rank's experts, or the layer's).
TEST(Fp8Prepare, FlashInferCutlassAlphasAreWeightScaleTimesInputMaximum) {
  const LayerReduction* g1 = find_reduction("vllm.fp8_fi_cutlass_alphas(gemm1,e9d1398d9)");
  const LayerReduction* g2 = find_reduction("vllm.fp8_fi_cutlass_alphas(gemm2,e9d1398d9)");
  const LayerReduction* g1_layer = find_reduction("vllm.fp8_fi_cutlass_alphas(gemm1,all_experts,e9d1398d9)");
  ASSERT_NE(g1, nullptr);
  ASSERT_NE(g2, nullptr);
  ASSERT_NE(g1_layer, nullptr);
  EXPECT_TRUE(g1->reads_other_roles());
  EXPECT_EQ(g1->shape(2), (std::vector<uint64_t>{2}));
  // 0.1f * 3 rounds in fp32 (to 0x3E99999A): the alpha is that product, not 0.3 computed otherwise.
  const float a13_max = 3.0f, s = 0.1f;
  ReductionInput in;
  in.role = "g1_alphas";
  in.local_experts = 2;
  in.each = [&](const std::string& role, bool whole, const std::function<void(uint64_t, const OwnedTensor&)>& fn) {
    if (role == "w13_input_scale") {
      fn(0, f32({}, {0.5f}));
      fn(1, f32({}, {a13_max}));
      if (whole) fn(2, f32({}, {8.0f}));
    } else if (role == "w2_input_scale") {
      fn(0, f32({}, {0.25f}));
      fn(1, f32({}, {0.125f}));
    } else if (role == "w13_weight_scale") {
      fn(0, f32({2}, {s, 0.05f}));
      fn(1, f32({2}, {0.5f, 2.0f}));
    } else if (role == "w2_weight_scale") {
      fn(0, f32({}, {0.75f}));
      fn(1, f32({}, {3.0f}));
    }
  };
  in.where = [](const std::string& r, uint64_t e) { return "expert " + std::to_string(e) + ", " + r; };
  std::vector<float> out(2);
  const auto bytes = [&] { return std::span<uint8_t>(reinterpret_cast<uint8_t*>(out.data()), 8); };
  g1->reduce(in, bytes());
  EXPECT_EQ(std::bit_cast<uint32_t>(out[0]), std::bit_cast<uint32_t>(s * a13_max));
  EXPECT_EQ(out[1], 6.0f);
  g1_layer->reduce(in, bytes());
  EXPECT_EQ(out[1], 16.0f);
  in.role = "g2_alphas";
  g2->reduce(in, bytes());
  EXPECT_EQ(out, (std::vector<float>{0.1875f, 0.75f}));
}

TEST(Fp8Prepare, ScaleLoaderSlicesBlocksAndChannelsAndWidens) {
  RankGeometry g{.hidden = 256, .intermediate = 512, .padded_hidden = 256, .padded_intermediate = 256, .tp_size = 2, .tp_rank = 1};
  g.fp8_scales = true;
  g.fp8_block_n = g.fp8_block_k = 128;
  // w13 block scales [2 * 4, 2]: value = 10 * row + col. Rank 1 takes gate blocks 2, 3 and up 6, 7.
  std::vector<float> v13;
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 2; ++c) v13.push_back(static_cast<float>(10 * r + c));
  const OwnedTensor w13 = load_expert_param("w13_weight_scale_inv", bf16({8, 2}, v13), g);
  EXPECT_EQ(w13.dtype, DType::F32);
  ASSERT_EQ(w13.shape, (std::vector<uint64_t>{4, 2}));
  EXPECT_EQ(floats(w13), (std::vector<float>{20, 21, 30, 31, 60, 61, 70, 71}));
  // w2 block scales [2, 4]: rank 1 takes block columns 2, 3.
  const OwnedTensor w2 = load_expert_param("w2_weight_scale_inv", f32({2, 4}, {0, 1, 2, 3, 10, 11, 12, 13}), g);
  ASSERT_EQ(w2.shape, (std::vector<uint64_t>{2, 2}));
  EXPECT_EQ(floats(w2), (std::vector<float>{2, 3, 12, 13}));
  // Per-channel (no block): w13 [2I, 1] rows of the rank's halves; w2 [H, 1] whole.
  g.fp8_block_n = g.fp8_block_k = 0;
  std::vector<float> ch(1024);
  for (size_t i = 0; i < ch.size(); ++i) ch[i] = static_cast<float>(i);
  const OwnedTensor c13 = load_expert_param("w13_weight_scale", f32({1024, 1}, ch), g);
  ASSERT_EQ(c13.shape, (std::vector<uint64_t>{512, 1}));
  EXPECT_EQ(floats(c13)[0], 256.0f);
  EXPECT_EQ(floats(c13)[256], 768.0f);
  EXPECT_EQ(load_expert_param("w2_weight_scale", f32({256, 1}, std::vector<float>(256, 2.0f)), g).shape, (std::vector<uint64_t>{256, 1}));
  // Per-tensor [2] and input scales: whole, widened.
  EXPECT_EQ(floats(load_expert_param("w13_weight_scale", bf16({2}, {0.5f, 0.75f}), g)), (std::vector<float>{0.5f, 0.75f}));
}

TEST(Fp8Prepare, BlockSlicesVllmRejectsAreRefusedWithItsMessage) {
  RankGeometry g{.hidden = 256, .intermediate = 256, .padded_hidden = 256, .padded_intermediate = 64, .tp_size = 4, .tp_rank = 0};
  g.fp8_scales = true;
  g.fp8_block_n = g.fp8_block_k = 128;
  try {
    load_expert_param("w13_weight_scale", f32({4, 2}, std::vector<float>(8, 1.0f)), g);
    ADD_FAILURE() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 3);
    EXPECT_NE(std::string(e.what()).find("The output_size of gate's and up's weight = 64 is not divisible by weight quantization block_n = 128"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace moepack::convert
