// The MXFP4 policy in one table (oracle/mxfp4.py, quantization/mxfp4.py, quark_moe.py,
// compressed_tensors_moe_w4a4_mxfp4.py @ vLLM e9d1398d9). Every row is named after the code
// path it exercises.
#include "tests/oracle/oracle_cases.h"

namespace moepack::oracle::test {
namespace {

MoeLayerQuery with_activation(MoeLayerQuery q, const std::string& act) {
  q.activation = act;
  return q;
}

MoeLayerQuery quark(const std::string& scheme, bool static_scales) {
  MoeLayerQuery q = gpt_oss();
  q.quant_method = "quark";
  q.quark_ocp_mx_scheme = scheme;
  q.static_input_scales = static_scales;
  return q;
}

MoeLayerQuery compressed_tensors_mxfp4() {
  MoeLayerQuery q = qwen3(Family::mxfp4, "compressed-tensors");
  q.weight_key = "kMxfp4Static";
  return q;
}

const Tweak kAiterOn = env("VLLM_ROCM_USE_AITER", "1");

std::vector<Case> mxfp4_cases() {
  return {
      // ---- select_mxfp4_moe_backend (gpt-oss list, BF16 variants when no activation is requested) ----
      {"gpt_oss_sm100_trtllm_bf16_monolithic", gpt_oss(), target("sm100"), "FLASHINFER_TRTLLM_MXFP4_BF16", "TrtLlmMxfp4ExpertsMonolithic", "", ""},
      {"gpt_oss_sm103_family100_trtllm", gpt_oss(), target("sm103"), "FLASHINFER_TRTLLM_MXFP4_BF16", "TrtLlmMxfp4ExpertsMonolithic", "", ""},
      {"gpt_oss_sm90_oai_triton_window", gpt_oss(), target("sm90"), "TRITON", "OAITritonMxfp4ExpertsMonolithic", "", ""},
      {"gpt_oss_sm89_below_triton_window_marlin", gpt_oss(), target("sm89"), "MARLIN", "MarlinExperts", "", ""},
      {"gpt_oss_sm80_marlin", gpt_oss(), target("sm80"), "MARLIN", "MarlinExperts", "", ""},
      {"gpt_oss_sm110_own_family_marlin", gpt_oss(), target("sm110"), "MARLIN", "MarlinExperts", "", ""},
      {"gpt_oss_sm120_fi_cutlass_bf16_needs_sm90_marlin", gpt_oss(), target("sm120"), "MARLIN", "MarlinExperts", "", ""},
      // ---- EPLB (--enable-eplb): ParallelConfig checks first, then the monolithic kernels refuse it ----
      {"gpt_oss_eplb_tp2_ep_monolithic_refuses_modular_trtllm", gpt_oss(),
       target("sm100", all({tp(2), [](Deployment& d) { d.parallel.enable_expert_parallel = d.parallel.enable_eplb = true; }})),
       "FLASHINFER_TRTLLM_MXFP4_BF16", "TrtLlmMxfp4ExpertsModular", "", ""},
      {"gpt_oss_eplb_sm90_monolithic_refuses_modular_oai_triton", gpt_oss(),
       target("sm90", all({tp(2), [](Deployment& d) { d.parallel.enable_expert_parallel = d.parallel.enable_eplb = true; }})), "TRITON",
       "OAITritonExperts", "", ""},
      {"eplb_needs_expert_parallel", gpt_oss(), target("sm100", all({tp(2), [](Deployment& d) { d.parallel.enable_eplb = true; }})), "", "",
       "ValueError", "enable_expert_parallel must be True to use EPLB."},
      {"eplb_needs_tp_or_dp", gpt_oss(), target("sm100", [](Deployment& d) { d.parallel.enable_expert_parallel = d.parallel.enable_eplb = true; }), "", "",
       "ValueError", "EPLB requires tensor, prefill-context, or data parallelism, but got TP=1, PCP=1, DP=1."},
      {"eplb_cuda_or_rocm_only", gpt_oss(),
       target("cpu-amx", all({tp(2), [](Deployment& d) { d.parallel.enable_expert_parallel = d.parallel.enable_eplb = true; }})), "", "", "ValueError",
       "Expert parallelism load balancing is only supported on CUDA devices or ROCm devices now."},
      {"gpt_oss_dp2_monolithic_rejects_dp_modular_trtllm", gpt_oss(), target("sm100", [](Deployment& d) { d.parallel.dp = 2; }),
       "FLASHINFER_TRTLLM_MXFP4_BF16", "TrtLlmMxfp4ExpertsModular", "", ""},
      {"gpt_oss_lora_only_marlin_has_lora_mixin", gpt_oss(), target("sm100", [](Deployment& d) { d.lora = true; }), "MARLIN", "MarlinExperts", "", ""},
      {"gpt_oss_deepep_ll_batched_marlin", gpt_oss(), target("sm100", deepep_low_latency()), "BATCHED_MARLIN", "BatchedMarlinExperts", "", ""},
      {"gpt_oss_batch_invariant_nothing_fits", gpt_oss(), target("sm100", env("VLLM_BATCH_INVARIANT", "1")), "", "", "NotImplementedError",
       "No MXFP4 MoE backend supports the deployment configuration. weight_key=kMxfp4Static, activation_key=None."},
      {"gpt_oss_xpu_in_list", gpt_oss(), target("xpu"), "XPU", "XPUExpertsMxFp4", "", ""},
      {"gpt_oss_cpu_amx_post_loop_fallback", gpt_oss(), target("cpu-amx"), "CPU", "CPUExpertsMxfp4", "", ""},
      {"gpt_oss_cpu_without_amx_fallback_raises", gpt_oss(), target("cpu-avx512"), "", "", "ValueError",
       "Mxfp4 MoE backend 'CPU' does not support the deployment configuration since kernel does not support current device cpu."},
      {"gpt_oss_gfx950_aiter_off_triton", gpt_oss(), target("gfx950"), "TRITON", "OAITritonMxfp4ExpertsMonolithic", "", ""},
      {"gpt_oss_gfx950_aiter_on_ck", gpt_oss(), target("gfx950", kAiterOn), "AITER_MXFP4_BF16", "AiterExperts", "", ""},
      {"gpt_oss_gfx942_aiter_mxfp4_needs_gfx950_triton", gpt_oss(), target("gfx942", kAiterOn), "TRITON", "OAITritonMxfp4ExpertsMonolithic", "", ""},
      {"gpt_oss_gfx1250_aiter_w4a16_monolithic", gpt_oss(), target("gfx1250", kAiterOn), "AITER_MXFP4_BF16", "AiterW4A16ExpertsMonolithic", "", ""},
      {"gpt_oss_gfx1250_no_triton_window_emulation", gpt_oss(), target("gfx1250"), "EMULATION", "OCP_MXQuantizationEmulationTritonExperts", "", ""},
      // ---- activation override (quantization_config.moe.activation) ----
      {"gpt_oss_sm100_user_mxfp8_trtllm_mxfp8", gpt_oss(), target("sm100", [](Deployment& d) { d.moe_activation = "mxfp8"; }),
       "FLASHINFER_TRTLLM_MXFP4_MXFP8", "TrtLlmMxfp4ExpertsMonolithic", "", ""},
      {"gpt_oss_sm90_user_mxfp8_filtered_list_empty", gpt_oss(), target("sm90", [](Deployment& d) { d.moe_activation = "mxfp8"; }), "", "",
       "NotImplementedError", "Candidate backends were: ['FLASHINFER_TRTLLM_MXFP4_MXFP8', 'FLASHINFER_CUTLASS_MXFP4_MXFP8', 'EMULATION']"},
      // ---- explicit --moe-backend: never falls back ----
      {"gpt_oss_explicit_marlin_on_sm90", gpt_oss(), target("sm90", backend("marlin")), "MARLIN", "MarlinExperts", "", ""},
      {"gpt_oss_explicit_marlin_batched_twin", gpt_oss(), target("sm90", all({backend("marlin"), deepep_low_latency()})), "BATCHED_MARLIN",
       "BatchedMarlinExperts", "", ""},
      {"gpt_oss_explicit_triton_on_sm100", gpt_oss(), target("sm100", backend("triton")), "TRITON", "OAITritonMxfp4ExpertsMonolithic", "", ""},
      {"gpt_oss_explicit_fi_cutlass_sm90_bf16", gpt_oss(), target("sm90", backend("flashinfer_cutlass")), "FLASHINFER_CUTLASS_MXFP4_BF16",
       "FlashInferExperts", "", ""},
      {"gpt_oss_explicit_fi_cutlass_sm100_bf16_rejected", gpt_oss(), target("sm100", backend("flashinfer_cutlass")), "", "", "ValueError",
       "Mxfp4 MoE backend 'FLASHINFER_CUTLASS_MXFP4_BF16' does not support the deployment configuration since kernel does not support "
       "quantization scheme QuantKey(u8,scale(u8,static,GroupShape(row=1, col=32)),symmetric)xNone."},
      {"gpt_oss_explicit_fi_cutlass_sm100_with_mxfp8", gpt_oss(),
       target("sm100", all({backend("flashinfer_cutlass"), [](Deployment& d) { d.moe_activation = "mxfp8"; }})), "FLASHINFER_CUTLASS_MXFP4_MXFP8",
       "FlashInferExperts", "", ""},
      {"gpt_oss_explicit_unsupported_name_for_family", gpt_oss(), target("sm100", backend("cutlass")), "", "", "ValueError",
       "moe_backend='cutlass' is not supported for MXFP4 MoE. Expected one of ['b12x', 'deep_gemm', 'flashinfer_trtllm'"},
      {"gpt_oss_explicit_deep_gemm_needs_fp8_activation_silu", gpt_oss(), target("sm100", backend("deep_gemm")), "", "", "ValueError",
       "Mxfp4 MoE backend 'DEEPGEMM_MXFP4' does not support the deployment configuration since kernel does not support MoEActivation.SWIGLUOAI activation."},
      {"gpt_oss_explicit_triton_unfused_lora", gpt_oss(), target("sm90", all({backend("triton_unfused"), [](Deployment& d) { d.lora = true; }})),
       "TRITON_UNFUSED", "UnfusedOAITritonExperts", "", ""},
      // ---- select_deepseek_v4_mxfp4_moe_backend ----
      {"dsv4_sm100_trtllm_mxfp8_modular_for_deepseekv4_routing", deepseek_v4(), target("sm100"), "FLASHINFER_TRTLLM_MXFP4_MXFP8",
       "TrtLlmMxfp4ExpertsModular", "", ""},
      {"dsv4_sm120_deepgemm_mxfp4", deepseek_v4(), target("sm120"), "DEEPGEMM_MXFP4", "DeepGemmFP4Experts", "", ""},
      {"dsv4_sm90_marlin", deepseek_v4(), target("sm90"), "MARLIN", "MarlinExperts", "", ""},
      {"dsv4_sm120_deep_gemm_off_marlin", deepseek_v4(), target("sm120", env("VLLM_USE_DEEP_GEMM", "0")), "MARLIN", "MarlinExperts", "", ""},
      {"dsv4_cpu_no_fallback", deepseek_v4(), target("cpu-amx"), "", "", "NotImplementedError", "No MXFP4 MoE backend supports the deployment configuration."},
      {"dsv4_gfx950_aiter_first", deepseek_v4(), target("gfx950", kAiterOn), "AITER_MXFP4_BF16", "AiterExperts", "", ""},
      {"dsv4_gfx950_triton_unfused_fallback", deepseek_v4(), target("gfx950"), "TRITON_UNFUSED", "UnfusedOAITritonExperts", "", ""},
      {"dsv4_ignores_activation_override", deepseek_v4(), target("sm100", [](Deployment& d) { d.moe_activation = "mxfp4"; }),
       "FLASHINFER_TRTLLM_MXFP4_MXFP8", "TrtLlmMxfp4ExpertsModular", "", ""},
      // ---- Quark OCP-MX ----
      {"quark_w4a8_static_gfx950_aiter_fp8", quark("w_mxfp4_a_fp8", true), target("gfx950", kAiterOn), "AITER_MXFP4_FP8", "AiterW4A8ExpertsMonolithic", "", ""},
      {"quark_w4a8_dynamic_not_implemented", quark("w_mxfp4_a_fp8", false), target("gfx950", kAiterOn), "", "", "NotImplementedError",
       "QuarkOCP_MX_MoEMethod with dynamic input scales is currently not implemented for OCP MX scheme w_mxfp4_a_fp8."},
      {"quark_w4a4_gfx950_aiter_mxfp4", quark("w_mxfp4_a_mxfp4", false), target("gfx950", kAiterOn), "AITER_MXFP4_MXFP4", "AiterExperts", "", ""},
      {"quark_w4a4_static_scales_not_implemented", quark("w_mxfp4_a_mxfp4", true), target("gfx950", kAiterOn), "", "", "NotImplementedError",
       "with static input scales is currently not implemented for OCP MX scheme w_mxfp4_a_mxfp4"},
      {"quark_w4a16_gfx1250_keeps_first_class", quark("w_mxfp4", false), target("gfx1250", kAiterOn), "AITER_MXFP4_BF16", "AiterExperts", "", ""},
      {"quark_w4a8_cpu_fallback_drops_activation", quark("w_mxfp4_a_fp8", true), target("cpu-amx"), "CPU", "CPUExpertsMxfp4", "", ""},
      {"quark_mxfp6_emulation_without_selector", quark("w_mxfp6_e3m2_a_mxfp6_e3m2", false), target("gfx950"), "EMULATION",
       "OCP_MXQuantizationEmulationTritonExperts", "", ""},
      // ---- compressed-tensors MXFP4: device-only choice, no oracle ----
      {"ct_mxfp4_sm100_cutlass_w4a4", compressed_tensors_mxfp4(), target("sm100"), "MARLIN", "CutlassExpertsMxfp4", "", ""},
      {"ct_mxfp4_sm110_cutlass_w4a4", compressed_tensors_mxfp4(), target("sm110"), "MARLIN", "CutlassExpertsMxfp4", "", ""},
      {"ct_mxfp4_sm120_marlin_weight_only", compressed_tensors_mxfp4(), target("sm120"), "MARLIN", "MarlinExperts", "", ""},
      {"ct_mxfp4_explicit_triton_ignored", compressed_tensors_mxfp4(), target("sm90", backend("triton")), "MARLIN", "MarlinExperts", "", ""},
      {"ct_mxfp4_xpu", compressed_tensors_mxfp4(), target("xpu"), "XPU", "XPUExpertsMxFp4", "", ""},
      {"ct_mxfp4_b12x_w4a8_preferred", compressed_tensors_mxfp4(), target("sm120", all({backend("b12x"), [](Deployment& d) { d.packages.b12x = true; }})),
       "B12X_MXFP4_MXFP8", "B12xExperts", "", ""},
      {"ct_mxfp4_b12x_force_a16", compressed_tensors_mxfp4(),
       target("sm120", all({backend("b12x"), env("VLLM_B12X_MOE_FP4_FORCE_A16", "1"), [](Deployment& d) { d.packages.b12x = true; }})),
       "B12X_MXFP4_BF16", "B12xExperts", "", ""},
      {"ct_mxfp4_b12x_without_library_last_error", compressed_tensors_mxfp4(), target("sm120", backend("b12x")), "", "", "ValueError",
       "Mxfp4 MoE backend 'B12X_MXFP4_BF16' does not support the deployment configuration since kernel does not support current device cuda."},
      // ---- pre-oracle gates ----
      {"gpt_oss_sm75_below_min_capability_80", gpt_oss(), target("sm75"), "", "", "ValueError",
       "The quantization method gpt_oss_mxfp4 is not supported for the current GPU. Minimum capability: 80. Current capability: 75."},
      {"gpt_oss_fp16_model_dtype_rejected", gpt_oss(), target("sm90", [](Deployment& d) { d.model_dtype = FloatType::float16; }), "", "",
       "ValueError", "torch.float16 is not supported for quantization method gpt_oss_mxfp4. Supported dtypes: [torch.bfloat16]"},
      {"gpt_oss_silu_on_sm90_oai_triton_swigluoai_only_fi_cutlass", with_activation(gpt_oss(), "silu"), target("sm90"), "FLASHINFER_CUTLASS_MXFP4_BF16",
       "FlashInferExperts", "", ""},
  };
}

class Mxfp4Decisions : public ::testing::TestWithParam<Case> {};
TEST_P(Mxfp4Decisions, MatchesVllm) { check_case(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Table, Mxfp4Decisions, ::testing::ValuesIn(mxfp4_cases()), case_name);

TEST(Mxfp4Decisions, NothingFitsListsEveryRejectedBackendWithItsReason) {
  const Decision d = decide(gpt_oss(), target("sm100", env("VLLM_BATCH_INVARIANT", "1")));
  ASSERT_TRUE(d.error);
  EXPECT_NE(d.error->message.find("backend: FLASHINFER_TRTLLM_MXFP4_BF16, reason: kernel does not support batch invariance"), std::string::npos);
  EXPECT_NE(d.error->message.find("backend: EMULATION, reason: kernel requires amd-quark package"), std::string::npos);
  // The candidates keep the same order: first TRT-LLM Monolithic, last the emulation class.
  ASSERT_FALSE(d.candidates.empty());
  EXPECT_EQ(d.candidates.front().experts_class, "TrtLlmMxfp4ExpertsMonolithic");
  EXPECT_EQ(d.candidates.back().experts_class, "OCP_MXQuantizationEmulationTritonExperts");
}

TEST(Mxfp4Decisions, ActivationOverrideConflictingWithCheckpointIsValueError) {
  MoeLayerQuery q = quark("w_mxfp4_a_fp8", true);
  const Decision d = decide(q, target("gfx950", [](Deployment& dep) {
                              dep.env.set("VLLM_ROCM_USE_AITER", "1");
                              dep.moe_activation = "mxfp8";
                            }));
  ASSERT_TRUE(d.error);
  EXPECT_EQ(d.error->type, "ValueError");
  EXPECT_NE(d.error->message.find("checkpoint declares MoE activation=QuantKey(f8e4m3fn,scale(f32,static,per_tensor),symmetric) but "
                                  "quantization_config.moe.activation=QuantKey(f8e4m3fn,scale(u8,dynamic,GroupShape(row=1, col=32)),symmetric)"),
            std::string::npos)
      << d.error->message;
}

TEST(Mxfp4Decisions, SelectedActivationKeyIsTheBackendDefault) {
  const Decision d = decide(deepseek_v4(), target("sm120"));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d.weight_key.value_or(""), "kMxfp4Static");
  EXPECT_EQ(d.activation_key.value_or(""), "kFp8Dynamic128Sym");
}

}  // namespace
}  // namespace moepack::oracle::test
