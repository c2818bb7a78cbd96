// Per-layer reductions, and the static input scales of Quark w_mxfp4_a_fp8 end to end: checked
// against values read straight from the sample's file, not through the converter's own reader.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "formats/artifact/manifest.h"
#include "formats/checkpoints/checkpoint.h"
#include "formats/safetensors/file.h"
#include "lib/convert/executor.h"
#include "lib/convert/plan.h"
#include "lib/convert/target.h"
#include "lib/convert/reductions.h"
#include "support/artifacts.h"
#include "support/test_support.h"

namespace moepack::convert {
namespace {
namespace fs = std::filesystem;

OwnedTensor f32_scalar(float v) {
  OwnedTensor t(DType::F32, {});
  std::memcpy(t.bytes.data(), &v, 4);
  return t;
}

// A reduction's input over in-memory experts, every role the same list.
ReductionInput input_of(const std::vector<OwnedTensor>& experts, const std::string& role = "w13_input_scale") {
  ReductionInput in;
  in.role = role;
  in.local_experts = experts.size();
  in.has = [](const std::string&) { return true; };
  in.each = [experts](const std::string&, bool, const std::function<void(uint64_t, const OwnedTensor&)>& fn) {
    for (size_t e = 0; e < experts.size(); ++e) fn(e, experts[e]);
  };
  in.where = [](const std::string& r, uint64_t e) { return "expert " + std::to_string(e) + ", " + r; };
  return in;
}

float reduce_max(const std::vector<OwnedTensor>& experts) {
  const LayerReduction* r = find_reduction("vllm.max_over_experts(f32)");
  EXPECT_NE(r, nullptr);
  float out = 0;
  r->reduce(input_of(experts), std::span<uint8_t>(reinterpret_cast<uint8_t*>(&out), 4));
  return out;
}

TEST(Reductions, MaxOverExpertsWorkedExample) {
  const LayerReduction* r = find_reduction("vllm.max_over_experts(f32)");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->dtype(), DType::F32);
  EXPECT_TRUE(r->shape(4).empty());
  std::vector<OwnedTensor> e = {f32_scalar(0.5f), f32_scalar(0.75f), f32_scalar(0.25f), f32_scalar(0.75f)};
  uint8_t out[4];
  r->reduce(input_of(e), out);
  EXPECT_EQ(std::vector<uint8_t>(out, out + 4), (std::vector<uint8_t>{0x00, 0x00, 0x40, 0x3F}));  // 0.75f
  EXPECT_EQ(find_reduction("vllm.unchanged"), nullptr);
}

TEST(Reductions, MaxOverExpertsWidensBf16AndPropagatesNan) {
  OwnedTensor bf(DType::BF16, {});
  bf.bytes = {0x00, 0x40};  // 2.0
  EXPECT_EQ(reduce_max({f32_scalar(1.5f), bf}), 2.0f);
  EXPECT_EQ(reduce_max({f32_scalar(-3.0f), f32_scalar(-1.0f)}), -1.0f);
  EXPECT_TRUE(std::isnan(reduce_max({f32_scalar(1.0f), f32_scalar(std::numeric_limits<float>::quiet_NaN()), f32_scalar(9.0f)})));
}

// The sample's expert e: gate and up input scales differ (up is loaded last within the shard,
// so up's value is w13_input_scale[e]); down's is w2_input_scale[e].
float sample_scale(const st::File& f, int expert, const std::string& proj) {
  const st::TensorInfo* t = f.find("model.layers.0.mlp.experts." + std::to_string(expert) + "." + proj + ".input_scale");
  EXPECT_NE(t, nullptr);
  float v = 0;
  std::memcpy(&v, f.data(*t).data(), 4);
  return v;
}

artifact::Manifest convert_sample(const std::string& name, const std::string& target, bool aiter, const std::string& out_dir) {
  oracle::Deployment d = oracle::default_deployment(oracle::parse_target(target));
  if (aiter) d.env.set("VLLM_ROCM_USE_AITER", "1");
  ckpt::Checkpoint ck = ckpt::open_checkpoint(test::source_dir() + "/samples/" + name);
  if (aiter) ck.facts.activation = "swigluoai";  // AITER W4A8 takes swigluoai only (the sample is silu)
  ConvertRequest req;
  req.target_json = target_json(d);
  return execute_plan(build_conversion_plan(ck, decide_layers(ck, d), req), out_dir, ExecutorOptions{});
}

TEST(Reductions, QuarkStaticInputScalesOnEmulationAreTheirMaximum) {
  test::TempDir out;
  artifact::Manifest m = convert_sample("quark-w-mxfp4-a-fp8", "gfx950", false, out.path());
  ASSERT_EQ(m.layers.at(0).backend, "EMULATION");
  st::File src(test::source_dir() + "/samples/quark-w-mxfp4-a-fp8/model.safetensors");
  float w13 = -INFINITY, w2 = -INFINITY;
  for (int e = 0; e < 4; ++e) {
    w13 = std::max(w13, sample_scale(src, e, "up_proj"));
    w2 = std::max(w2, sample_scale(src, e, "down_proj"));
  }
  const auto& tensors = m.layers[0].ranks.at(0).tensors;
  for (const char* role : {"w13_input_scale", "w2_input_scale"}) {
    const artifact::PackedTensor& t = tensors.at(role);
    EXPECT_EQ(t.dtype, "F32");
    EXPECT_TRUE(t.shape.empty()) << role;
    EXPECT_EQ(t.layout, "vllm.max_over_experts(f32)");
  }
  EXPECT_EQ(test::read_f32_tensor(out.path(), tensors.at("w13_input_scale")), (std::vector<float>{w13}));
  EXPECT_EQ(test::read_f32_tensor(out.path(), tensors.at("w2_input_scale")), (std::vector<float>{w2}));
}

TEST(Reductions, QuarkStaticInputScalesOnAiterW4A8StayPerExpert) {
  test::TempDir out;
  artifact::Manifest m = convert_sample("quark-w-mxfp4-a-fp8", "gfx950", true, out.path());
  ASSERT_EQ(m.layers.at(0).backend, "AITER_MXFP4_FP8");
  st::File src(test::source_dir() + "/samples/quark-w-mxfp4-a-fp8/model.safetensors");
  std::vector<float> w13, w2;
  for (int e = 0; e < 4; ++e) {
    w13.push_back(sample_scale(src, e, "up_proj"));
    w2.push_back(sample_scale(src, e, "down_proj"));
  }
  const auto& tensors = m.layers[0].ranks.at(0).tensors;
  EXPECT_EQ(tensors.at("w13_input_scale").shape, (std::vector<uint64_t>{4}));
  EXPECT_EQ(tensors.at("w13_input_scale").layout, "vllm.scalar_f32");
  EXPECT_EQ(test::read_f32_tensor(out.path(), tensors.at("w13_input_scale")), w13);
  EXPECT_EQ(test::read_f32_tensor(out.path(), tensors.at("w2_input_scale")), w2);
  // Gate and up differ in this sample: the per-expert value is up's, not the larger of the two.
  EXPECT_NE(w13[1], std::max(w13[1], sample_scale(src, 1, "gate_proj")));
}

}  // namespace
}  // namespace moepack::convert
