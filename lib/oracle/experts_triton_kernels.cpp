// OpenAI triton_kernels v3.5.1 MXFP4 experts, as vLLM runs them for gpt-oss
// (vllm/model_executor/layers/fused_moe/experts/gpt_oss_triton_kernels_moe.py @ e9d1398d9).
#include "lib/oracle/experts_rows.h"

namespace moepack::oracle::experts {

namespace {

// CUDA 9.0 <= cap < 11.0 (Hopper, Blackwell SM10x); ROCm gfx9 or RDNA3/4; plus triton_kernels.
bool triton_kernels_device(const KernelEnv& e) {
  bool window = false;
  if (e.device.is_cuda()) {
    const int cap = e.device.cuda_capability.to_int();
    window = cap >= 90 && cap < 110;
  } else if (e.device.is_rocm()) {
    window = e.device.on_gfx9() || e.device.on_gfx1x();
  }
  return window && e.triton_kernels();
}

const ExpertsClass kTritonKernelsExperts[] = {
    {
        .name = "OAITritonMxfp4ExpertsMonolithic",
        .monolithic = true,
        .device = triton_kernels_device,
        .activation = acts({Act::SWIGLUOAI}),
        .quant_scheme = schemes({{kMxfp4Static, std::nullopt}}),
        .parallel = no_a2a_no_eplb_no_dp,
        .routing = routings({R::Renormalize, R::RenormalizeNaive}),
        .router_logits = any_router_dtype,
        .summary = "OpenAI triton_kernels MXFP4 MoE",
    },
    {
        .name = "OAITritonExperts",
        .device = triton_kernels_device,
        .activation = acts({Act::SWIGLUOAI}),
        .quant_scheme = schemes({{kMxfp4Static, std::nullopt}}),
        .parallel = any_parallel,
        .summary = "OpenAI triton_kernels MXFP4 MoE",
    },
    {
        .name = "UnfusedOAITritonExperts",
        .device = triton_kernels_device,
        .activation = acts({Act::SILU, Act::GELU, Act::SWIGLUOAI, Act::SWIGLUSTEP, Act::SWIGLUOAI_UNINTERLEAVE}),
        .quant_scheme = schemes({{kMxfp4Static, std::nullopt}}),
        .parallel = any_parallel,
        .lora = true,
        .summary = "OpenAI triton_kernels MXFP4 MoE",
    },
};

}  // namespace

std::span<const ExpertsClass> triton_kernels_experts() { return kTritonKernelsExperts; }

}  // namespace moepack::oracle::experts
