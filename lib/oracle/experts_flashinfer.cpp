// FlashInfer's experts classes (FlashInfer 0.6.17 through vLLM e9d1398d9,
// vllm/model_executor/layers/fused_moe/experts/): the TRT-LLM-gen fused MoE kernels
// (trtllm_{mxfp4,nvfp4,fp8,bf16,lora,mxint4}_moe.py), the CUTLASS fused MoE
// (flashinfer_cutlass_moe.py), the CuteDSL NVFP4 kernels (flashinfer_cutedsl_moe.py,
// flashinfer_cutedsl_batched_moe.py) and FlashInfer's b12x NVFP4 kernel (flashinfer_b12x_moe.py).
#include <algorithm>

#include "lib/oracle/experts_rows.h"

namespace moepack::oracle::experts {

namespace {

// FlashInfer exposes SiTU only in builds with ActivationType.Situ.
bool trtllm_mxfp4_activation(Act a, const KernelEnv& e) {
  if (a == Act::SITU) return e.flashinfer_has_situ();
  return a == Act::SWIGLUOAI || a == Act::SILU;
}
bool trtllm_nvfp4_activation(Act a, const KernelEnv& e) {
  if (a == Act::SITU) return e.flashinfer_has_situ();
  return a == Act::SILU || a == Act::RELU2_NO_MUL || a == Act::GELU || a == Act::GELU_TANH || a == Act::SWIGLUOAI_UNINTERLEAVE;
}

// The monolithic TRT-LLM FP8 kernel routes itself; per-tensor FP8 additionally accepts Llama-4 routing.
bool trtllm_fp8_routing(R r, const OptKey& w, const OptKey& a) {
  std::vector<R> allowed = {R::DeepSeekV3, R::Renormalize, R::RenormalizeNaive, R::SigmoidRenorm, R::Sigmoid, R::MiniMax2, R::Simulated};
  if (scheme_in(w, a, {{kFp8StaticTensorSym, kFp8StaticTensorSym}})) allowed.push_back(R::Llama4);
  return std::find(allowed.begin(), allowed.end(), r) != allowed.end();
}

const ExpertsClass kFlashInferExperts[] = {
    // ---- TRT-LLM-gen (SM100 family) ----
    {
        .name = "TrtLlmMxfp4ExpertsMonolithic",
        .monolithic = true,
        .device = sm100_family_with_flashinfer,
        .activation = trtllm_mxfp4_activation,
        .quant_scheme = schemes({{kMxfp4Static, std::nullopt}, {kMxfp4Static, kMxfp8Dynamic}}),
        .parallel = no_a2a_no_eplb_no_dp,
        .routing = routings({R::DeepSeekV3, R::Renormalize, R::RenormalizeNaive}),
        .router_logits = any_router_dtype,  // converted to bf16 inside the kernel
        .summary = "FlashInfer TRT-LLM MXFP4 MoE (SM100 family)",
    },
    {
        .name = "TrtLlmMxfp4ExpertsModular",
        .device = sm100_family_with_flashinfer,
        .activation = trtllm_mxfp4_activation,
        .quant_scheme = schemes({{kMxfp4Static, std::nullopt}, {kMxfp4Static, kMxfp8Dynamic}}),
        .parallel = any_parallel,
        .summary = "FlashInfer TRT-LLM MXFP4 MoE (SM100 family)",
    },
    {
        .name = "TrtLlmNvFp4ExpertsMonolithic",
        .monolithic = true,
        .device = sm100_family_with_flashinfer,
        .no_act_and_mul = true,
        .activation = trtllm_nvfp4_activation,
        .quant_scheme = schemes({{kNvfp4Static, kNvfp4Dynamic}}),
        .parallel = [](const MoeParallelConfig& p) { return !p.use_all2all_kernels() && !p.enable_eplb; },
        .routing = routings({R::DeepSeekV3, R::Renormalize, R::RenormalizeNaive, R::Llama4, R::SigmoidRenorm, R::Sigmoid, R::MiniMax2, R::Simulated}),
        .router_logits = bf16_or_fp32_router,
        .summary = "FlashInfer TRT-LLM NVFP4 MoE (SM100 family)",
    },
    {
        .name = "TrtLlmNvFp4ExpertsModular",
        .device = sm100_family_with_flashinfer,
        .no_act_and_mul = true,
        .activation = trtllm_nvfp4_activation,
        .quant_scheme = schemes({{kNvfp4Static, kNvfp4Dynamic}}),
        .parallel = any_parallel,
        .summary = "FlashInfer TRT-LLM NVFP4 MoE (SM100 family)",
    },
    {
        .name = "TrtLlmFp8ExpertsMonolithic",
        .monolithic = true,
        .device = sm100_family_with_flashinfer,
        .no_act_and_mul = true,
        .activation = acts({Act::SILU, Act::SWIGLUOAI_UNINTERLEAVE, Act::RELU2_NO_MUL}),
        .quant_scheme = schemes({{kFp8Static128BlockSym, kFp8Dynamic128Sym}, {kFp8StaticTensorSym, kFp8StaticTensorSym}, {kMxfp8Static, kMxfp8Dynamic}}),
        .parallel = [](const MoeParallelConfig& p) {
          return (!p.use_all2all_kernels() || p.use_ag_rs_all2all_kernels()) && !(p.enable_eplb || p.is_sequence_parallel());
        },
        .routing = trtllm_fp8_routing,
        .router_logits = bf16_or_fp32_router,
        .after = trtllm_expert_count_check,
        .summary = "FlashInfer TRT-LLM FP8 MoE (SM100 family)",
    },
    {
        .name = "TrtLlmFp8ExpertsModular",
        .device = sm100_family_with_flashinfer,
        .no_act_and_mul = true,
        .activation = acts({Act::SILU, Act::SWIGLUOAI_UNINTERLEAVE, Act::RELU2_NO_MUL}),
        .quant_scheme = schemes({{kFp8Static128BlockSym, kFp8Dynamic128Sym}, {kMxfp8Static, kMxfp8Dynamic}}),
        .parallel = [](const MoeParallelConfig& p) {
          return (!p.use_all2all_kernels() || p.use_ag_rs_all2all_kernels() || p.use_deepep_v2_kernels() ||
                  p.use_fi_nvl_one_sided_kernels() || p.use_fi_nvl_two_sided_kernels()) &&
                 !p.enable_eplb;
        },
        .after = trtllm_expert_count_check,
        .summary = "FlashInfer TRT-LLM FP8 MoE (SM100 family)",
    },
    {
        .name = "TrtLlmBf16ExpertsMonolithic",
        .monolithic = true,
        .device = sm100_family_with_flashinfer,
        .no_act_and_mul = true,
        .activation = acts({Act::SILU, Act::RELU2_NO_MUL}),
        .quant_scheme = unquantized,
        .parallel = ag_rs_or_no_a2a_no_eplb,
        .routing = routings({R::DeepSeekV3, R::Llama4, R::Renormalize, R::RenormalizeNaive, R::SigmoidRenorm, R::Sigmoid}),
        .router_logits = any_router_dtype,
        .after = trtllm_expert_count_check,
        .summary = "FlashInfer TRT-LLM BF16 MoE (SM100 family)",
    },
    {
        .name = "TrtLlmBf16ExpertsModular",
        .device = sm100_family_with_flashinfer,
        .no_act_and_mul = true,
        .activation = acts({Act::SILU, Act::RELU2_NO_MUL}),
        .quant_scheme = unquantized,
        .parallel = [](const MoeParallelConfig& p) {
          return p.use_all2all_kernels() && !p.use_ag_rs_all2all_kernels() && !p.use_deepep_ht_kernels() && !p.enable_eplb;
        },
        .router_logits = any_router_dtype,
        .after = trtllm_expert_count_check,
        .summary = "FlashInfer TRT-LLM BF16 MoE (SM100 family)",
    },
    {
        .name = "TrtLlmBf16LoRAExperts",
        .device = sm100_family_with_flashinfer,
        .activation = acts({Act::SILU}),
        .quant_scheme = unquantized,
        .parallel = ag_rs_or_no_a2a_no_eplb,
        .routing = routings({R::DeepSeekV3, R::Llama4, R::Renormalize, R::RenormalizeNaive}),
        .router_logits = any_router_dtype,
        .lora = true,
        .summary = "FlashInfer TRT-LLM BF16 MoE with LoRA deltas (SM100 family)",
    },
    {
        .name = "TrtLlmMxint4ExpertsMonolithic",
        .monolithic = true,
        .device = [](const KernelEnv& e) { return cuda_family(e, 100) && e.flashinfer_mxint4_available(); },
        .activation = acts({Act::SILU, Act::SWIGLUOAI}),
        .quant_scheme = schemes({{kInt4Static32, std::nullopt}}),
        .parallel = ag_rs_or_no_a2a_no_eplb,
        .routing = routings({R::Renormalize, R::RenormalizeNaive, R::DeepSeekV3, R::Llama4, R::Simulated}),
        // fp32 logits only where the routing kernel handles them internally.
        .router_logits = [](FloatType t, R r) { return t != FloatType::float32 || r == R::DeepSeekV3 || r == R::Simulated; },
        .summary = "FlashInfer TRT-LLM MxInt4 MoE (SM100 family, VLLM_USE_FLASHINFER_MOE_INT4=1)",
    },

    // ---- CUTLASS, CuteDSL, b12x ----
    {
        .name = "FlashInferExperts",
        // SM110 is excluded (flashinfer-ai/flashinfer#3134).
        .device = [](const KernelEnv& e) {
          return e.device.is_cuda() &&
                 (e.device.is_device_capability(90) || e.device.is_device_capability_family(100) || e.device.is_device_capability_family(120)) &&
                 e.has_flashinfer();
        },
        .no_act_and_mul = true,
        .activation = acts({Act::SILU, Act::GELU_TANH, Act::RELU2_NO_MUL, Act::SWIGLUOAI, Act::SWIGLUOAI_UNINTERLEAVE}),
        .quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv& e) {
          const Device& d = e.device;
          return (scheme_in(w, a, {{std::nullopt, std::nullopt}, {kFp8StaticTensorSym, kFp8StaticTensorSym}}) && d.has_device_capability(90)) ||
                 (scheme_in(w, a, {{kMxfp4Static, std::nullopt}, {kFp8Static128BlockSym, kFp8Dynamic128Sym}}) && d.is_device_capability(90)) ||
                 (scheme_in(w, a, {{kMxfp4Static, kMxfp8Dynamic}, {kNvfp4Static, kNvfp4Dynamic}}) && d.has_device_capability(100));
        },
        .parallel = any_parallel,
        .summary = "FlashInfer CUTLASS fused MoE (SM90, SM100 family, SM120 family)",
    },
    {
        .name = "FlashInferCuteDSLExperts",
        .device = sm100_family_with_flashinfer,
        .no_act_and_mul = true,
        .activation = acts({Act::SILU, Act::SWIGLUOAI, Act::SWIGLUOAI_UNINTERLEAVE, Act::RELU2_NO_MUL}),
        .quant_scheme = schemes({{kNvfp4Static, kNvfp4Dynamic}}),
        .parallel = any_parallel,
        .summary = "FlashInfer CuteDSL NVFP4 MoE (SM100 family)",
    },
    {
        .name = "FlashInferCuteDSLBatchedExperts",
        .format = ActivationFormat::BatchedExperts,
        .device = sm100_family_with_flashinfer,
        .activation = acts({Act::SILU}),
        .quant_scheme = schemes({{kNvfp4Static, kNvfp4Dynamic}}),
        .parallel = any_parallel,
        .summary = "FlashInfer CuteDSL masked grouped GEMM NVFP4 MoE, batched format (SM100 family)",
    },
    {
        .name = "FlashInferB12xExperts",
        .device = [](const KernelEnv& e) { return cuda_family(e, 120) && e.has_flashinfer(); },
        .no_act_and_mul = true,
        .activation = acts({Act::SILU, Act::GELU_TANH, Act::RELU2_NO_MUL}),
        .quant_scheme = schemes({{kNvfp4Static, kNvfp4Dynamic}, {kNvfp4Static, std::nullopt}}),
        .parallel = [](const MoeParallelConfig& p) { return !p.use_ep; },
        .summary = "FlashInfer b12x NVFP4 MoE (SM120 family, explicit only)",
    },
};

}  // namespace

std::span<const ExpertsClass> flashinfer_experts() { return kFlashInferExperts; }

}  // namespace moepack::oracle::experts
