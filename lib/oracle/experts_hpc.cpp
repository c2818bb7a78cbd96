// The hpc package's fused FP8 MoE (vllm/model_executor/layers/fused_moe/hpc_moe.py @ e9d1398d9):
// SM90 only, not a vLLM requirement.
#include "lib/oracle/experts_rows.h"

namespace moepack::oracle::experts {

namespace {

const ExpertsClass kHpcExperts[] = {
    {
        .name = "HPCExperts",
        .device = [](const KernelEnv& e) { return e.device.is_cuda() && e.device.is_device_capability(90) && e.packages.hpc; },
        .activation = acts({Act::SILU}),
        .quant_scheme = schemes({{kFp8StaticTensorSym, kFp8StaticTensorSym}, {kFp8Static128BlockSym, kFp8Dynamic128Sym}}),
        .parallel = any_parallel,
        .shape = [](int hidden) { return hidden % 128 == 0; },
        .summary = "HPC fused FP8 MoE (SM90, needs the hpc package)",
    },
};

}  // namespace

std::span<const ExpertsClass> hpc_experts() { return kHpcExperts; }

}  // namespace moepack::oracle::experts
