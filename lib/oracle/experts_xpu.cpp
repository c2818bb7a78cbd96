// Intel XPU experts (vllm/model_executor/layers/fused_moe/experts/xpu_moe.py @ e9d1398d9):
// XPUExperts and its per-scheme subclasses, which differ only in the schemes they take.
#include "lib/oracle/experts_rows.h"

namespace moepack::oracle::experts {

namespace {

bool xpu_device(const KernelEnv& e) { return e.device.is_xpu(); }

const ActivationCheck& xpu_activations() {
  static const ActivationCheck check = acts({Act::SILU, Act::GELU, Act::GELU_TANH, Act::SWIGLUOAI, Act::RELU2_NO_MUL});
  return check;
}

ExpertsClass xpu_row(const char* name, QuantSchemeCheck quant_scheme) {
  return {
      .name = name,
      .device = xpu_device,
      .no_act_and_mul = true,
      .activation = xpu_activations(),
      .quant_scheme = std::move(quant_scheme),
      .parallel = any_parallel,
      .summary = "Intel XPU fused MoE",
  };
}

const ExpertsClass kXpuExperts[] = {
    xpu_row("XPUExperts", schemes({{std::nullopt, std::nullopt}, {kFp8StaticTensorSym, std::nullopt}, {kFp8StaticTensorSym, kFp8DynamicTensorSym}})),
    xpu_row("XPUExpertsFp8", schemes({{kFp8StaticTensorSym, std::nullopt}, {kFp8StaticTensorSym, kFp8DynamicTensorSym}})),
    xpu_row("XPUExpertsMxFp8", schemes({{kMxfp8Static, std::nullopt}, {kMxfp8Static, kMxfp8Dynamic}})),
    xpu_row("XPUExpertsBlockFp8", schemes({{kFp8Static128BlockSym, kFp8Dynamic128Sym}})),
    xpu_row("XPUExpertsWNA16", schemes({{kInt4Static, std::nullopt}, {kInt4Static32, std::nullopt}})),
    xpu_row("XPUExpertsMxFp4", schemes({{kMxfp4Static, std::nullopt}, {kMxfp4Static, kMxfp4Dynamic}})),
};

}  // namespace

std::span<const ExpertsClass> xpu_experts() { return kXpuExperts; }

}  // namespace moepack::oracle::experts
