// vLLM's own CUTLASS grouped-GEMM experts (vllm/model_executor/layers/fused_moe/experts/cutlass_moe.py
// @ e9d1398d9): FP8, NVFP4, MXFP4 W4A4 and INT4 x FP8.
#include "lib/oracle/experts_rows.h"

namespace moepack::oracle::experts {

namespace {

bool grouped_gemm(const KernelEnv& e) { return e.cutlass_group_gemm_supported(); }

const QuantSchemeCheck& fp8_schemes() {
  static const QuantSchemeCheck check =
      schemes({{kFp8StaticChannelSym, kFp8DynamicTokenSym}, {kFp8StaticTensorSym, kFp8DynamicTensorSym}, {kFp8StaticTensorSym, kFp8StaticTensorSym}});
  return check;
}

const ExpertsClass kCutlassExperts[] = {
    {
        .name = "CutlassExpertsFp8",
        .device = grouped_gemm,
        .activation = gated_apply_set,
        .quant_scheme = fp8_schemes(),
        .parallel = [](const MoeParallelConfig& p) {
          return !(p.use_fi_nvl_two_sided_kernels() || p.use_deepep_ht_kernels() || p.use_fi_nvl_one_sided_kernels());
        },
        .summary = "vLLM CUTLASS grouped FP8 GEMM",
    },
    {
        .name = "CutlassBatchedExpertsFp8",
        .format = ActivationFormat::BatchedExperts,
        .device = grouped_gemm,
        .activation = gated_apply_set,
        .quant_scheme = fp8_schemes(),
        .parallel = any_parallel,
        .summary = "vLLM CUTLASS grouped FP8 GEMM",
    },
    {
        .name = "CutlassExpertsFp4",
        .device = [](const KernelEnv& e) {
          return e.device.is_cuda() && (e.device.is_device_capability_family(100) || e.device.is_device_capability_family(110) ||
                                        e.device.is_device_capability_family(120));
        },
        .no_act_and_mul = true,
        .activation = apply_set,
        .quant_scheme = schemes({{kNvfp4Static, kNvfp4Dynamic}}),
        .parallel = single_ep_rank,
        .batch_invariant = true,
        .summary = "vLLM CUTLASS NVFP4 MoE (SM100/SM110/SM120 families)",
    },
    {
        .name = "CutlassExpertsMxfp4",
        .device = [](const KernelEnv& e) { return e.mxfp4_experts_quant_supported(); },
        .no_act_and_mul = true,
        .activation = apply_set,
        .quant_scheme = schemes({{kMxfp4Static, kMxfp4Dynamic}}),
        .parallel = single_ep_rank,
        .summary = "vLLM CUTLASS MXFP4 W4A4 MoE (10.0 <= SM < 12.0; compressed-tensors/AutoRound MXFP4)",
    },
    {
        .name = "CutlassExpertsW4A8Fp8",
        .device = grouped_gemm,
        .activation = gated_apply_set,
        .quant_scheme = schemes({{kInt4Static, kFp8DynamicTokenSym}}),
        .parallel = any_parallel,
        .before = [](const CheckInput& in) -> std::optional<std::string> {
          if (in.moe.in_dtype != FloatType::bfloat16) return "kernel does not support " + float_type_torch_name(in.moe.in_dtype) + " input/output dtype";
          return std::nullopt;
        },
        .summary = "vLLM CUTLASS INT4 x FP8 MoE",
    },
};

}  // namespace

std::span<const ExpertsClass> cutlass_experts() { return kCutlassExperts; }

}  // namespace moepack::oracle::experts
