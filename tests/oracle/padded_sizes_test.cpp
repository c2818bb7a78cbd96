// Padded sizes of the non-MXFP4 families at real model shapes and TP 1/2/4/8: the allocation
// round-up (maybe_roundup_sizes) plus the zero padding each backend's weight conversion adds
// (convert_to_*_moe_kernel_format @ vLLM e9d1398d9; lib/oracle/sizes_layouts.h lists the rules).
// Rows are named after the vLLM code path they exercise.
#include "tests/oracle/oracle_cases.h"

namespace moepack::oracle::test {
namespace {

// Mixtral-8x7B experts: hidden 4096, intermediate 14336, 8 experts, top-2, SiLU.
MoeLayerQuery mixtral(Family family, const std::string& quant_method) {
  MoeLayerQuery q = qwen3(family, quant_method);
  q.model_type = "mixtral";
  q.hidden_size = 4096;
  q.moe_intermediate_size = 14336;
  q.num_experts = 8;
  q.top_k = 2;
  return q;
}
// gpt-oss's expert shape (H = I = 2880) in another family: SiLU, no biases, no clamp, so the
// family's own selection rules decide.
MoeLayerQuery gpt_oss_shape(Family family, const std::string& quant_method) {
  MoeLayerQuery q = qwen3(family, quant_method);
  q.hidden_size = 2880;
  q.moe_intermediate_size = 2880;
  return q;
}

MoeLayerQuery nvfp4(MoeLayerQuery q) {
  q.weight_key = "kNvfp4Static";
  q.activation_key = "kNvfp4Dynamic";
  return q;
}
MoeLayerQuery fp8_tensor(MoeLayerQuery q) {
  q.weight_key = "kFp8StaticTensorSym";
  q.activation_key = "kFp8StaticTensorSym";
  return q;
}
MoeLayerQuery fp8_block(MoeLayerQuery q) {
  q.weight_key = "kFp8Static128BlockSym";
  q.activation_key = "kFp8Dynamic128Sym";
  return q;
}
MoeLayerQuery online_fp8_block(MoeLayerQuery q) {
  q = fp8_block(q);
  q.quant_method = "online";
  return q;
}
MoeLayerQuery online_tensor(MoeLayerQuery q) {
  q.method_class = "Fp8PerTensorOnlineMoEMethod";
  return q;
}
MoeLayerQuery gptq(MoeLayerQuery q, int group) {
  q.weight_bits = 4;
  q.group_size = group;
  return q;
}
MoeLayerQuery non_gated(MoeLayerQuery q) {
  q.activation = "relu2_no_mul";
  return q;
}

struct PaddedCase {
  std::string name;
  MoeLayerQuery query;
  Deployment deployment;
  std::string backend;  // expected backend ("" when refused)
  int hidden = 0, intermediate = 0;                // per rank, before any round-up
  int padded_hidden = 0, padded_intermediate = 0;  // what the converted weights have
  std::string error_type;
  std::string error_text;
};

Deployment at(const std::string& device, int tp_size, const std::string& moe_backend = "") {
  return target(device, all({tp(tp_size), moe_backend.empty() ? Tweak([](Deployment&) {}) : backend(moe_backend)}));
}
// b12x is an optional extra (vllm[b12x]).
Deployment with_b12x(Deployment d) {
  d.packages.b12x = true;
  return d;
}

Deployment power(Deployment d) {
  d.device.cpu_arch = CpuArch::powerpc;
  return d;
}
MoeLayerQuery swigluoai(MoeLayerQuery q) {
  q.activation = "swigluoai";
  return q;
}

// gtest prints a failing row by name instead of its bytes.
[[maybe_unused]] void PrintTo(const PaddedCase& c, std::ostream* os) { *os << c.name; }

std::vector<PaddedCase> cases() {
  using F = Family;
  const MoeLayerQuery qwen_nvfp4 = nvfp4(qwen3(F::nvfp4, "modelopt_fp4"));
  const MoeLayerQuery ds_nvfp4 = nvfp4(deepseek_v3(F::nvfp4, "modelopt_fp4"));
  const MoeLayerQuery mixtral_nvfp4 = nvfp4(mixtral(F::nvfp4, "modelopt_fp4"));
  const MoeLayerQuery gpt_oss_nvfp4 = nvfp4(gpt_oss_shape(F::nvfp4, "modelopt_fp4"));
  const MoeLayerQuery qwen_fp8 = fp8_tensor(qwen3(F::fp8, "fp8"));
  const MoeLayerQuery gpt_oss_fp8 = fp8_tensor(gpt_oss_shape(F::fp8, "fp8"));
  const MoeLayerQuery mixtral_fp8 = fp8_tensor(mixtral(F::fp8, "fp8"));
  const MoeLayerQuery ds_fp8_block = fp8_block(deepseek_v3(F::fp8, "fp8"));
  const std::string prep_refusal = "Intermediate size padding for w1 and w3, for %s NvFp4 backend, but this is not currently supported";
  return {
      // ---- NVFP4 FlashInfer TRT-LLM: align_trtllm_fp4_moe_hidden_dim_for_fi (hidden -> 256) and
      // align_fp4_moe_weights_for_fi (intermediate -> 64 gated) ----
      {"nvfp4_trtllm_qwen3_tp1_aligned", qwen_nvfp4, at("sm100", 1), "FLASHINFER_TRTLLM", 2048, 768, 2048, 768, "", ""},
      {"nvfp4_trtllm_qwen3_tp4_aligned", qwen_nvfp4, at("sm100", 4), "FLASHINFER_TRTLLM", 2048, 192, 2048, 192, "", ""},
      {"nvfp4_trtllm_qwen3_tp8_intermediate_96_to_128", qwen_nvfp4, at("sm100", 8), "FLASHINFER_TRTLLM", 2048, 96, 2048, 128, "", ""},
      {"nvfp4_trtllm_deepseek_v3_tp8_hidden_7168_is_256_aligned", ds_nvfp4, at("sm100", 8), "FLASHINFER_TRTLLM", 7168, 256, 7168, 256, "", ""},
      {"nvfp4_trtllm_mixtral_tp8_aligned", mixtral_nvfp4, at("sm100", 8), "FLASHINFER_TRTLLM", 4096, 1792, 4096, 1792, "", ""},
      {"nvfp4_trtllm_gpt_oss_shape_tp1_hidden_to_3072", gpt_oss_nvfp4, at("sm100", 1), "FLASHINFER_TRTLLM", 2880, 2880, 3072, 2880, "", ""},
      {"nvfp4_trtllm_gpt_oss_shape_tp2_intermediate_to_1472", gpt_oss_nvfp4, at("sm100", 2), "FLASHINFER_TRTLLM", 2880, 1440, 3072, 1472, "", ""},
      {"nvfp4_trtllm_gpt_oss_shape_tp4_intermediate_to_768", gpt_oss_nvfp4, at("sm100", 4), "FLASHINFER_TRTLLM", 2880, 720, 3072, 768, "", ""},
      {"nvfp4_trtllm_gpt_oss_shape_tp8_intermediate_to_384", gpt_oss_nvfp4, at("sm100", 8), "FLASHINFER_TRTLLM", 2880, 360, 3072, 384, "", ""},
      {"nvfp4_trtllm_non_gated_intermediate_to_128", non_gated(qwen_nvfp4), at("sm100", 4, "flashinfer_trtllm"), "FLASHINFER_TRTLLM", 2048, 192, 2048, 256, "", ""},

      // ---- NVFP4 FlashInfer CUTLASS: swizzle_blockscale pads w13 scale rows to 128; gated
      // weights cannot follow (prepare_nvfp4_moe_layer_for_fi_or_cutlass) ----
      {"nvfp4_fi_cutlass_qwen3_tp4_rows_384_aligned", qwen_nvfp4, at("sm100", 4, "flashinfer_cutlass"), "FLASHINFER_CUTLASS", 2048, 192, 2048, 192, "", ""},
      {"nvfp4_fi_cutlass_mixtral_tp8_aligned", mixtral_nvfp4, at("sm100", 8, "flashinfer_cutlass"), "FLASHINFER_CUTLASS", 4096, 1792, 4096, 1792, "", ""},
      {"nvfp4_fi_cutlass_qwen3_tp8_gated_rows_192_refused", qwen_nvfp4, at("sm100", 8, "flashinfer_cutlass"), "", 2048, 96, 2048, 96,
       "NotImplementedError", "('" + prep_refusal + "', 'FLASHINFER_CUTLASS')"},
      {"nvfp4_vllm_cutlass_gpt_oss_shape_tp2_gated_rows_2880_refused", gpt_oss_nvfp4, at("sm100", 2, "cutlass"), "", 2880, 1440, 2880, 1440,
       "NotImplementedError", "('" + prep_refusal + "', 'VLLM_CUTLASS')"},
      {"nvfp4_fi_cutlass_non_gated_intermediate_to_128", non_gated(qwen_nvfp4), at("sm100", 8, "flashinfer_cutlass"), "FLASHINFER_CUTLASS", 2048, 96, 2048, 128, "", ""},

      // ---- NVFP4 b12x: _pad_gated_weights pads each gate/up half to 64 ----
      {"nvfp4_b12x_qwen3_tp8_gated_half_to_128", qwen_nvfp4, with_b12x(at("sm120", 8, "b12x")), "B12X", 2048, 96, 2048, 128, "", ""},
      {"nvfp4_b12x_gpt_oss_shape_tp2_gated_half_to_1472", gpt_oss_nvfp4, with_b12x(at("sm120", 2, "b12x")), "B12X", 2880, 1440, 2880, 1472, "", ""},

      // ---- NVFP4 Marlin: prepare_nvfp4_moe_layer_for_marlin (64 when hidden % 128 == 0, else 128) ----
      {"nvfp4_marlin_qwen3_tp8_intermediate_to_128", qwen_nvfp4, at("sm89", 8), "MARLIN", 2048, 96, 2048, 128, "", ""},
      {"nvfp4_marlin_deepseek_v3_tp8_aligned", ds_nvfp4, at("sm89", 8), "MARLIN", 7168, 256, 7168, 256, "", ""},
      {"nvfp4_marlin_gpt_oss_shape_tp1_hidden_not_128_pads_intermediate_to_128", gpt_oss_nvfp4, at("sm89", 1), "MARLIN", 2880, 2880, 2880, 2944, "", ""},
      {"nvfp4_marlin_gpt_oss_shape_tp4_intermediate_to_768", gpt_oss_nvfp4, at("sm89", 4), "MARLIN", 2880, 720, 2880, 768, "", ""},

      // ---- FP8 per-tensor on FlashInfer: prepare_fp8_moe_layer_for_fi -> align_moe_weights_for_fi
      // (intermediate -> 16 gated, 128 otherwise) ----
      {"fp8_tensor_fi_cutlass_qwen3_tp8_96_is_16_aligned", qwen_fp8, at("sm100", 8, "flashinfer_cutlass"), "FLASHINFER_CUTLASS", 2048, 96, 2048, 96, "", ""},
      {"fp8_tensor_fi_cutlass_gpt_oss_shape_tp8_360_to_368", gpt_oss_fp8, at("sm100", 8, "flashinfer_cutlass"), "FLASHINFER_CUTLASS", 2880, 360, 2880, 368, "", ""},
      {"fp8_tensor_fi_trtllm_gpt_oss_shape_tp8_360_to_368", gpt_oss_fp8, at("sm100", 8, "flashinfer_trtllm"), "FLASHINFER_TRTLLM", 2880, 360, 2880, 368, "", ""},
      {"fp8_tensor_fi_cutlass_mixtral_tp8_aligned", mixtral_fp8, at("sm100", 8, "flashinfer_cutlass"), "FLASHINFER_CUTLASS", 4096, 1792, 4096, 1792, "", ""},
      {"fp8_tensor_fi_cutlass_non_gated_to_128", non_gated(qwen_fp8), at("sm100", 8, "flashinfer_cutlass"), "FLASHINFER_CUTLASS", 2048, 96, 2048, 128, "", ""},
      {"fp8_block_fi_cutlass_never_padded", ds_fp8_block, at("sm90", 8, "flashinfer_cutlass"), "FLASHINFER_CUTLASS", 7168, 256, 7168, 256, "", ""},

      // ---- FP8 Marlin: marlin_moe_padded_intermediate(n, group) (channel/tensor: 64) ----
      {"fp8_tensor_marlin_qwen3_tp8_96_to_128", qwen_fp8, at("sm90", 8, "marlin"), "MARLIN", 2048, 96, 2048, 128, "", ""},
      {"fp8_tensor_marlin_gpt_oss_shape_tp2_1440_to_1472", gpt_oss_fp8, at("sm90", 2, "marlin"), "MARLIN", 2880, 1440, 2880, 1472, "", ""},
      {"fp8_block_marlin_deepseek_v3_tp8_128_aligned", ds_fp8_block, at("sm90", 8, "marlin"), "MARLIN", 7168, 256, 7168, 256, "", ""},

      // ---- Online block FP8: Fp8PerBlockOnlineMoEMethod.maybe_roundup_sizes (both -> 128) ----
      {"fp8_online_block_gpt_oss_shape_tp1_both_to_2944", online_fp8_block(gpt_oss_shape(F::fp8, "online")), at("sm90", 1), "TRITON", 2880, 2880, 2944, 2944, "", ""},
      {"fp8_online_block_qwen3_tp8_96_to_128", online_fp8_block(qwen3(F::fp8, "online")), at("sm90", 8), "TRITON", 2048, 96, 2048, 128, "", ""},
      {"fp8_online_block_mixtral_tp4_aligned", online_fp8_block(mixtral(F::fp8, "online")), at("sm90", 4), "TRITON", 4096, 3584, 4096, 3584, "", ""},

      // The online methods choose their own keys: per-block without any in the query, and the
      // per-tensor variant (no round-up of its own; Marlin pads its intermediate to 64).
      {"fp8_online_block_keys_from_method_gpt_oss_shape_tp2", gpt_oss_shape(F::fp8, "online"), at("sm90", 2), "TRITON", 2880, 1440, 2944, 1536, "", ""},
      {"fp8_online_tensor_marlin_gpt_oss_shape_tp8_360_to_384", online_tensor(gpt_oss_shape(F::fp8, "online")), at("sm90", 8, "marlin"), "MARLIN",
       2880, 360, 2880, 384, "", ""},

      // ---- WNA16 Marlin: _process_weights_marlin / _process_awq_weights_marlin pad to lcm(64, group) ----
      {"wna16_gptq_channel_marlin_qwen3_tp8_96_to_128", gptq(qwen3(F::wna16, "auto_gptq"), -1), at("sm90", 8), "MARLIN", 2048, 96, 2048, 128, "", ""},
      {"wna16_gptq_g128_marlin_qwen3_tp2_aligned", gptq(qwen3(F::wna16, "auto_gptq"), 128), at("sm90", 2), "MARLIN", 2048, 384, 2048, 384, "", ""},
      {"wna16_gptq_g128_marlin_mixtral_tp8_aligned", gptq(mixtral(F::wna16, "auto_gptq"), 128), at("sm90", 8), "MARLIN", 4096, 1792, 4096, 1792, "", ""},
      {"wna16_gptq_g128_marlin_deepseek_v3_tp8_aligned", gptq(deepseek_v3(F::wna16, "auto_gptq"), 128), at("sm90", 8), "MARLIN", 7168, 256, 7168, 256, "", ""},
      {"wna16_ct_g32_marlin_qwen3_tp8_96_to_128", gptq(qwen3(F::wna16, "compressed-tensors"), 32), at("sm90", 8), "MARLIN", 2048, 96, 2048, 128, "", ""},
      {"wna16_awq_g128_marlin_qwen3_tp2_aligned", gptq(qwen3(F::wna16, "auto_awq"), 128), at("sm90", 2), "MARLIN", 2048, 384, 2048, 384, "", ""},
      {"wna16_awq_channel_marlin_qwen3_tp8_96_to_128", gptq(qwen3(F::wna16, "auto_awq"), -1), at("sm90", 8), "MARLIN", 2048, 96, 2048, 128, "", ""},
      // ---- CPU unquantized: _pad_moe_intermediate to lcm(output, reduction alignment): Arm 32,
      // POWER 16 (no --target: `host` on a POWER machine), never for SWIGLUOAI ----
      {"unquantized_cpu_arm_gpt_oss_shape_tp8_360_to_384", gpt_oss_shape(F::unquantized, ""), at("cpu-arm", 8), "CPU", 2880, 360, 2880, 384, "", ""},
      {"unquantized_cpu_arm_gpt_oss_shape_tp4_720_to_736", gpt_oss_shape(F::unquantized, ""), at("cpu-arm", 4), "CPU", 2880, 720, 2880, 736, "", ""},
      {"unquantized_cpu_power_gpt_oss_shape_tp8_360_to_368", gpt_oss_shape(F::unquantized, ""), power(at("cpu-avx512", 8)), "CPU", 2880, 360, 2880, 368, "", ""},
      {"unquantized_cpu_power_gpt_oss_shape_tp4_720_aligned", gpt_oss_shape(F::unquantized, ""), power(at("cpu-avx512", 4)), "CPU", 2880, 720, 2880, 720, "", ""},
      {"unquantized_cpu_arm_swigluoai_tp8_360_unpadded_nothing_fits", swigluoai(gpt_oss_shape(F::unquantized, "")), at("cpu-arm", 8), "", 2880, 360, 2880, 360,
       "NotImplementedError", "No Unquantized MoE backend supports the deployment configuration."},
      {"wna16_gpt_oss_shape_hidden_not_128_no_marlin_humming_unpadded", gptq(gpt_oss_shape(F::wna16, "auto_gptq"), 32), at("sm90", 2), "HUMMING", 2880, 1440, 2880, 1440, "", ""},
  };
}

class PaddedSizesTable : public ::testing::TestWithParam<PaddedCase> {};
TEST_P(PaddedSizesTable, MatchesVllm) {
  const PaddedCase& c = GetParam();
  const Decision d = decide(c.query, c.deployment);
  EXPECT_EQ(d.hidden_size, c.hidden);
  EXPECT_EQ(d.intermediate_size, c.intermediate);
  if (c.error_type.empty()) {
    ASSERT_TRUE(d.ok()) << d.error->type << ": " << d.error->message;
    EXPECT_EQ(d.backend.value_or(""), c.backend);
  } else {
    ASSERT_FALSE(d.ok()) << "selected " << d.backend.value_or("-");
    EXPECT_EQ(d.error->type, c.error_type);
    EXPECT_NE(d.error->message.find(c.error_text), std::string::npos) << d.error->message;
  }
  EXPECT_EQ(d.padded_hidden_size, c.padded_hidden);
  EXPECT_EQ(d.padded_intermediate_size, c.padded_intermediate);
}
std::string padded_case_name(const ::testing::TestParamInfo<PaddedCase>& info) {
  std::string s;
  for (char ch : info.param.name) s += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return s;
}
INSTANTIATE_TEST_SUITE_P(Table, PaddedSizesTable, ::testing::ValuesIn(cases()), padded_case_name);

}  // namespace
}  // namespace moepack::oracle::test
