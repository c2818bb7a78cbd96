// Humming MoE GEMMs (humming-kernels through vllm/model_executor/layers/fused_moe/experts/
// fused_humming_moe.py @ e9d1398d9): one class per GEMM type, and only the preferred type
// (VLLM_HUMMING_MOE_GEMM_TYPE) may be chosen.
#include <string>

#include "lib/oracle/experts_rows.h"

namespace moepack::oracle::experts {

namespace {

bool humming_device(const KernelEnv& e) { return e.has_humming() && e.device.is_cuda() && e.device.has_device_capability(75); }

// Any unsigned 2-8 bit integer weight with per-channel or (1, g) scales.
bool humming_wna16_weight(const OptKey& w) {
  if (!w || w->scale2) return false;
  const GroupShape g = w->scale.group;
  if (!(g == GroupShape::per_channel() || (g.row == 1 && g.col > 0))) return false;
  switch (w->dtype) {
    case ElemType::uint4b8:
    case ElemType::uint8b128:
    case ElemType::u8:
    case ElemType::uint2b2:
    case ElemType::uint3b4:
    case ElemType::scalar_uint4:
    case ElemType::scalar_uint8: return true;
    default: return false;
  }
}

// The explicit pairs, plus the integer weights above with a None or FP8-per-token activation.
bool humming_quant_scheme(const OptKey& w, const OptKey& a, const KernelEnv&) {
  if (scheme_in(w, a,
                {{kMxfp4Static, std::nullopt},          {kMxfp4Static, kMxfp4Dynamic},
                 {kMxfp4Static, kMxfp8Dynamic},         {kMxfp4Static, kFp8DynamicTokenSym},
                 {kNvfp4Static, std::nullopt},          {kNvfp4Static, kFp8DynamicTokenSym},
                 {kMxfp8Static, std::nullopt},          {kMxfp8Static, kFp8DynamicTokenSym},
                 {kFp8StaticChannelSym, std::nullopt},  {kFp8StaticChannelSym, kFp8DynamicTokenSym},
                 {kFp8Static128BlockSym, std::nullopt}, {kFp8Static128BlockSym, kFp8DynamicTokenSym},
                 {kInt4Static, std::nullopt},           {kInt4Static, kFp8DynamicTokenSym},
                 {kInt8Static, std::nullopt},           {kInt8Static, kFp8DynamicTokenSym},
                 {kFp8StaticChannelSym, kFp8StaticTensorSym}, {kFp8StaticChannelSym, kFp8Dynamic128Sym},
                 {kFp8StaticTensorSym, std::nullopt},   {kFp8StaticTensorSym, kFp8DynamicTokenSym},
                 {kFp8StaticTensorSym, kFp8StaticTensorSym}, {kFp8StaticTensorSym, kFp8Dynamic128Sym},
                 {kFp8Static128BlockSym, kFp8Dynamic128Sym}, {kInt8StaticChannelSym, std::nullopt},
                 {kInt8StaticChannelSym, kInt8DynamicTokenSym}, {kNvfp4Static, kNvfp4Dynamic},
                 {kMxfp8Static, kMxfp8Dynamic}}))
    return true;
  return (!a || *a == kFp8DynamicTokenSym) && humming_wna16_weight(w);
}

// Only the class whose GEMM type is the preferred one may be chosen.
AfterChecks preferred_gemm_type(std::string type) {
  return [type](CheckResult base, const CheckInput& in) {
    if (!base.ok) return base;
    const std::string preferred = in.env.humming_gemm_type();
    if (preferred != type) return CheckResult::fail("preferred gemm type " + preferred + " != supported gemm type " + type);
    return base;
  };
}

const ExpertsClass kHummingExperts[] = {
    {
        .name = "BatchedHummingGroupedExperts",
        .format = ActivationFormat::BatchedExperts,
        .device = humming_device,
        .no_act_and_mul = true,
        .activation = apply_set,
        .quant_scheme = humming_quant_scheme,
        .parallel = any_parallel,
        .batch_invariant = true,
        .after = preferred_gemm_type("grouped_masked"),
        .summary = "Humming grouped_masked MoE GEMM",
    },
    {
        .name = "HummingGroupedExperts",
        .device = humming_device,
        .no_act_and_mul = true,
        .activation = apply_set,
        .quant_scheme = humming_quant_scheme,
        .parallel = any_parallel,
        .batch_invariant = true,
        .after = preferred_gemm_type("grouped_contiguous"),
        .summary = "Humming grouped_contiguous MoE GEMM",
    },
    {
        .name = "HummingIndexedExperts",
        .device = humming_device,
        .no_act_and_mul = true,
        .activation = apply_set,
        .quant_scheme = humming_quant_scheme,
        .parallel = any_parallel,
        .batch_invariant = true,
        .after = preferred_gemm_type("indexed"),
        .summary = "Humming indexed MoE GEMM",
    },
};

}  // namespace

std::span<const ExpertsClass> humming_experts() { return kHummingExperts; }

}  // namespace moepack::oracle::experts
