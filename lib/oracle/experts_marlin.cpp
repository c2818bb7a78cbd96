// Marlin weight-only MoE GEMMs (vllm/model_executor/layers/fused_moe/experts/marlin_moe.py
// @ e9d1398d9): FP8/FP4/MXFP4/MXFP8/INT4/INT8 weights with 16-bit activations.
#include "lib/oracle/experts_rows.h"

namespace moepack::oracle::experts {

namespace {

bool marlin_device(const KernelEnv& e) { return e.device.is_cuda() && e.device.has_device_capability(75); }

// Marlin looks at the weight key only: any activation key passes.
bool marlin_weights(const OptKey& w, const OptKey&, const KernelEnv&) {
  return key_in(w, {kFp8Static128BlockSym, kFp8StaticChannelSym, kFp8StaticTensorSym, kMxfp4Static, kMxfp8Static, kNvfp4Static, kInt4Static,
                    kInt8Static, kInt4Static32, kInt4StaticAsym, kInt4Static32Asym});
}

bool no_fi_nvlink_two_sided(const MoeParallelConfig& p) { return !p.use_fi_nvl_two_sided_kernels(); }

const ExpertsClass kMarlinExperts[] = {
    {
        .name = "MarlinExperts",
        .device = marlin_device,
        .no_act_and_mul = true,
        .activation = apply_set,
        .quant_scheme = marlin_weights,
        .parallel = no_fi_nvlink_two_sided,
        .lora = true,
        .summary = "Marlin weight-only GEMM (FP8/FP4/MXFP4/MXFP8/INT4/INT8 weights, 16-bit activations)",
    },
    {
        .name = "BatchedMarlinExperts",
        .format = ActivationFormat::BatchedExperts,
        .device = marlin_device,
        .no_act_and_mul = true,
        .activation = apply_set,
        .quant_scheme = marlin_weights,
        .parallel = no_fi_nvlink_two_sided,
        .summary = "Marlin weight-only GEMM (FP8/FP4/MXFP4/MXFP8/INT4/INT8 weights, 16-bit activations)",
    },
};

}  // namespace

std::span<const ExpertsClass> marlin_experts() { return kMarlinExperts; }

}  // namespace moepack::oracle::experts
