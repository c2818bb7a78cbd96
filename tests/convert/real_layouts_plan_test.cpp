// Checkpoints laid out like published ones (tests/checkpoints/real_layouts.h) get the plan vLLM
// gives the same layer: the reader's facts (gated, biases, Quark scheme, static scales, routing)
// reach the oracle, and convert refuses by name what it cannot produce yet.
#include <gtest/gtest.h>

#include "checkpoints/real_layouts.h"
#include "formats/checkpoints/checkpoint.h"
#include "lib/convert/plan.h"
#include "lib/core/error.h"

namespace moepack::convert {
namespace {

using test::TempDir;

struct Expect {
  std::string target;
  std::vector<std::pair<std::string, std::string>> env;
  std::string moe_backend;
  std::string backend;        // "" = refused
  std::string experts_class;  // checked when set
  std::string error_part;     // part of vLLM's error when refused
};

oracle::Deployment deployment(const Expect& x) {
  oracle::Deployment d = oracle::default_deployment(oracle::parse_target(x.target));
  for (const auto& [k, v] : x.env) d.env.set(k, v);
  if (!x.moe_backend.empty()) d.moe_backend = oracle::normalize_moe_backend(x.moe_backend);
  return d;
}

void expect_plans(const std::string& dir, const std::vector<Expect>& cases) {
  ckpt::Checkpoint ck = ckpt::open_checkpoint(dir);
  for (const auto& x : cases) {
    SCOPED_TRACE(x.target + (x.moe_backend.empty() ? "" : " --moe-backend " + x.moe_backend));
    auto ds = decide_layers(ck, deployment(x));
    ASSERT_EQ(ds.size(), 1u);
    const oracle::Decision& d = ds[0].decision;
    if (x.backend.empty()) {
      ASSERT_TRUE(d.error.has_value()) << "expected a refusal, got " << d.backend.value_or("?");
      EXPECT_NE(d.error->message.find(x.error_part), std::string::npos) << d.error->message;
      continue;
    }
    ASSERT_FALSE(d.error.has_value()) << d.error->type << ": " << d.error->message;
    EXPECT_EQ(d.backend.value_or("?"), x.backend);
    if (!x.experts_class.empty()) {
      EXPECT_EQ(d.experts_class.value_or("?"), x.experts_class);
    }
  }
}

void expect_convert_refused(const std::string& dir, const std::string& target, const std::string& part) {
  ckpt::Checkpoint ck = ckpt::open_checkpoint(dir);
  oracle::Deployment dep = oracle::default_deployment(oracle::parse_target(target));
  ConvertRequest req;
  req.target_json = {{"device", target}};
  try {
    build_conversion_plan(ck, decide_layers(ck, dep), req);
    ADD_FAILURE() << "expected convert to refuse " << dir << " on " << target;
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 3) << e.what();
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(RealLayoutPlans, QuarkGptOssPlansLikeTheFusedGptOssLayout) {
  TempDir tmp;
  test::quark_gpt_oss_builder(tmp.path(), std::nullopt).write();
  ckpt::Checkpoint ck = ckpt::open_checkpoint(tmp.path());
  auto q = query_from_checkpoint(ck, ck.layers[0], oracle::default_deployment(oracle::parse_target("gfx950")));
  EXPECT_EQ(q.quark_ocp_mx_scheme, "w_mxfp4_a_fp8");
  EXPECT_TRUE(q.static_input_scales);
  EXPECT_TRUE(q.has_bias);
  EXPECT_EQ(q.activation, "swigluoai");
  expect_plans(tmp.path(), {
                               {"gfx950", {{"VLLM_ROCM_USE_AITER", "1"}}, "", "AITER_MXFP4_FP8", "AiterW4A8ExpertsMonolithic", ""},
                               {"gfx950", {}, "", "EMULATION", "OCP_MXQuantizationEmulationTritonExperts", ""},
                               {"cpu-amx", {}, "", "CPU", "CPUExpertsMxfp4", ""},
                               {"sm90", {}, "marlin", "", "", "does not support activation"},
                               {"sm100", {}, "", "", "", "No MXFP4 MoE backend"},
                           });
}

TEST(RealLayoutPlans, QuarkGptOssWithDynamicFp8IsVllmsNotImplementedError) {
  TempDir tmp;
  test::quark_gpt_oss_builder(tmp.path(), true).write();
  ckpt::Checkpoint ck = ckpt::open_checkpoint(tmp.path());
  EXPECT_NE(ck.layers[0].quant.unsupported.find("dynamic input scales"), std::string::npos) << ck.layers[0].quant.unsupported;
  expect_convert_refused(tmp.path(), "gfx950", "dynamic input scales");
}

TEST(RealLayoutPlans, NemotronHNonGatedNvfp4) {
  TempDir tmp;
  test::nemotron_h_nvfp4_builder(tmp.path()).write();
  ckpt::Checkpoint ck = ckpt::open_checkpoint(tmp.path());
  auto q = query_from_checkpoint(ck, ck.layers[0], oracle::default_deployment(oracle::parse_target("sm100")));
  EXPECT_EQ(q.activation, "relu2_no_mul");
  EXPECT_EQ(q.routing, oracle::RoutingMethodType::DeepSeekV3);
  expect_plans(tmp.path(), {
                               {"sm100", {}, "", "FLASHINFER_TRTLLM", "", ""},
                               {"sm90", {}, "", "MARLIN", "MarlinExperts", ""},
                               {"cpu-amx", {}, "", "", "", "is_act_and_mul=False"},
                           });
  // Not gated: NVFP4 TRT-LLM pads the intermediate size to 128, not 64 (oracle.md 4.2).
  auto ds = decide_layers(ck, oracle::default_deployment(oracle::parse_target("sm100")));
  EXPECT_EQ(ds[0].decision.padded_intermediate_size % 128, 0);
  // Convert plans the non-gated layer: w13 is the up projection alone (I rows, padded to 128 on TRT-LLM).
  {
    ConvertRequest req;
    ConversionPlan plan = build_conversion_plan(ck, ds, req);
    ASSERT_EQ(plan.layers.size(), 1u);
    bool saw_w13 = false;
    for (const auto& t : plan.layers[0].ranks.at(0).tensors)
      if (t.role == "w13_weight") {
        saw_w13 = true;
        EXPECT_EQ(t.canonical_shape.at(0), static_cast<uint64_t>(ds[0].decision.padded_intermediate_size));
      }
    EXPECT_TRUE(saw_w13);
  }
}

TEST(RealLayoutPlans, DeepSeekV4Nvfp4GetsModelOptsNvfp4Method) {
  TempDir tmp;
  test::deepseek_v4_nvfp4_builder(tmp.path()).write();
  expect_plans(tmp.path(), {
                               {"sm100", {}, "", "FLASHINFER_TRTLLM", "", ""},
                               {"sm90", {}, "", "MARLIN", "MarlinExperts", ""},
                           });
  ckpt::Checkpoint ck = ckpt::open_checkpoint(tmp.path());
  auto ds = decide_layers(ck, oracle::default_deployment(oracle::parse_target("sm100")));
  EXPECT_EQ(ds[0].decision.family, oracle::Family::nvfp4);
  EXPECT_EQ(ds[0].decision.method_class, "ModelOptNvFp4FusedMoE");
}

TEST(RealLayoutPlans, CompressedTensorsGptOssSeesBiasesEvenWhenDropped) {
  TempDir tmp;
  test::ct_gpt_oss_builder(tmp.path(), false).write();
  ckpt::Checkpoint ck = ckpt::open_checkpoint(tmp.path());
  auto q = query_from_checkpoint(ck, ck.layers[0], oracle::default_deployment(oracle::parse_target("sm100")));
  EXPECT_TRUE(q.has_bias);
  expect_plans(tmp.path(), {{"sm100", {}, "", "MARLIN", "CutlassExpertsMxfp4", ""}, {"sm90", {}, "", "MARLIN", "MarlinExperts", ""}});
}

TEST(RealLayoutPlans, CompressedTensorsW4A8IntQuantizedRunsOnArmCpus) {
  TempDir tmp;
  test::ct_w4a8_int_builder(tmp.path()).write();
  expect_plans(tmp.path(), {
                               {"cpu-arm", {}, "", "CPU_INT4", "CPUExpertsInt4", ""},
                               {"sm100", {}, "", "", "", "only supported on CPU"},
                               // On exactly SM90 vLLM takes the FP8-activation W4A8 method, which needs group 128.
                               {"sm90", {}, "", "", "", "group size 128"},
                           });
}

TEST(RealLayoutPlans, FusedThreeDimensionalExperts) {
  {
    TempDir tmp;
    test::llama4_fp8_builder(tmp.path()).write();
    ckpt::Checkpoint ck = ckpt::open_checkpoint(tmp.path());
    auto q = query_from_checkpoint(ck, ck.layers[0], oracle::default_deployment(oracle::parse_target("sm100")));
    EXPECT_EQ(q.routing, oracle::RoutingMethodType::Llama4);
    EXPECT_EQ(q.top_k, 1);
    expect_plans(tmp.path(), {{"sm100", {}, "", "FLASHINFER_TRTLLM", "", ""}, {"sm90", {}, "", "FLASHINFER_CUTLASS", "", ""}});
    // And it converts: the fused 3-D tensors load into the same per-expert params.
    oracle::Deployment dep = oracle::default_deployment(oracle::parse_target("sm100"));
    ConvertRequest req;
    req.target_json = {{"device", "sm100"}};
    EXPECT_NO_THROW(build_conversion_plan(ck, decide_layers(ck, dep), req));
  }
  {
    TempDir tmp;
    test::gpt_oss_bf16_builder(tmp.path()).write();
    ckpt::Checkpoint ck = ckpt::open_checkpoint(tmp.path());
    auto q = query_from_checkpoint(ck, ck.layers[0], oracle::default_deployment(oracle::parse_target("sm90")));
    EXPECT_TRUE(q.has_bias);
    EXPECT_EQ(q.activation, "swigluoai");
    expect_plans(tmp.path(), {{"sm90", {}, "", "TRITON", "", ""}, {"cpu-amx", {}, "", "CPU", "X86CPUUnquantizedExperts", ""}});
  }
}

}  // namespace
}  // namespace moepack::convert
