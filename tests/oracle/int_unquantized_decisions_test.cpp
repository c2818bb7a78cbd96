// The WNA16, INT8 W8A8, W4A8 and unquantized policies in tables (oracle/int_wna16.py, int8.py,
// w4a8.py, w4a8_int8.py, unquantized.py @ vLLM e9d1398d9).
#include "tests/oracle/oracle_cases.h"

namespace moepack::oracle::test {
namespace {

MoeLayerQuery ct_int4(int group, const std::string& actorder = "") {
  MoeLayerQuery q = qwen3(Family::wna16, "compressed-tensors");
  q.weight_bits = 4;
  q.group_size = group;
  q.actorder = actorder;
  return q;
}
MoeLayerQuery gptq(int group, bool desc_act) {
  MoeLayerQuery q = qwen3(Family::wna16, "auto_gptq");
  q.weight_bits = 4;
  q.group_size = group;
  q.desc_act = desc_act;
  return q;
}
MoeLayerQuery awq() {
  MoeLayerQuery q = qwen3(Family::wna16, "auto_awq");
  q.weight_bits = 4;
  q.group_size = 128;
  q.symmetric = false;
  q.has_zero_points = true;
  return q;
}
MoeLayerQuery ct_int8() {
  MoeLayerQuery q = qwen3(Family::int8, "compressed-tensors");
  q.weight_key = "kInt8StaticChannelSym";
  q.activation_key = "kInt8DynamicTokenSym";
  return q;
}
MoeLayerQuery ct_w4a8(Family f) {
  MoeLayerQuery q = qwen3(f, "compressed-tensors");
  q.weight_bits = 4;
  q.group_size = 128;
  return q;
}
MoeLayerQuery unquantized(MoeLayerQuery q = qwen3(Family::unquantized, "")) { return q; }
MoeLayerQuery with_activation(MoeLayerQuery q, const std::string& a) {
  q.activation = a;
  return q;
}
MoeLayerQuery with_routing(MoeLayerQuery q, RoutingMethodType r) {
  q.routing = r;
  return q;
}

const Tweak kLora = [](Deployment& d) { d.lora = true; };
const Tweak kFp16 = [](Deployment& d) { d.model_dtype = FloatType::float16; };
// No --target names a POWER CPU: `host` is one when moepack is built there; a macOS host is the
// only `darwin` device.
const Tweak kPower = [](Deployment& d) { d.device.cpu_arch = CpuArch::powerpc; };
const Tweak kDarwin = [](Deployment& d) { d.device.darwin = true; };

std::vector<Case> wna16_cases() {
  return {
      {"wna16_ct_int4_g128_sm90_marlin", ct_int4(128), target("sm90"), "MARLIN", "MarlinExperts", "", ""},
      {"wna16_ct_int4_g128_cpu_amx_cpu_only_list", ct_int4(128), target("cpu-amx"), "CPU", "CPUExpertsInt4", "", ""},
      {"wna16_ct_int4_g32_sm100_mxint4_env", ct_int4(32), target("sm100", env("VLLM_USE_FLASHINFER_MOE_INT4", "1")), "FLASHINFER_TRTLLM",
       "TrtLlmMxint4ExpertsMonolithic", "", ""},
      {"wna16_ct_int4_g32_sm100_mxint4_default_off_marlin", ct_int4(32), target("sm100"), "MARLIN", "MarlinExperts", "", ""},
      {"wna16_gptq_bias_excludes_trtllm_marlin", gptq(128, false), target("sm100", env("VLLM_USE_FLASHINFER_MOE_INT4", "1")), "MARLIN", "MarlinExperts", "", ""},
      {"wna16_gptq_desc_act_strict_marlin_shape_humming", gptq(128, true), target("sm90", tp(4)), "HUMMING", "HummingIndexedExperts", "", ""},
      {"wna16_ct_g32_tp8_tile_padding_keeps_marlin", ct_int4(32), target("sm90", tp(8)), "MARLIN", "MarlinExperts", "", ""},
      // HUMMING is selected, then CompressedTensorsWNA16MoEMethod asserts (off Marlin) actorder != "group".
      {"wna16_ct_g32_tp8_group_actorder_humming_method_asserts", ct_int4(32, "group"), target("sm90", tp(8)), "", "", "AssertionError", ""},
      {"wna16_ct_g32_tp8_dynamic_actorder_triton", ct_int4(32, "dynamic"), target("sm90", tp(8)), "TRITON", "TritonWNA16Experts", "", ""},
      {"wna16_awq_sm90_marlin", awq(), target("sm90"), "MARLIN", "MarlinExperts", "", ""},
      {"wna16_moe_wna16_override_no_marlin_triton", gptq(128, false), target("sm90", [](Deployment& d) { d.quantization = "moe_wna16"; }), "TRITON",
       "TritonWNA16Experts", "", ""},
      {"wna16_xpu_list", ct_int4(128), target("xpu"), "XPU", "XPUExpertsWNA16", "", ""},
      // CompressedTensorsWNA16MoEMethod.create_weights: 768 / 8 = 96 rows per rank split a group
      // of 128, unless act-order loads w2's scales whole; asymmetric zero points need whole words.
      {"wna16_ct_create_weights_group_split_per_rank", ct_int4(128), target("sm90", tp(8)), "", "", "ValueError",
       "CompressedTensors WNA16 MoE with static group scales requires the MoE intermediate size per tensor-parallel partition (96) to be "
       "divisible by group_size (128). Scale groups would otherwise cross TP shard boundaries; use a compatible TP size or enable expert parallelism."},
      {"wna16_ct_create_weights_group_split_ep_whole_experts", ct_int4(128), target("sm90", all({tp(8), [](Deployment& d) { d.parallel.enable_expert_parallel = true; }})),
       "MARLIN", "MarlinExperts", "", ""},
      {"wna16_ct_create_weights_asym_hidden_not_whole_words", [] {
         MoeLayerQuery q = ct_int4(4);  // grouped (the method asserts grouped scales off Marlin), dividing 2044
         q.symmetric = false;
         q.has_zero_points = true;
         q.hidden_size = 2044;
         return q;
       }(), target("sm90"), "", "", "ValueError", "CompressedTensors WNA16 MoE: hidden_size (2044) must be divisible by packed_factor (8) for correct ZP unpacking."},
      // CPU: CPUExpertsInt4 takes kInt4Static only (GPTQ int4 whatever its group, AutoAWQ, compressed-tensors
      // symmetric int4 not of group 32), needs AMX; _process_weights_cpu refuses GPTQ desc_act.
      {"wna16_gptq_cpu_amx", gptq(32, false), target("cpu-amx"), "CPU", "CPUExpertsInt4", "", ""},
      {"wna16_awq_cpu_amx", awq(), target("cpu-amx"), "CPU", "CPUExpertsInt4", "", ""},
      {"wna16_gptq_cpu_without_amx_nothing_fits", gptq(128, false), target("cpu-avx512"), "", "", "NotImplementedError",
       "No WNA16 MoE backend supports the deployment configuration."},
      {"wna16_gptq_desc_act_cpu_process_weights_raises", gptq(128, true), target("cpu-amx"), "", "", "NotImplementedError",
       "CPU WNA16 MoE backend does not support GPTQ with desc_act=True. The fused MoE kernel has no g_idx reordering support."},
      {"wna16_ct_int4_g32_cpu_key_static32_refused", ct_int4(32), target("cpu-amx"), "", "", "NotImplementedError",
       "No WNA16 MoE backend supports the deployment configuration."},
      {"wna16_ct_int4_asym_cpu_key_asym_refused", [] { MoeLayerQuery q = ct_int4(128); q.symmetric = false; q.has_zero_points = true; return q; }(),
       target("cpu-amx"), "", "", "NotImplementedError", "No WNA16 MoE backend supports the deployment configuration."},
      {"wna16_moe_wna16_cpu_process_weights_type_error", gptq(128, false), target("cpu-amx", [](Deployment& d) { d.quantization = "moe_wna16"; }), "", "",
       "TypeError", "CPU WNA16 MoE backend requires AutoAWQConfig, AutoGPTQConfig or QuantizationArgs, got MoeWNA16Config."},
      {"wna16_ct_int4_actorder_group_cpu_method_asserts", ct_int4(128, "group"), target("cpu-amx"), "", "", "AssertionError", ""},
      {"wna16_ct_int4_channel_cpu_method_asserts", ct_int4(-1), target("cpu-amx"), "", "", "AssertionError", ""},
      {"wna16_ct_int4_channel_triton_method_asserts", ct_int4(-1), target("sm90", backend("triton")), "", "", "AssertionError", ""},
      {"wna16_ct_int4_channel_marlin_no_assert", ct_int4(-1), target("sm90"), "MARLIN", "MarlinExperts", "", ""},
      {"wna16_rocm_marlin_refused_triton", ct_int4(128), target("gfx942"), "TRITON", "TritonWNA16Experts", "", ""},
      {"wna16_gptq_sm70_no_marlin_bias_no_triton_emulation", gptq(128, false), target("sm70"), "EMULATION", "Int4EmulationTritonExperts", "", ""},
      // AWQ passes may_have_bias=True, and the bias test comes before the layout test.
      {"wna16_explicit_triton_awq_bias_refused", awq(), target("sm90", backend("triton")), "", "", "ValueError",
       "WNA16 MoE backend 'TRITON' does not support the deployment configuration since expert bias is not supported."},
      {"wna16_explicit_triton_moe_wna16_awq_layout_ok", awq(), target("sm90", all({backend("triton"), [](Deployment& d) { d.quantization = "moe_wna16"; }})),
       "TRITON", "TritonWNA16Experts", "", ""},
      {"wna16_explicit_name_not_in_map", ct_int4(128), target("sm90", backend("cutlass")), "", "", "ValueError",
       "moe_backend='cutlass' is not supported for WNA16 MoE. Expected one of ['triton', 'marlin', 'humming', 'flashinfer_trtllm', 'emulation']."},
      {"wna16_awq_sm70_below_min_capability", awq(), target("sm70"), "", "", "ValueError",
       "The quantization method auto_awq is not supported for the current GPU. Minimum capability: 75. Current capability: 70."},
      {"wna16_quantization_override_mismatch", ct_int4(128), target("sm90", [](Deployment& d) { d.quantization = "fp8"; }), "", "", "ValueError",
       "Quantization method specified in the model config (compressed-tensors) does not match the quantization method specified in the "
       "`quantization` argument (fp8)."},
      {"wna16_cpu_without_amx_nothing_fits", ct_int4(128), target("cpu-avx512"), "", "", "NotImplementedError",
       "No WNA16 MoE backend supports the deployment configuration."},
      // ---- CompressedTensorsMoEMethod.get_moe_method on ROCm: the FlyDSL W4A16 method ----
      {"wna16_ct_g32_gfx950_flydsl_method", ct_int4(32), target("gfx950", backend("flydsl")), "FLYDSL", "fused_flydsl_moe", "", ""},
      {"wna16_ct_g32_gfx950_flydsl_group_actorder_asserts", ct_int4(32, "group"), target("gfx950", backend("flydsl")), "", "", "AssertionError", ""},
      {"wna16_ct_g128_flydsl_not_a_wna16_backend", ct_int4(128), target("gfx950", backend("flydsl")), "", "", "ValueError",
       "moe_backend='flydsl' is not supported for WNA16 MoE."},
      {"wna16_ct_g32_gfx942_flydsl_not_a_wna16_backend", ct_int4(32), target("gfx942", backend("flydsl")), "", "", "ValueError",
       "moe_backend='flydsl' is not supported for WNA16 MoE."},
      {"wna16_ct_g32_gfx950_flydsl_with_lora_keeps_wna16_method", ct_int4(32), target("gfx950", all({backend("flydsl"), kLora})), "", "",
       "ValueError", "moe_backend='flydsl' is not supported for WNA16 MoE."},
  };
}

std::vector<Case> int8_w4a8_cases() {
  return {
      {"int8_sm90_triton", ct_int8(), target("sm90"), "TRITON", "TritonExperts", "", ""},
      {"int8_cpu_amx_x86_class", ct_int8(), target("cpu-amx"), "CPU", "CPUExpertsInt8", "", ""},
      {"int8_cpu_arm_class", ct_int8(), target("cpu-arm"), "CPU", "ArmCPUExpertsInt8", "", ""},
      {"int8_cpu_arm_fp16_activations_too", ct_int8(), target("cpu-arm", kFp16), "CPU", "ArmCPUExpertsInt8", "", ""},
      // 768 / 32 = 24 per rank: is_supported_config's intermediate % 32, and no x86 class on Arm.
      {"int8_cpu_arm_tp32_intermediate_not_32", ct_int8(), target("cpu-arm", tp(32)), "", "", "NotImplementedError", "No Int8 MoE backend supports"},
      {"int8_cpu_arm_ep_not_supported", ct_int8(), target("cpu-arm", [](Deployment& d) { d.parallel.tp = 2; d.parallel.enable_expert_parallel = true; }),
       "", "", "NotImplementedError", "No Int8 MoE backend supports"},
      // torch_bindings.cpp registers cpu_fused_moe_int8 only off __APPLE__.
      {"int8_cpu_arm_darwin_no_op", ct_int8(), target("cpu-arm", kDarwin), "", "", "NotImplementedError", "No Int8 MoE backend supports"},
      {"int8_cpu_without_amx_nothing_fits", ct_int8(), target("cpu-avx512"), "", "", "NotImplementedError",
       "No Int8 MoE backend supports the deployment configuration (weight_key=QuantKey(i8,scale(f32,static,per_channel),symmetric), "
       "activation_key=QuantKey(i8,scale(f32,dynamic,per_token),symmetric)). Set `VLLM_LOGGING_LEVEL=DEBUG`"},
      {"int8_sm70_triton_int8_needs_turing", ct_int8(), target("sm70"), "", "", "NotImplementedError", "No Int8 MoE backend supports"},
      {"int8_explicit_marlin_not_in_map", ct_int8(), target("sm90", backend("marlin")), "", "", "ValueError",
       "moe_backend='marlin' is not supported for Int8 MoE. Expected one of ['triton', 'humming']."},
      {"w4a8_fp8_sm90_cutlass", ct_w4a8(Family::w4a8), target("sm90"), "CUTLASS", "CutlassExpertsW4A8Fp8", "", ""},
      {"w4a8_fp8_sm90_fp16_refused", ct_w4a8(Family::w4a8), target("sm90", [](Deployment& d) { d.model_dtype = FloatType::float16; }), "", "",
       "NotImplementedError", "W4A8 MoE backend CUTLASS does not support the deployment configuration: kernel does not support torch.float16 input/output dtype."},
      {"w4a8_fp8_off_sm90_becomes_int8_path", ct_w4a8(Family::w4a8), target("sm100"), "", "", "NotImplementedError",
       "W4A8 Int8 MoE is only supported on CPU platforms"},
      {"w4a8_int8_cpu_arm", ct_w4a8(Family::w4a8_int8), target("cpu-arm"), "CPU_INT4", "CPUExpertsInt4", "", ""},
      {"w4a8_int8_x86_kernel_is_arm_only", ct_w4a8(Family::w4a8_int8), target("cpu-amx"), "", "", "NotImplementedError",
       "No W4A8 Int8 MoE backend supports the deployment configuration."},
  };
}

std::vector<Case> unquantized_cases() {
  return {
      {"unquantized_sm90_hopper_prefers_triton", unquantized(), target("sm90"), "TRITON", "TritonExperts", "", ""},
      {"unquantized_sm100_trtllm_bf16", unquantized(), target("sm100"), "FLASHINFER_TRTLLM", "TrtLlmBf16ExpertsMonolithic", "", ""},
      {"unquantized_sm100_swigluoai_demotes_flashinfer", with_activation(unquantized(), "swigluoai"), target("sm100"), "TRITON", "TritonExperts", "", ""},
      {"unquantized_sm100_dp2_default_routing_triton", with_routing(unquantized(), RoutingMethodType::Default),
       target("sm100", [](Deployment& d) { d.parallel.dp = 2; }), "TRITON", "TritonExperts", "", ""},
      {"unquantized_sm120_fi_cutlass", unquantized(), target("sm120"), "FLASHINFER_CUTLASS", "FlashInferExperts", "", ""},
      {"unquantized_lora_trtllm_lora_experts", unquantized(), target("sm100", kLora), "FLASHINFER_TRTLLM", "TrtLlmBf16LoRAExperts", "", ""},
      {"unquantized_lora_tp4_intermediate_not_128_triton", unquantized(), target("sm100", all({kLora, tp(4)})), "TRITON", "TritonExperts", "", ""},
      {"unquantized_cpu_amx_x86", unquantized(), target("cpu-amx"), "CPU", "X86CPUUnquantizedExperts", "", ""},
      {"unquantized_cpu_amx_fp16_generic_cpu", unquantized(), target("cpu-amx", [](Deployment& d) { d.model_dtype = FloatType::float16; }), "CPU",
       "CPUUnquantizedExperts", "", ""},
      {"unquantized_cpu_arm_neon", unquantized(), target("cpu-arm"), "CPU", "ArmCPUUnquantizedExperts", "", ""},
      {"unquantized_cpu_arm_fp16_needs_bf16_generic_cpu", unquantized(), target("cpu-arm", kFp16), "CPU", "CPUUnquantizedExperts", "", ""},
      {"unquantized_cpu_arm_darwin_generic_cpu", unquantized(), target("cpu-arm", kDarwin), "CPU", "CPUUnquantizedExperts", "", ""},
      {"unquantized_cpu_power_vsx", unquantized(), target("cpu-avx512", kPower), "CPU", "PowerCPUUnquantizedExperts", "", ""},
      {"unquantized_cpu_power_fp16_needs_bf16_generic_cpu", unquantized(), target("cpu-avx512", all({kPower, kFp16})), "CPU", "CPUUnquantizedExperts", "", ""},
      {"unquantized_gfx942_triton", unquantized(), target("gfx942"), "TRITON", "TritonExperts", "", ""},
      {"unquantized_gfx942_aiter_forced", unquantized(), target("gfx942", env("VLLM_ROCM_USE_AITER", "1")), "AITER", "AiterExperts", "", ""},
      {"unquantized_xpu", unquantized(), target("xpu"), "XPU", "XPUExperts", "", ""},
      {"unquantized_explicit_marlin_refused_issue_56832", unquantized(), target("sm90", backend("marlin")), "", "", "ValueError",
       "moe_backend='marlin' is not supported for unquantized MoE. Expected one of ['triton', 'batched_triton', 'flashinfer_trtllm', "
       "'flashinfer_cutlass', 'aiter']."},
      {"unquantized_humming_treated_as_auto", unquantized(), target("sm90", backend("humming")), "TRITON", "TritonExperts", "", ""},
      {"unquantized_explicit_batched_triton", unquantized(), target("sm90", backend("batched_triton")), "BATCHED_TRITON", "BatchedTritonExperts", "", ""},
      {"unquantized_explicit_trtllm_on_sm90_refused", unquantized(), target("sm90", backend("flashinfer_trtllm")), "", "", "ValueError",
       "Unquantized MoE backend FlashInfer TRTLLM does not support the deployment configuration since kernel does not support current device cuda."},
      {"unknown_moe_backend_literal", unquantized(), target("sm90", backend("turbo")), "", "", "ValueError",
       "Input should be 'auto', 'triton', 'batched_triton'"},
  };
}

// `--quantization NAME` on a 16-bit checkpoint: online quantization while loading
// (config/quantization.py _ONLINE_SHORTHANDS, quantization/online/*.py, Fp8Config unserialized,
// ExpertsInt8Config), each shorthand's MoE method passing its own keys to its family's selector.
Tweak quantization(const std::string& name) {
  return [name](Deployment& d) { d.quantization = name; };
}

std::vector<Case> online_cases() {
  return {
      {"online_fp8_plain_is_fp8config_per_tensor", unquantized(), target("sm90", quantization("fp8")), "TRITON", "TritonExperts", "", ""},
      {"online_fp8_per_block_sm100_trtllm", unquantized(), target("sm100", quantization("fp8_per_block")), "FLASHINFER_TRTLLM",
       "TrtLlmFp8ExpertsMonolithic", "", ""},
      {"online_fp8_per_channel_allows_vllm_cutlass", unquantized(), target("sm90", quantization("fp8_per_channel")), "VLLM_CUTLASS",
       "TritonOrCutlassExperts", "", ""},
      {"online_fp8_per_channel_marlin_refused_per_channel_scales", unquantized(), target("sm90", all({quantization("fp8_per_channel"), backend("marlin")})),
       "", "", "ValueError",
       "FP8 PTPC online MoE quant is not supported with the MARLIN backend, which does not implement per-output-channel weight scales."},
      {"online_mxfp8_sm100_trtllm", unquantized(), target("sm100", quantization("mxfp8")), "FLASHINFER_TRTLLM", "TrtLlmFp8ExpertsMonolithic", "", ""},
      {"online_mxfp4_rocm_emulation", unquantized(), target("gfx942", quantization("mxfp4")), "EMULATION", "OCP_MXQuantizationEmulationTritonExperts", "", ""},
      {"online_nvfp4_per_token_sm100_trtllm", unquantized(), target("sm100", quantization("nvfp4_per_token")), "FLASHINFER_TRTLLM",
       "TrtLlmNvFp4ExpertsMonolithic", "", ""},
      {"online_nvfp4_per_token_needs_blackwell", unquantized(), target("sm90", quantization("nvfp4_per_token")), "", "", "ValueError",
       "nvfp4_per_token online quantization requires a Blackwell (SM100) GPU."},
      {"online_int8_weight_only_sm90_triton", unquantized(), target("sm90", quantization("int8_per_channel_weight_only")), "TRITON", "TritonExperts", "", ""},
      {"online_int8_weight_only_not_a_rocm_method", unquantized(), target("gfx942", quantization("int8_per_channel_weight_only")), "", "", "ValueError",
       "int8_per_channel_weight_only quantization is currently not supported in rocm."},
      {"online_experts_int8_needs_ampere", unquantized(), target("sm75", quantization("experts_int8")), "", "", "ValueError",
       "The quantization method experts_int8 is not supported for the current GPU. Minimum capability: 80. Current capability: 75."},
      {"online_shorthand_checked_against_online_config_capability", unquantized(), target("sm70", quantization("fp8_per_tensor")), "", "", "ValueError",
       "The quantization method fp8_per_tensor is not supported for the current GPU. Minimum capability: 75. Current capability: 70."},
      {"online_unknown_name", unquantized(), target("sm90", quantization("fp9")), "", "", "ValueError",
       "Unknown quantization method: fp9. Must be one of ['awq', 'auto_awq', 'fp8', "},
      {"online_checkpoint_method_without_its_config_file", unquantized(), target("sm90", quantization("gptq")), "", "", "ValueError",
       "Cannot find the config file for gptq"},
  };
}

class OnlineDecisions : public ::testing::TestWithParam<Case> {};
TEST_P(OnlineDecisions, MatchesVllm) { check_case(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Table, OnlineDecisions, ::testing::ValuesIn(online_cases()), case_name);

TEST(OnlineDecisions, TheMethodAndKeysAreTheShorthands) {
  const Decision d = decide(unquantized(), target("sm90", quantization("fp8_per_channel")));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d.family, Family::fp8);
  EXPECT_EQ(d.quant_method, "online");
  EXPECT_EQ(d.method_class, "Fp8PtpcOnlineMoEMethod");
  EXPECT_EQ(d.weight_key.value_or(""), "kFp8StaticChannelSym");
  // A quantized checkpoint never turns online: the name must match its own method.
  const Decision mismatch = decide(ct_int8(), target("sm90", quantization("fp8_per_channel")));
  ASSERT_TRUE(mismatch.error.has_value());
  EXPECT_NE(mismatch.error->message.find("does not match"), std::string::npos);
}

class Wna16Decisions : public ::testing::TestWithParam<Case> {};
TEST_P(Wna16Decisions, MatchesVllm) { check_case(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Table, Wna16Decisions, ::testing::ValuesIn(wna16_cases()), case_name);

class Int8W4a8Decisions : public ::testing::TestWithParam<Case> {};
TEST_P(Int8W4a8Decisions, MatchesVllm) { check_case(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Table, Int8W4a8Decisions, ::testing::ValuesIn(int8_w4a8_cases()), case_name);

class UnquantizedDecisions : public ::testing::TestWithParam<Case> {};
TEST_P(UnquantizedDecisions, MatchesVllm) { check_case(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Table, UnquantizedDecisions, ::testing::ValuesIn(unquantized_cases()), case_name);

TEST(Wna16Decisions, IncompatibleBackendsAreRecordedWithoutAClass) {
  const Decision d = decide(gptq(128, false), target("sm90"));
  ASSERT_TRUE(d.ok());
  ASSERT_FALSE(d.candidates.empty());
  EXPECT_EQ(d.candidates.front().backend, "FLASHINFER_TRTLLM");
  EXPECT_EQ(d.candidates.front().experts_class, "");
  EXPECT_EQ(d.candidates.front().reason, "zero points and bias are not supported");
}

TEST(Wna16Decisions, WeightKeyFollowsTheMethod) {
  // moe_wna16 keys 4-bit group-32 as kInt4Static32; GPTQ keys every 4-bit group size as kInt4Static.
  MoeLayerQuery q = gptq(32, false);
  Decision plain = decide(q, target("sm90"));
  Decision converted = decide(q, target("sm90", [](Deployment& d) { d.quantization = "moe_wna16"; }));
  ASSERT_TRUE(plain.ok());
  ASSERT_TRUE(converted.ok());
  EXPECT_EQ(plain.weight_key.value_or(""), "kInt4Static");
  EXPECT_EQ(converted.weight_key.value_or(""), "kInt4Static32");
  EXPECT_EQ(converted.method_class, "MoeWNA16Method");
}

}  // namespace
}  // namespace moepack::oracle::test
