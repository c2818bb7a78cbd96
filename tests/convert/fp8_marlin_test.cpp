// FP8 Marlin scales (lib/convert/fp8_marlin.h): the per-expert [G, N] grid before Marlin's scale
// permutation, read back through the permutation's inverse, on hand-made loaded scales.
#include "lib/convert/fp8_marlin.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "lib/core/codecs.h"
#include "lib/core/error.h"
#include "packers/registry.h"
#include "support/tensors.h"

namespace moepack::convert {
namespace {

constexpr auto f32 = test::f32_tensor;

// The grid a derivation writes, unpacked through its permutation: [G, N] as floats.
std::vector<float> grid_of(const ExpertDerivation& d, const OwnedTensor& in, const RankGeometry& g, const std::string& inner) {
  const std::vector<OwnedTensor> inputs = {in};
  std::vector<uint8_t> out(byte_size(d.dtype(), d.slab_shape(inputs, g)));
  d.produce(inputs, g, out, "layer L expert 0");
  const auto u = d.unpacked(inputs, g);
  OwnedTensor canonical(u->dtype, u->shape);
  packers::make_layout(inner)->unpack(out, canonical);
  std::vector<float> v(canonical.num_elements());
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t b;
    std::memcpy(&b, canonical.bytes.data() + 2 * i, 2);
    v[i] = bf16_to_float(b);
  }
  return v;
}

constexpr const char* kSingle = "vllm.marlin_moe_permute_scales(perm=single,params_dtype=BF16,is_a_8bit=0,e9d1398d9)";
constexpr const char* kGrouped = "vllm.marlin_moe_permute_scales(perm=grouped,params_dtype=BF16,is_a_8bit=0,e9d1398d9)";
// Two stages' texts joined as a layout names them. A function, because GCC 12 at -O1 reports a
// false array-bounds overflow in `std::string(a) + kSingle` inlined into the tests.
std::string piped(std::string_view first, std::string_view second) {
  std::string s(first);
  s += " | ";
  s += second;
  return s;
}

TEST(Fp8MarlinScales, PerTensorW13TakesTheLargerShardScaleOverRealColumns) {
  RankGeometry g{.hidden = 256, .intermediate = 64, .padded_intermediate = 128};
  const auto d = make_fp8_marlin_scales("w13_weight_scale", piped("vllm.fp8_marlin_scales(kind=tensor,params_dtype=BF16,e9d1398d9)", kSingle));
  ASSERT_NE(d, nullptr);
  const std::vector<float> v = grid_of(*d, f32({2}, {0.5f, 0.75f}), g, kSingle);
  ASSERT_EQ(v.size(), 256u);  // [1, 2P]
  const float biased = 0.75f * std::ldexp(1.0f, 120);
  for (uint64_t c = 0; c < 256; ++c) EXPECT_EQ(v[c], (c % 128) < 64 ? biased : 0.0f) << c;  // padded columns zero
  EXPECT_EQ(d->reference_stage(RankGeometry{}), "vllm.fp8_marlin_scale_dtype(params_dtype=BF16,e9d1398d9)");
}

TEST(Fp8MarlinScales, BlocksBecomeGroupsAndScalesRoundToTheParamsDtype) {
  // w2 block scales [H/128 = 2, n/128 = 1] with P = 256: groups [P/128 = 2, H = 256], group 1 zero.
  RankGeometry g{.hidden = 256, .intermediate = 128, .padded_intermediate = 256};
  const auto d = make_fp8_marlin_scales("w2_weight_scale_inv", piped("vllm.fp8_marlin_scales(kind=block,params_dtype=BF16,e9d1398d9)", kGrouped));
  const float third = 1.0f / 3.0f;  // not a bf16 value: rounded before the bias
  const std::vector<float> v = grid_of(*d, f32({2, 1}, {0.25f, third}), g, kGrouped);
  ASSERT_EQ(v.size(), 512u);
  EXPECT_EQ(v[0], 0.25f * std::ldexp(1.0f, 120));
  EXPECT_EQ(v[200], bf16_to_float(float_to_bf16(third)) * std::ldexp(1.0f, 120));  // column 200 -> block row 1
  EXPECT_EQ(v[256 + 5], 0.0f);                                                       // padded group
  const ValueStage* stage = find_value_stage("vllm.fp8_marlin_scale_dtype(params_dtype=BF16,e9d1398d9)");
  ASSERT_NE(stage, nullptr);
  EXPECT_EQ(stage->prepare(ReductionInput{}).multiplier(0, third), bf16_to_float(float_to_bf16(third)));
}

TEST(Fp8MarlinScales, AScaleThatOverflowsOnceBiasedIsBadInput) {
  RankGeometry g{.hidden = 128, .intermediate = 64, .padded_intermediate = 64};
  const auto d = make_fp8_marlin_scales("w2_weight_scale", piped("vllm.fp8_marlin_scales(kind=tensor,params_dtype=BF16,e9d1398d9)", kSingle));
  const std::vector<OwnedTensor> inputs = {f32({}, {512.0f})};
  std::vector<uint8_t> out(byte_size(d->dtype(), d->slab_shape(inputs, g)));
  try {
    d->produce(inputs, g, out, "layer L expert 3");
    ADD_FAILURE() << "expected bad input";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 4);
    EXPECT_NE(std::string(e.what()).find("layer L expert 3 w2_weight_scale"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moepack::convert
