// The NVFP4, FP8 and MXFP8 policies in tables (oracle/nvfp4.py, oracle/fp8.py, oracle/mxfp8.py
// @ vLLM e9d1398d9). Rows are named after the code path they exercise.
#include "tests/oracle/oracle_cases.h"

namespace moepack::oracle::test {
namespace {

MoeLayerQuery nvfp4_w4a4(MoeLayerQuery q) {
  q.weight_key = "kNvfp4Static";
  q.activation_key = "kNvfp4Dynamic";
  return q;
}
MoeLayerQuery nvfp4_w4a16(MoeLayerQuery q) {
  q.weight_key = "kNvfp4Static";
  q.activation_key = "";
  return q;
}
MoeLayerQuery with_clamp(MoeLayerQuery q) {
  q.swiglu_limit = 7.0;
  return q;
}
MoeLayerQuery with_routing(MoeLayerQuery q, RoutingMethodType r) {
  q.routing = r;
  return q;
}

MoeLayerQuery fp8_block(MoeLayerQuery q) {
  q.weight_key = "kFp8Static128BlockSym";
  q.activation_key = "kFp8Dynamic128Sym";
  return q;
}
MoeLayerQuery fp8_tensor(MoeLayerQuery q, bool static_act) {
  q.weight_key = "kFp8StaticTensorSym";
  q.activation_key = static_act ? "kFp8StaticTensorSym" : "kFp8DynamicTensorSym";
  return q;
}
MoeLayerQuery ct_fp8_channel() {
  MoeLayerQuery q = qwen3(Family::fp8, "compressed-tensors");
  q.weight_key = "kFp8StaticChannelSym";
  q.activation_key = "kFp8DynamicTokenSym";
  return q;
}
MoeLayerQuery mxfp8() {
  MoeLayerQuery q = qwen3(Family::mxfp8, "compressed-tensors");
  q.weight_key = "kMxfp8Static";
  q.activation_key = "kMxfp8Dynamic";
  return q;
}

const MoeLayerQuery kModelOptNvfp4 = nvfp4_w4a4(qwen3(Family::nvfp4, "modelopt_fp4"));
const MoeLayerQuery kModelOptNvfp4A16 = nvfp4_w4a16(qwen3(Family::nvfp4, "modelopt_fp4"));

std::vector<Case> nvfp4_cases() {
  return {
      {"nvfp4_sm100_trtllm_monolithic", kModelOptNvfp4, target("sm100"), "FLASHINFER_TRTLLM", "TrtLlmNvFp4ExpertsMonolithic", "", ""},
      {"nvfp4_sm100_default_routing_modular", with_routing(kModelOptNvfp4, RoutingMethodType::Default), target("sm100"), "FLASHINFER_TRTLLM",
       "TrtLlmNvFp4ExpertsModular", "", ""},
      {"nvfp4_sm90_fp4_paths_need_sm100_marlin", kModelOptNvfp4, target("sm90"), "MARLIN", "MarlinExperts", "", ""},
      {"nvfp4_sm120_flashinfer_cutlass", kModelOptNvfp4, target("sm120"), "FLASHINFER_CUTLASS", "FlashInferExperts", "", ""},
      {"nvfp4_sm110_vllm_cutlass_family110", kModelOptNvfp4, target("sm110"), "VLLM_CUTLASS", "CutlassExpertsFp4", "", ""},
      {"nvfp4_w4a16_sm100_only_marlin_ignores_activation", kModelOptNvfp4A16, target("sm100"), "MARLIN", "MarlinExperts", "", ""},
      {"nvfp4_w4a16_sm120_explicit_flashinfer_b12x", kModelOptNvfp4A16, target("sm120", backend("flashinfer_b12x")), "FLASHINFER_B12X",
       "FlashInferB12xExperts", "", ""},
      {"nvfp4_deepep_ll_cutedsl_batched", kModelOptNvfp4, target("sm100", deepep_low_latency()), "FLASHINFER_CUTEDSL_BATCHED",
       "FlashInferCuteDSLBatchedExperts", "", ""},
      {"nvfp4_deepep_ll_clamp_filters_batched_nothing_fits", with_clamp(kModelOptNvfp4), target("sm100", deepep_low_latency()), "", "",
       "NotImplementedError", "No NvFp4 MoE backend supports the deployment configuration."},
      {"nvfp4_clamp_explicit_cutedsl_batched_refused", with_clamp(kModelOptNvfp4), target("sm100", all({backend("flashinfer_cutedsl"), deepep_low_latency()})),
       "", "", "ValueError", "Model sets swiglu_limit=7.0, but the explicitly requested moe_backend='flashinfer_cutedsl' does not apply the SwiGLU clamp."},
      {"nvfp4_batch_invariant_vllm_cutlass", kModelOptNvfp4, target("sm100", env("VLLM_BATCH_INVARIANT", "1")), "VLLM_CUTLASS", "CutlassExpertsFp4", "", ""},
      {"nvfp4_gfx950_triton_emulation", kModelOptNvfp4, target("gfx950"), "EMULATION", "Nvfp4QuantizationEmulationTritonExperts", "", ""},
      {"nvfp4_cpu_nothing_fits", kModelOptNvfp4, target("cpu-amx"), "", "", "NotImplementedError", "No NvFp4 MoE backend supports the deployment configuration."},
      {"nvfp4_xpu_method_not_in_platform_list", kModelOptNvfp4, target("xpu"), "", "", "ValueError",
       "modelopt_fp4 quantization is currently not supported in xpu."},
      {"nvfp4_explicit_b12x_without_library", kModelOptNvfp4, target("sm120", backend("b12x")), "", "", "ValueError",
       "NvFp4 MoE backend 'B12X' does not support the deployment configuration since kernel does not support current device cuda."},
      {"nvfp4_explicit_b12x_force_a16", kModelOptNvfp4,
       target("sm120", all({backend("b12x"), env("VLLM_B12X_MOE_FP4_FORCE_A16", "1"), [](Deployment& d) { d.packages.b12x = true; }})), "B12X",
       "B12xExperts", "", ""},
      {"nvfp4_explicit_triton_not_in_map", kModelOptNvfp4, target("sm100", backend("triton")), "", "", "ValueError",
       "moe_backend='triton' is not supported for NvFP4 MoE. Expected one of ['b12x', 'cutlass', 'flashinfer_trtllm', 'flashinfer_cutlass', "
       "'flashinfer_cutedsl', 'flashinfer_b12x', 'marlin', 'humming', 'emulation']."},
      {"nvfp4_explicit_trtllm_on_sm90_no_fallback", kModelOptNvfp4, target("sm90", backend("flashinfer_trtllm")), "", "", "ValueError",
       "NvFp4 MoE backend 'FLASHINFER_TRTLLM' does not support the deployment configuration since kernel does not support current device cuda."},
      {"nvfp4_ct_w4a4_sm100_ep_trtllm", nvfp4_w4a4(qwen3(Family::nvfp4, "compressed-tensors")),
       target("sm100", all({tp(4), [](Deployment& d) { d.parallel.enable_expert_parallel = true; }})), "FLASHINFER_TRTLLM", "TrtLlmNvFp4ExpertsMonolithic", "", ""},
  };
}

std::vector<Case> fp8_cases() {
  const MoeLayerQuery dsv3_block = fp8_block(deepseek_v3(Family::fp8, "fp8"));
  const MoeLayerQuery qwen_block = fp8_block(qwen3(Family::fp8, "fp8"));
  return {
      {"fp8_block_sm90_tp_triton_moved_first", dsv3_block, target("sm90", tp(8)), "TRITON", "TritonExperts", "", ""},
      {"fp8_block_sm90_ep_fi_cutlass_moved_first", dsv3_block, target("sm90", all({tp(8), [](Deployment& d) { d.parallel.enable_expert_parallel = true; }})),
       "FLASHINFER_CUTLASS", "FlashInferExperts", "", ""},
      {"fp8_block_sm100_trtllm_monolithic", dsv3_block, target("sm100", tp(8)), "FLASHINFER_TRTLLM", "TrtLlmFp8ExpertsMonolithic", "", ""},
      {"fp8_block_sm120_deepgemm", qwen_block, target("sm120"), "DEEPGEMM", "TritonOrDeepGemmExperts", "", ""},
      {"fp8_block_sm120_deep_gemm_exported_zero_removed", qwen_block, target("sm120", env("VLLM_USE_DEEP_GEMM", "0")), "TRITON", "TritonExperts", "", ""},
      {"fp8_block_sm90_deep_gemm_exported_one_forced", qwen_block, target("sm90", env("VLLM_USE_DEEP_GEMM", "1")), "DEEPGEMM", "TritonOrDeepGemmExperts", "", ""},
      {"fp8_tensor_deep_gemm_forced_refused", fp8_tensor(qwen3(Family::fp8, "fp8"), true), target("sm90", env("VLLM_USE_DEEP_GEMM", "1")), "", "",
       "ValueError", "FP8 MoE backend DEEPGEMM does not support the deployment configuration since kernel does not support quantization scheme"},
      {"fp8_block_sm89_triton", qwen_block, target("sm89"), "TRITON", "TritonExperts", "", ""},
      {"fp8_tensor_sm80_no_fp8_triton_marlin", fp8_tensor(qwen3(Family::fp8, "fp8"), false), target("sm80"), "MARLIN", "MarlinExperts", "", ""},
      {"fp8_modelopt_tensor_static_sm90_fi_cutlass", fp8_tensor(qwen3(Family::fp8, "modelopt"), true), target("sm90"), "FLASHINFER_CUTLASS",
       "FlashInferExperts", "", ""},
      {"fp8_tensor_dynamic_sm90_triton", fp8_tensor(qwen3(Family::fp8, "fp8"), false), target("sm90"), "TRITON", "TritonExperts", "", ""},
      {"fp8_ct_channel_sm90_allow_vllm_cutlass", ct_fp8_channel(), target("sm90"), "VLLM_CUTLASS", "TritonOrCutlassExperts", "", ""},
      {"fp8_explicit_cutlass_disabled_outside_ct", fp8_tensor(qwen3(Family::fp8, "fp8"), true), target("sm90", backend("cutlass")), "", "", "ValueError",
       "vLLM CUTLASS FP8 MoE backend is disabled for this configuration."},
      {"fp8_explicit_deep_gemm_batched_twin", qwen_block, target("sm90", all({backend("deep_gemm"), deepep_low_latency()})), "BATCHED_DEEPGEMM",
       "BatchedDeepGemmExperts", "", ""},
      {"fp8_block_gfx942_aiter_forced", qwen_block, target("gfx942", env("VLLM_ROCM_USE_AITER", "1")), "AITER", "AiterExperts", "", ""},
      {"fp8_block_gfx942_default_triton", qwen_block, target("gfx942"), "TRITON", "TritonExperts", "", ""},
      {"fp8_aiter_exported_on_cuda_refused", qwen_block, target("sm90", env("VLLM_ROCM_USE_AITER", "1")), "", "", "ValueError",
       "FP8 MoE backend AITER does not support the deployment configuration since kernel does not support current device cuda. AITER MoE is not enabled"},
      {"fp8_aiter_exported_false_removed", qwen_block, target("gfx942", env("VLLM_ROCM_USE_AITER", "0")), "TRITON", "TritonExperts", "", ""},
      {"fp8_block_cpu_amx_cpu_first", qwen_block, target("cpu-amx"), "CPU", "CPUExpertsFp8", "", ""},
      {"fp8_block_xpu_block_class", qwen_block, target("xpu"), "XPU", "XPUExpertsBlockFp8", "", ""},
      // create_weights: 768 / 8 = 96 rows per rank do not tile 128-row blocks (Fp8MoEMethod and
      // compressed-tensors alike); DeepSeek-V3's 2048 / 8 = 256 does.
      {"fp8_block_create_weights_block_n_per_rank", qwen_block, target("sm90", tp(8)), "", "", "ValueError",
       "The output_size of gate's and up's weight = 96 is not divisible by weight quantization block_n = 128."},
      {"fp8_block_create_weights_ct_block_n_per_rank", fp8_block(qwen3(Family::fp8, "compressed-tensors")), target("sm90", tp(8)), "", "", "ValueError",
       "The output_size of gate's and up's weight = 96 is not divisible by weight quantization block_n = 128."},
      {"fp8_block_create_weights_ep_keeps_whole_experts", qwen_block, target("sm90", all({tp(8), [](Deployment& d) { d.parallel.enable_expert_parallel = true; }})),
       "FLASHINFER_CUTLASS", "FlashInferExperts", "", ""},
      {"fp8_tensor_create_weights_no_block_rule", fp8_tensor(qwen3(Family::fp8, "fp8"), false), target("sm90", tp(8)), "TRITON", "TritonExperts", "", ""},
      {"fp8_explicit_unknown_for_family", qwen_block, target("sm90", backend("flashinfer_cutedsl")), "", "", "ValueError",
       "moe_backend='flashinfer_cutedsl' is not supported for FP8 MoE. Expected one of ['triton', 'deep_gemm', 'cutlass', 'flashinfer_trtllm', "
       "'flashinfer_cutlass', 'marlin', 'humming', 'aiter', 'hpc']."},
      {"fp8_sm70_below_min_capability_75", qwen_block, target("sm70"), "", "", "ValueError",
       "The quantization method fp8 is not supported for the current GPU. Minimum capability: 75. Current capability: 70."},
  };
}

std::vector<Case> mxfp8_cases() {
  return {
      {"mxfp8_sm100_trtllm", mxfp8(), target("sm100"), "FLASHINFER_TRTLLM", "TrtLlmFp8ExpertsMonolithic", "", ""},
      {"mxfp8_sm90_deepgemm_needs_sm100_marlin", mxfp8(), target("sm90"), "MARLIN", "MarlinExperts", "", ""},
      {"mxfp8_gfx950_no_flydsl_native_triton", mxfp8(), target("gfx950"), "TRITON_MXFP8", "Mxfp8NativeTritonExperts", "", ""},
      {"mxfp8_gfx942_emulation", mxfp8(), target("gfx942"), "EMULATION", "Mxfp8EmulationTritonExperts", "", ""},
      {"mxfp8_explicit_deep_gemm_sm90_refused", mxfp8(), target("sm90", backend("deep_gemm")), "", "", "ValueError",
       "No supported MXFP8 expert class for DEEPGEMM: kernel does not support quantization scheme"},
      {"mxfp8_explicit_name_not_in_map", mxfp8(), target("sm100", backend("flashinfer_cutlass")), "", "", "ValueError",
       "moe_backend='flashinfer_cutlass' is not supported for MXFP8 MoE. Expected one of ['flashinfer_trtllm', 'deep_gemm', 'marlin', 'xpu', 'aiter', "
       "'triton', 'humming']."},
  };
}

class Nvfp4Decisions : public ::testing::TestWithParam<Case> {};
TEST_P(Nvfp4Decisions, MatchesVllm) { check_case(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Table, Nvfp4Decisions, ::testing::ValuesIn(nvfp4_cases()), case_name);

class Fp8Decisions : public ::testing::TestWithParam<Case> {};
TEST_P(Fp8Decisions, MatchesVllm) { check_case(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Table, Fp8Decisions, ::testing::ValuesIn(fp8_cases()), case_name);

class Mxfp8Decisions : public ::testing::TestWithParam<Case> {};
TEST_P(Mxfp8Decisions, MatchesVllm) { check_case(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Table, Mxfp8Decisions, ::testing::ValuesIn(mxfp8_cases()), case_name);

TEST(Fp8Decisions, NonCudaPlatformReturnsNoneInsteadOfRaising) {
  // Off CUDA/ROCm vLLM returns Fp8MoeBackend.NONE for out-of-tree platforms to fill in.
  const Decision d = decide(fp8_block(qwen3(Family::fp8, "fp8")), target("cpu-avx512"));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d.backend.value_or(""), "NONE");
  EXPECT_FALSE(d.experts_class.has_value());
}

}  // namespace
}  // namespace moepack::oracle::test
