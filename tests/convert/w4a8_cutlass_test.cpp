// CUTLASS W4A8 FP8 scales (lib/convert/w4a8_cutlass.h) against a loop transliteration of vLLM's
// steps: dynamic_per_token_scaled_fp8_quant (absmax, fp32 division, clamp, round-to-nearest-even
// satfinite E4M3) and `(fp8.float() / 8.0).to(float8_e4m3fn)`, with E4M3 rounding done here by
// searching the code table; the derivations' slabs, the reference's value stage, refusals.
#include "lib/convert/w4a8_cutlass.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "lib/core/codecs.h"
#include "lib/core/error.h"
#include "packers/cutlass_w4a8.h"
#include "packers/registry.h"
#include "support/tensors.h"

namespace moepack::convert {
namespace {

constexpr auto f32 = test::f32_tensor;
constexpr const char* kGroup =
    "vllm.w4a8_fp8_group_scales(quant_fp8=cuda_kernel,e9d1398d9) | vllm.cutlass_pack_scale_fp8(permute=0,2,1,int4b_t,cutlass v4.4.2,e9d1398d9)";
constexpr const char* kChannel = "vllm.w4a8_fp8_channel_scales(quant_fp8=cuda_kernel,e9d1398d9) | vllm.unchanged";

// Round to the nearest finite E4M3 value, ties to the even code, by search (values in range).
uint8_t nearest_e4m3(float v) {
  const uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
  const double a = std::fabs(static_cast<double>(v));
  uint8_t best = 0;
  double best_d = a;
  for (uint8_t c = 1; c <= 0x7E; ++c) {
    const double d = std::fabs(static_cast<double>(e4m3_to_float(c)) - a);
    if (d < best_d || (d == best_d && (c & 1) == 0)) {
      best = c;
      best_d = d;
    }
  }
  return static_cast<uint8_t>(sign | best);
}

struct RowExpect {
  std::vector<uint8_t> s8;
  float channel;
};

// The kernel on one row, then vLLM's recast; values as bf16 floats.
RowExpect reference_row(const std::vector<float>& v) {
  float amax = 0.0f;
  for (float x : v) amax = std::max(amax, std::fabs(x));
  const float token_scale = std::max(amax / 448.0f, 1.0f / (448.0f * 512.0f));
  RowExpect out{{}, token_scale * 8.0f};
  for (float x : v) {
    float q = x / token_scale;
    q = std::max(-448.0f, std::min(q, 448.0f));
    const float fp8 = e4m3_to_float(nearest_e4m3(q));
    out.s8.push_back(nearest_e4m3(fp8 / 8.0f));
  }
  return out;
}

float bf16(float v) { return bf16_to_float(float_to_bf16(v)); }

TEST(W4a8CutlassScales, RowsFollowTheCudaKernelAndTheRecast) {
  // The worked example of the header.
  std::vector<uint8_t> s8(3);
  const float chan = w4a8_fp8_row(std::vector<float>{1.0f, 0.5f, 0.0f}, s8);
  EXPECT_EQ(s8, (std::vector<uint8_t>{0x66, 0x5E, 0x00}));
  uint32_t bits;
  std::memcpy(&bits, &chan, 4);
  EXPECT_EQ(bits, 0x3C924925u);

  std::mt19937 rng(5);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-40, 20);
  for (uint64_t len : {1u, 2u, 3u, 16u, 17u, 48u}) {
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<float> row(len);
      const float magnitude = std::ldexp(1.0f, exponent(rng));
      for (float& x : row) x = bf16(unit(rng) < 0.1f ? 0.0f : unit(rng) * magnitude * (unit(rng) < 0.3f ? 1e-3f : 1.0f));
      std::vector<uint8_t> got(len);
      const float c = w4a8_fp8_row(row, got);
      const RowExpect want = reference_row(row);
      ASSERT_EQ(got, want.s8) << "length " << len << " trial " << trial;
      ASSERT_EQ(c, want.channel);
    }
  }
  // An all-zero row takes the minimum scale 1 / (448 * 512): codes 0, channel 8 / 229376.
  std::vector<uint8_t> zeros(4, 0xFF);
  EXPECT_EQ(w4a8_fp8_row(std::vector<float>(4, 0.0f), zeros), 8.0f * (1.0f / (448.0f * 512.0f)));
  EXPECT_EQ(zeros, std::vector<uint8_t>(4, 0));
}

std::vector<uint8_t> run(const ExpertDerivation& d, const OwnedTensor& in, const RankGeometry& g) {
  const std::vector<OwnedTensor> inputs = {in};
  std::vector<uint8_t> out(byte_size(d.dtype(), d.slab_shape(inputs, g)));
  d.produce(inputs, g, out, "layer L expert 0");
  return out;
}

