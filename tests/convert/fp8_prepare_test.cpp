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

// MI300 (E4M3FNUZ): the requantization reads FNUZ codes (normalized, scales already doubled by
// the loader), clamps to vLLM's 224 and writes FNUZ codes with HIP's rounding.
TEST(Fp8Prepare, RequantizationInFnuz) {
  const ValueStage* stage = find_value_stage("vllm.fp8_requant_w13_max_scale(e9d1398d9)");
  // The FN example above, normalized: scales 0.5, 2 doubled to 1, 4 (m = 4).
  auto prepared = stage->prepare(input_of("w13_weight", {{"w13_weight_scale", {f32({2}, {1.0f, 4.0f}), f32({2}, {0.6f, 2.0f})}}}));
  EXPECT_EQ(prepared.multiplier(0, 1.0f), 4.0f);
  OwnedTensor w(DType::F8_E4M3FNUZ, {2, 2});  // rows: gate, up
  w.bytes = {0x40, 0xC0, 0x40, 0x00};          // FNUZ 1.0, -1.0 | 1.0, 0 (FN 0x38's bits read as FNUZ are 0.5)
  prepared.change(0, w);
  // Gate: fp16(1.0 * 1) / 4 = 0.25 -> FNUZ 0x30; the up shard keeps its codes.
  EXPECT_EQ(w.bytes, (std::vector<uint8_t>{0x30, 0xB0, 0x40, 0x00}));
  EXPECT_EQ(w.dtype, DType::F8_E4M3FNUZ);
  // 1.375 (0x43) * fp16(0.6f) = 0.8251953125 (fp16: 0.6f rounds to 0.60009765625), / 2 = 0.41259765625
  // -> FNUZ 0.40625 (0x2D's FN bits are 0x35 in FNUZ): the FN example's code moved by one exponent.
  OwnedTensor v(DType::F8_E4M3FNUZ, {2, 1});
  v.bytes = {0x43, 0x43};
  prepared.change(1, v);
  EXPECT_EQ(v.bytes, (std::vector<uint8_t>{0x35, 0x43}));
  // The bound is 224, not 240: 240 (0x7F) times 1 over m = 1 clamps to 224 (0x7E).
  auto one = stage->prepare(input_of("w13_weight", {{"w13_weight_scale", {f32({2}, {1.0f, 1.0f})}}}));
  OwnedTensor top(DType::F8_E4M3FNUZ, {2, 1});
  top.bytes = {0x7F, 0xFF};
  one.change(0, top);
  EXPECT_EQ(top.bytes, (std::vector<uint8_t>{0x7E, 0xFE}));
  // A negative value that rounds to zero is 0x00 (FNUZ has no -0; 0x80 is its NaN).
  auto tiny = stage->prepare(input_of("w13_weight", {{"w13_weight_scale", {f32({2}, {1.0f, 4096.0f})}}}));
  OwnedTensor z(DType::F8_E4M3FNUZ, {2, 1});
  z.bytes = {0x81, 0x40};  // -2^-10 in the gate shard: -2^-10 / 4096 rounds to zero
  tiny.change(0, z);
  EXPECT_EQ(z.bytes[0], 0x00);
}

// normalize_e4m3fn_to_e4m3fnuz in the loader: weights F8_E4M3FNUZ with 0x80 made 0x00, on every
// path (one whole rank, or sliced); weight and input scales doubled in fp32.
TEST(Fp8Prepare, FnuzLoaderNormalizesWeightsAndDoublesScales) {
  for (uint64_t tp : {1u, 2u}) {
    SCOPED_TRACE("tp " + std::to_string(tp));
    RankGeometry g{.hidden = 2, .intermediate = 2, .padded_hidden = 2, .padded_intermediate = 2 / tp, .tp_size = tp, .tp_rank = 0};
    g.fp8_scales = true;
    g.fp8_fnuz = true;
    OwnedTensor w2(DType::F8_E4M3, {2, 2});
    w2.bytes = {0x80, 0x38, 0xB8, 0x80};
    const OwnedTensor held = load_expert_param("w2_weight", OwnedTensor(w2), g);
    EXPECT_EQ(held.dtype, DType::F8_E4M3FNUZ);
    EXPECT_EQ(held.bytes, tp == 1 ? (std::vector<uint8_t>{0x00, 0x38, 0xB8, 0x00}) : (std::vector<uint8_t>{0x00, 0xB8}));
    OwnedTensor w13(DType::F8_E4M3, {4, 2});  // gate rows 0-1, up rows 2-3; rank 0 of 2 takes rows 0 and 2
    w13.bytes = {0x80, 0x01, 0x02, 0x03, 0x04, 0x05, 0x80, 0x07};
    EXPECT_EQ(load_expert_param("w13_weight", w13, g).bytes,
              tp == 1 ? (std::vector<uint8_t>{0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x00, 0x07}) : (std::vector<uint8_t>{0x00, 0x01, 0x04, 0x05}));
    EXPECT_EQ(floats(load_expert_param("w13_weight_scale", bf16({2}, {0.5f, 0.75f}), g)), (std::vector<float>{1.0f, 1.5f}));
    EXPECT_EQ(floats(load_expert_param("w2_input_scale", f32({}, {0.125f}), g)), (std::vector<float>{0.25f}));
  }
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

// Block scales stored as E8M0 (DeepSeek's UE8M0 scale format): vLLM's MoE scale parameters are
// fp32 and the loader's copy_ widens them, 2^(e - 127).
TEST(Fp8Prepare, E8m0BlockScalesWidenToPowersOfTwo) {
  RankGeometry g{.hidden = 256, .intermediate = 256, .padded_hidden = 256, .padded_intermediate = 256, .tp_size = 1, .tp_rank = 0};
  g.fp8_scales = true;
  g.fp8_block_n = g.fp8_block_k = 128;
  OwnedTensor s(DType::F8_E8M0, {4, 2});
  s.bytes = {127, 126, 128, 0, 120, 254, 127, 127};
  const OwnedTensor w = load_expert_param("w13_weight_scale_inv", s, g);
  EXPECT_EQ(w.dtype, DType::F32);
  EXPECT_EQ(floats(w), (std::vector<float>{1.0f, 0.5f, 2.0f, std::ldexp(1.0f, -127), std::ldexp(1.0f, -7), std::ldexp(1.0f, 127), 1.0f, 1.0f}));
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
