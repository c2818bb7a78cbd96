// CPU experts (vllm/model_executor/layers/fused_moe/experts/cpu_moe.py and cpu_int4_moe.py
// @ e9d1398d9). All are monolithic: the softmax-style routers run in select_experts.
#include <numeric>

#include "lib/oracle/experts_rows.h"

namespace moepack::oracle::experts {

namespace {

const RoutingCheck& softmax_routings() {
  static const RoutingCheck check = routings({R::Default, R::Renormalize, R::RenormalizeNaive});
  return check;
}

// The int8 kernels' own shape checks, after the generic ones (cpu_moe.py).
CheckResult dims_divisible_by_32(CheckResult base, const CheckInput& in) {
  if (!base.ok) return base;
  if (in.moe.hidden_dim % 32 != 0) return CheckResult::fail("kernel requires hidden dim divisible by 32");
  if (in.moe.intermediate_size_per_partition % 32 != 0) return CheckResult::fail("kernel requires intermediate dim divisible by 32");
  return base;
}

// After the generic checks: (zentorch is not part of the reference builds) the grouped GEMM
// needs aligned dimensions, and the x86/Arm/Power kernels need bf16 activations.
AfterChecks unquantized_alignment(int output_alignment, int reduction_alignment, bool needs_bf16) {
  return [output_alignment, reduction_alignment, needs_bf16](CheckResult base, const CheckInput& in) {
    if (!base.ok) return base;
    if (needs_bf16 && in.moe.in_dtype != FloatType::bfloat16) return CheckResult::fail("kernel requires bfloat16 activations");
    const int lcm = std::lcm(output_alignment, reduction_alignment);
    int inter = in.moe.intermediate_size_per_partition;
    if (in.moe.activation != Act::SWIGLUOAI) inter = (inter + lcm - 1) / lcm * lcm;
    const int hidden = in.moe.hidden_dim;
    if (hidden % output_alignment != 0 || inter % output_alignment != 0)
      return CheckResult::fail("kernel requires hidden and intermediate dimensions divisible by " + std::to_string(output_alignment));
    if (hidden % reduction_alignment != 0 || inter % reduction_alignment != 0)
      return CheckResult::fail("kernel requires reduction dimensions divisible by " + std::to_string(reduction_alignment));
    return base;
  };
}

ExpertsClass unquantized_row(const char* name, DeviceCheck device, int output_alignment, int reduction_alignment, bool needs_bf16) {
  return {
      .name = name,
      .monolithic = true,
      .device = std::move(device),
      .activation = acts({Act::SILU, Act::SWIGLUOAI, Act::GELU, Act::GELU_TANH}),
      .quant_scheme = unquantized,
      .parallel = any_parallel,
      .routing = [](R, const OptKey&, const OptKey&) { return true; },
      .router_logits = any_router_dtype,
      .after = unquantized_alignment(output_alignment, reduction_alignment, needs_bf16),
      .summary = "CPU unquantized fused MoE",
  };
}

const ExpertsClass kCpuExperts[] = {
    // ---- x86 with AMX (sgl-kernel CPU ops) ----
    {
        .name = "CPUExpertsFp8",
        .monolithic = true,
        .device = cpu_x86_amx,
        .activation = acts({Act::SILU}),
        .quant_scheme = schemes({{kFp8Static128BlockSym, kFp8Dynamic128Sym}}),
        .parallel = any_parallel,
        .routing = softmax_routings(),
        .router_logits = any_router_dtype,
        .summary = "CPU FP8 W8A16 MoE (x86 with AMX)",
    },
    {
        .name = "CPUExpertsMxfp4",
        .monolithic = true,
        .device = cpu_x86_amx,
        .activation = acts({Act::SILU, Act::SWIGLUOAI}),
        .quant_scheme = schemes({{kMxfp4Static, std::nullopt}}),
        .parallel = any_parallel,
        .routing = softmax_routings(),
        .router_logits = any_router_dtype,
        .summary = "CPU MXFP4 W4A16 MoE (x86 with AMX)",
    },
    {
        .name = "CPUExpertsInt4",
        .monolithic = true,
        .device = cpu_x86_amx,
        .activation = acts({Act::SILU}),
        .quant_scheme = schemes({{kInt4Static, std::nullopt}}),
        .parallel = any_parallel,
        .routing = softmax_routings(),
        .router_logits = any_router_dtype,
        .summary = "CPU INT4 W4A16 MoE (x86 with AMX)",
    },
    {
        .name = "CPUExpertsInt8",
        .monolithic = true,
        .device = cpu_x86_amx,
        .activation = acts({Act::SILU}),
        .quant_scheme = schemes({{kInt8StaticChannelSym, kInt8DynamicTokenSym}}),
        .parallel = any_parallel,
        .routing = softmax_routings(),
        .router_logits = any_router_dtype,
        .after = dims_divisible_by_32,
        .summary = "CPU INT8 W8A8 MoE (x86 with AMX)",
    },
    // ---- Arm ----
    {
        .name = "ArmCPUExpertsInt8",
        .monolithic = true,
        // Arm builds register the cpu_fused_moe_int8 op (csrc/cpu/torch_bindings.cpp: with
        // ARM_I8MM_SUPPORT and ARM_BF16_SUPPORT, never on __APPLE__).
        .device = [](const KernelEnv& e) { return cpu_arm(e) && !e.device.darwin; },
        .activation = acts({Act::SILU, Act::SWIGLUOAI, Act::GELU, Act::GELU_TANH}),
        .quant_scheme = schemes({{kInt8StaticChannelSym, kInt8DynamicTokenSym}}),
        .parallel = [](const MoeParallelConfig& p) { return !p.use_ep; },
        .routing = softmax_routings(),
        .router_logits = any_router_dtype,
        // float32, float16 and bfloat16 activations are all accepted: FloatType has no other value.
        .after = dims_divisible_by_32,
        .summary = "Arm CPU INT8 W8A8 MoE",
    },
    {
        // cpu_int4_moe.py's CPUExpertsInt4 (Arm W4A8 with dynamic int8 activations); vLLM names it
        // like the x86 INT4 class, so the table keys it apart.
        .name = "CPUExpertsInt4[cpu_int4_moe]",
        .monolithic = true,
        .device = [](const KernelEnv& e) { return e.device.is_cpu(); },
        .activation = acts({Act::SILU, Act::SWIGLUOAI, Act::SWIGLUSTEP}),
        .quant_scheme = schemes({{kInt4W4A8StaticChannelSym, std::nullopt}, {kInt4W4A8StaticGroup128Sym, std::nullopt},
                                 {kInt4W4A8StaticGroup64Sym, std::nullopt}, {kInt4W4A8StaticGroup32Sym, std::nullopt},
                                 {kInt4W4A8StaticGroupSym, std::nullopt}}),
        .parallel = single_ep_rank,
        .routing = softmax_routings(),
        .router_logits = any_router_dtype,
        .before = [](const CheckInput& in) -> std::optional<std::string> {
          if (!in.env.device.is_cpu() || in.env.device.cpu_arch != CpuArch::arm) return "kernel only supports Arm CPU";
          return std::nullopt;
        },
        .summary = "Arm CPU INT4 x dynamic INT8 MoE (torch _dyn_quant ops)",
    },
    // ---- Unquantized, by architecture (alignments: output, reduction) ----
    unquantized_row("X86CPUUnquantizedExperts", cpu_x86_amx, 32, 32, true),
    unquantized_row("ArmCPUUnquantizedExperts", [](const KernelEnv& e) { return cpu_arm(e) && !e.device.darwin; }, 32, 4, true),
    unquantized_row("PowerCPUUnquantizedExperts", [](const KernelEnv& e) { return e.device.is_cpu() && e.device.cpu_arch == CpuArch::powerpc; }, 16, 2,
                    true),
    unquantized_row("CPUUnquantizedExperts", [](const KernelEnv& e) { return e.device.is_cpu(); }, 32, 1, false),
};

}  // namespace

std::span<const ExpertsClass> cpu_experts() { return kCpuExperts; }

}  // namespace moepack::oracle::experts