TEST(W4a8CutlassScales, DerivationsWriteThePackedTablesAndTheChannelScales) {
  const RankGeometry g{.hidden = 384, .intermediate = 256, .padded_hidden = 384, .padded_intermediate = 256};
  const uint64_t rows = 32, groups = 3;
  std::vector<float> v(rows * groups);
  for (uint64_t i = 0; i < v.size(); ++i) v[i] = 0.001f * static_cast<float>((i * 37) % 101 + 1) / 3.0f;  // not bf16 values: cast first
  const OwnedTensor loaded = f32({rows, groups}, v);

  const auto scales = make_w4a8_cutlass_derivation("w13_weight_scale", kGroup);
  ASSERT_NE(scales, nullptr);
  EXPECT_EQ(scales->inputs(), std::vector<std::string>{"w13_weight_scale"});
  const std::vector<OwnedTensor> inputs = {loaded};
  EXPECT_EQ(scales->slab_shape(inputs, g), (std::vector<uint64_t>{groups, rows, 8}));
  EXPECT_EQ(scales->parameter_shape(4, inputs, g), (std::vector<uint64_t>{4 * groups * rows * 8}));
  EXPECT_EQ(scales->unpacked(inputs, g)->shape, (std::vector<uint64_t>{rows, groups}));
  EXPECT_EQ(scales->reference_stage(RankGeometry{.tp_size = 2}), "vllm.w4a8_fp8_weight_values(tp=2,e9d1398d9)");

  const auto channel = make_w4a8_cutlass_derivation("w13_weight_chan_scale", kChannel);
  ASSERT_NE(channel, nullptr);
  EXPECT_EQ(channel->inputs(), std::vector<std::string>{"w13_weight_scale"});
  EXPECT_EQ(channel->slab_shape(inputs, g), (std::vector<uint64_t>{rows, 1}));

  std::vector<uint8_t> expected_scales, expected_channel;
  std::vector<RowExpect> per_row;
  for (uint64_t r = 0; r < rows; ++r) {
    std::vector<float> row;
    for (uint64_t c = 0; c < groups; ++c) row.push_back(bf16(v[r * groups + c]));
    per_row.push_back(reference_row(row));
    const float ch = per_row.back().channel;
    const auto* b = reinterpret_cast<const uint8_t*>(&ch);
    expected_channel.insert(expected_channel.end(), b, b + 4);
  }
  // permute(0, 2, 1) then 8 table bytes per scale.
  for (uint64_t c = 0; c < groups; ++c)
    for (uint64_t r = 0; r < rows; ++r) {
      const auto t = packers::CutlassW4a8ScaleLayout::lookup_table(per_row[r].s8[c]);
      expected_scales.insert(expected_scales.end(), t.begin(), t.end());
    }
  EXPECT_EQ(run(*scales, loaded, g), expected_scales);
  EXPECT_EQ(run(*channel, loaded, g), expected_channel);
  EXPECT_EQ(make_w4a8_cutlass_derivation("w13_weight_scale", "vllm.unchanged"), nullptr);
}

TEST(W4a8CutlassScales, NanInfiniteAndNegativeScalesAreBadInput) {
  const auto scales = make_w4a8_cutlass_derivation("w2_weight_scale", kGroup);
  const RankGeometry g{};
  for (float bad : {std::nanf(""), INFINITY, -0.25f, -0.0f}) {
    try {
      run(*scales, f32({16, 2}, std::vector<float>(32, 0.5f)), g);  // fine
      std::vector<float> v(32, 0.5f);
      v[5] = bad;
      run(*scales, f32({16, 2}, v), g);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::bad_input) << e.what();
      EXPECT_NE(std::string(e.what()).find("[2, 1]"), std::string::npos) << e.what();
    }
  }
}

TEST(W4a8CutlassScales, ReferenceValuesAreTheKernelsPerGroupWeights) {
  // A w2 row of four groups held by two ranks: each half has its own row maximum.
  const std::vector<float> row = {1.0f, 0.5f, 0.125f, 0.0625f};
  const ValueStage* stage = find_value_stage("vllm.w4a8_fp8_weight_values(tp=2,e9d1398d9)");
  ASSERT_NE(stage, nullptr);
  EXPECT_EQ(stage->name(), "vllm.w4a8_fp8_weight_values(tp=2,e9d1398d9)");
  ReductionInput in;
  in.role = "w2_weight_scale";
  OwnedTensor t = f32({1, 4}, row);
  stage->prepare(in).change(0, t);
  ASSERT_EQ(t.dtype, DType::F32);
  ASSERT_EQ(t.shape, (std::vector<uint64_t>{1, 64}));
  const std::vector<float> values = test::f32_values(t);
  for (uint64_t half = 0; half < 2; ++half) {
    const RowExpect e = reference_row({row[2 * half], row[2 * half + 1]});
    for (uint64_t g = 0; g < 2; ++g) {
      const float s8 = e4m3_to_float(e.s8[g]);
      for (int code = 0; code < 16; ++code) {
        const int w = code - 8;
        const float kernel = e4m3_to_float(packers::CutlassW4a8ScaleLayout::cutlass_e4m3(s8 * static_cast<float>(w)));
        EXPECT_EQ(values[16 * (2 * half + g) + static_cast<uint64_t>(code)], kernel * e.channel) << half << " " << g << " " << w;
      }
    }
  }
  // A w13 row is whole on every rank: one maximum for all four groups.
  in.role = "w13_weight_scale";
  OwnedTensor w13 = f32({1, 4}, row);
  stage->prepare(in).change(0, w13);
  const RowExpect whole = reference_row(row);
  EXPECT_EQ(test::f32_values(w13)[16 * 3 + 9], e4m3_to_float(packers::CutlassW4a8ScaleLayout::cutlass_e4m3(e4m3_to_float(whole.s8[3]))) * whole.channel);

  // The artifact side builds the same table from the canonical s8 and channel scales.
  OwnedTensor s8(DType::F8_E4M3, {1, 4});
  s8.bytes = whole.s8;
  const OwnedTensor table = w4a8_fp8_value_table(s8, f32({1, 1}, {whole.channel}), "test");
  EXPECT_EQ(table.bytes, w13.bytes);

  EXPECT_EQ(find_value_stage("vllm.w4a8_fp8_weight_values(tp=0,e9d1398d9)"), nullptr);
  EXPECT_EQ(find_value_stage("vllm.w4a8_fp8_weight_values(tp=x,e9d1398d9)"), nullptr);
  EXPECT_EQ(find_value_stage("vllm.w4a8_fp8_weight_values(tp=2,other)"), nullptr);
}

}  // namespace
}  // namespace moepack::convert
