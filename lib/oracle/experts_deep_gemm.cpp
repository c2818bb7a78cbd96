// DeepGEMM's experts (vllm/model_executor/layers/fused_moe/experts/deep_gemm_moe.py and
// batched_deep_gemm_moe.py @ e9d1398d9): grouped FP8 GEMMs, the MXFP8 1x32 recipe on
// Blackwell, MXFP4 weights with FP8 activations.
#include "lib/oracle/experts_rows.h"

namespace moepack::oracle::experts {

namespace {

const ExpertsClass kDeepGemmExperts[] = {
    {
        .name = "DeepGemmExperts",
        .device = [](const KernelEnv& e) { return e.deep_gemm_supported(); },
        .activation = acts({Act::SILU, Act::SWIGLUSTEP, Act::SWIGLUOAI_UNINTERLEAVE}),
        .quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv& e) {
          if (scheme_in(w, a, {{kFp8Static128BlockSym, kFp8Dynamic128Sym}})) return true;
          // The MXFP8 1x32 recipe exists only on Blackwell (SM100 family).
          if (scheme_in(w, a, {{kMxfp8Static, kMxfp8Dynamic}})) return e.device.is_device_capability_family(100);
          return false;
        },
        .parallel = no_fi_nvlink,
        .summary = "DeepGEMM grouped FP8 GEMM",
    },
    {
        .name = "DeepGemmFP4Experts",
        .device = [](const KernelEnv& e) {
          return e.deep_gemm_supported() && (e.device.is_device_capability_family(100) || e.device.is_device_capability_family(120));
        },
        .activation = acts({Act::SILU, Act::SWIGLUSTEP, Act::SITU}),
        .quant_scheme = schemes({{kMxfp4Static, kFp8Dynamic128Sym}}),
        .parallel = no_fi_nvlink,
        .summary = "DeepGEMM MXFP4 x FP8 MoE (SM100/SM120 families)",
    },
    {
        .name = "BatchedDeepGemmExperts",
        .format = ActivationFormat::BatchedExperts,
        .device = [](const KernelEnv& e) { return e.deep_gemm_supported(); },
        .activation = acts({Act::SILU}),
        .quant_scheme = schemes({{kFp8Static128BlockSym, kFp8Dynamic128Sym}}),
        .parallel = any_parallel,
        .summary = "DeepGEMM masked grouped FP8 GEMM, batched format",
    },
};

}  // namespace

std::span<const ExpertsClass> deep_gemm_experts() { return kDeepGemmExperts; }

}  // namespace moepack::oracle::experts
