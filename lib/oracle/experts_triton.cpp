// vLLM's fused_moe Triton experts and the classes built on them
// (vllm/model_executor/layers/fused_moe/experts/ @ e9d1398d9): TritonExperts and
// TritonWNA16Experts (triton_moe.py), BatchedTritonExperts (fused_batched_moe.py), the emulation
// experts (ocp_mx_emulation_moe.py, nvfp4_emulation_moe.py, int4_emulation_moe.py,
// mxfp8_emulation_moe.py), the MXFP8 dot_scaled kernel (mxfp8_native_moe.py) and the
// FallbackExperts that fall back to Triton (triton_deep_gemm_moe.py, triton_cutlass_moe.py).
//
// The subclasses inherit TritonExperts' checks (device, act-and-mul, parallel config, batch
// invariance, LoRA and its expert-count check) and override some; each row states them all.
#include "lib/oracle/experts_rows.h"

namespace moepack::oracle::experts {

namespace {

bool triton_quant_scheme(const OptKey& w, const OptKey& a, const KernelEnv& e) {
  if (!w && !a) return true;
  const bool int8_ok = (e.device.is_cuda() && e.device.has_device_capability(75)) || e.device.is_rocm();
  if (int8_ok && scheme_in(w, a, {{kInt8StaticChannelSym, kInt8DynamicTokenSym}, {kInt8StaticTensorSym, kInt8DynamicTensorSym}}))
    return true;
  if (e.device.supports_fp8() &&
      scheme_in(w, a,
                {{kFp8Static128BlockSym, kFp8Dynamic128Sym},
                 {kFp8StaticChannelSym, kFp8DynamicTokenSym},
                 {kFp8StaticTensorSym, kFp8DynamicTokenSym},
                 {kFp8StaticTensorSym, kFp8StaticTensorSym},
                 {kFp8StaticTensorSym, kFp8DynamicTensorSym}}))
    return true;
  return false;
}

// Mxfp8TritonExpertsBase: TritonExperts restricted to (MXFP8, MXFP8).
bool mxfp8_activation(Act a, const KernelEnv&) { return a == Act::SWIGLUOAI_UNINTERLEAVE || apply_moe_activation_supported(a); }

const ExpertsClass kTritonExperts[] = {
    {
        .name = "TritonExperts",
        .device = cuda_or_rocm_or_xpu,
        .no_act_and_mul = true,
        .activation = apply_set,
        .quant_scheme = triton_quant_scheme,
        .parallel = no_fi_nvlink,
        .batch_invariant = true,
        .lora = true,
        .after = triton_expert_count_check,
        .summary = "Triton fused MoE (BF16/FP16, FP8, INT8 W8A8)",
    },
    {
        .name = "BatchedTritonExperts",
        .format = ActivationFormat::BatchedExperts,
        .device = cuda_or_rocm_or_xpu,
        .no_act_and_mul = true,
        .activation = acts({Act::SILU, Act::GELU, Act::GELU_TANH, Act::SWIGLUOAI, Act::SILU_NO_MUL, Act::GELU_NO_MUL, Act::GELU_TANH_NO_MUL,
                            Act::RELU2_NO_MUL}),
        .quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv& e) {
          if (!w && !a) return true;
          const Device& d = e.device;
          const bool fp8 = (d.is_rocm() && (d.cdna_version() > 2 || d.on_rdna4())) || (d.is_cuda() && d.has_device_capability(89));
          return fp8 && scheme_in(w, a,
                                  {{kFp8Static128BlockSym, kFp8Dynamic128Sym},
                                   {kFp8StaticChannelSym, kFp8DynamicTokenSym},
                                   {kFp8StaticTensorSym, kFp8DynamicTokenSym},
                                   {kFp8StaticTensorSym, kFp8StaticTensorSym},
                                   {kFp8StaticTensorSym, kFp8DynamicTensorSym}});
        },
        .parallel = any_parallel,
        .summary = "Triton fused MoE, batched format",
    },
    {
        .name = "TritonWNA16Experts",
        .device = cuda_or_rocm_or_xpu,
        .no_act_and_mul = true,
        .activation = acts({Act::SILU, Act::GELU, Act::GELU_TANH, Act::SWIGLUOAI, Act::SWIGLUOAI_UNINTERLEAVE, Act::SWIGLUSTEP, Act::SILU_NO_MUL,
                            Act::GELU_NO_MUL, Act::GELU_TANH_NO_MUL, Act::RELU2_NO_MUL}),
        .quant_scheme = [](const OptKey& w, const OptKey&, const KernelEnv&) {
          return key_in(w, {kInt4Static, kInt8Static, kInt4Static32, kInt4StaticAsym, kInt4Static32Asym});
        },
        .parallel = no_fi_nvlink,
        .batch_invariant = true,
        .lora = true,
        .after = triton_expert_count_check,
        .summary = "Triton INT4/INT8 weight-only MoE",
    },
    {
        .name = "OCP_MXQuantizationEmulationTritonExperts",
        .device = cuda_or_rocm_or_xpu,
        .no_act_and_mul = true,
        .activation = apply_set,
        // The oracle picks it by backend, not by scheme: any keys pass.
        .quant_scheme = [](const OptKey&, const OptKey&, const KernelEnv&) { return true; },
        .parallel = no_fi_nvlink,
        .batch_invariant = true,
        .lora = true,
        .before = [](const CheckInput& in) -> std::optional<std::string> {
          if (!in.env.has_quark()) return "kernel requires amd-quark package";
          return std::nullopt;
        },
        .after = triton_expert_count_check,
        .summary = "OCP MX emulation on Triton (dequantize to BF16; needs amd-quark)",
    },
    {
        .name = "Nvfp4QuantizationEmulationTritonExperts",
        .device = cuda_or_rocm_or_xpu,
        .no_act_and_mul = true,
        .activation = apply_set,
        .quant_scheme = schemes({{kNvfp4Static, kNvfp4Dynamic}}),
        .parallel = no_fi_nvlink,
        .batch_invariant = true,
        .before = [](const CheckInput& in) -> std::optional<std::string> {
          if (in.moe.lora) return "kernel does not support LoRA";
          if (in.moe.has_bias) return "kernel does not support bias";
          return std::nullopt;
        },
        .after = triton_expert_count_check,
        .summary = "NVFP4 emulation on Triton",
    },
    {
        .name = "Int4EmulationTritonExperts",
        .device = [](const KernelEnv& e) { return e.device.is_cuda_alike(); },
        .no_act_and_mul = true,
        .activation = apply_set,
        .quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) {
          return key_in(w, {kInt4Static, kInt4Static32, kInt4StaticAsym, kInt4Static32Asym}) && !a;
        },
        .parallel = no_fi_nvlink,
        .batch_invariant = true,
        .lora = true,
        .after = triton_expert_count_check,
        .summary = "INT4 emulation on Triton",
    },
    {
        .name = "Mxfp8NativeTritonExperts",
        .device = [](const KernelEnv& e) { return e.device.is_rocm() && e.device.supports_mx(); },
        .no_act_and_mul = true,
        .activation = mxfp8_activation,
        .quant_scheme = schemes({{kMxfp8Static, kMxfp8Dynamic}}),
        .parallel = no_fi_nvlink,
        .batch_invariant = true,
        .lora = true,
        .after = triton_expert_count_check,
        .summary = "MXFP8 Triton dot_scaled MoE (ROCm MX-capable)",
    },
    {
        .name = "Mxfp8EmulationTritonExperts",
        .device = [](const KernelEnv&) { return true; },
        .no_act_and_mul = true,
        .activation = mxfp8_activation,
        .quant_scheme = schemes({{kMxfp8Static, kMxfp8Dynamic}}),
        .parallel = no_fi_nvlink,
        .batch_invariant = true,
        .lora = true,
        .after = triton_expert_count_check,
        .summary = "MXFP8 emulation on Triton",
    },
};

}  // namespace

std::span<const ExpertsClass> triton_experts() { return kTritonExperts; }

std::span<const FallbackRow> fallback_experts() {
  static const FallbackRow rows[] = {
      {"TritonOrDeepGemmExperts", "DeepGemmExperts", "TritonExperts", "DeepGEMM with Triton fallback (FP8 block)"},
      {"TritonOrCutlassExperts", "CutlassExpertsFp8", "TritonExperts", "vLLM CUTLASS FP8 with Triton fallback"},
  };
  return rows;
}

}  // namespace moepack::oracle::experts
