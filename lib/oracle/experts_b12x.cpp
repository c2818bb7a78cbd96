// The b12x library's fused MoE (vllm/model_executor/layers/fused_moe/b12x.py @ e9d1398d9):
// SM12x, the optional `vllm[b12x]` extra.
#include "lib/oracle/experts_rows.h"

namespace moepack::oracle::experts {

namespace {

// b12x validates the layer itself before the generic checks.
std::optional<std::string> b12x_layer_checks(const CheckInput& in) {
  const MoeConfig& m = in.moe;
  if (m.has_bias) return "kernel does not support expert biases";
  if (m.in_dtype != FloatType::float16 && m.in_dtype != FloatType::bfloat16)
    return "kernel does not support " + float_type_torch_name(m.in_dtype) + " input/output dtype";
  if (m.activation == Act::SITU && (!m.situ_beta || *m.situ_beta != 4.0 || !m.situ_linear_beta || *m.situ_linear_beta != 25.0))
    return "kernel supports only SiTU beta=4 and linear_beta=25";
  if (in.activation_key && m.activation == Act::SWIGLUOAI_UNINTERLEAVE) return "kernel does not support swigluoai_uninterleave with W4A8";
  if (in.weight_key == kMxfp4Static && m.intermediate_size_per_partition % 32 != 0)
    return "MXFP4 requires the per-rank intermediate size to be divisible by 32";
  if (in.weight_key == kMxfp4Static && in.activation_key == kMxfp8Dynamic) {
    if (m.activation != Act::SILU && m.activation != Act::SITU) return "MXFP4 W4A8 supports only SiLU and SiTU";
    if (m.hidden_dim % 256 != 0 || m.intermediate_size_per_partition % 32 != 0)
      return "MXFP4 W4A8 requires hidden size divisible by 256 and per-rank intermediate size divisible by 32";
  }
  return std::nullopt;
}

const ExpertsClass kB12xExperts[] = {
    {
        .name = "B12xExperts",
        .device = [](const KernelEnv& e) { return cuda_family(e, 120) && e.packages.b12x; },
        .no_act_and_mul = true,
        .activation = acts({Act::SILU, Act::SITU, Act::SWIGLUOAI_UNINTERLEAVE, Act::RELU2_NO_MUL}),
        .quant_scheme = schemes({{kMxfp4Static, kMxfp8Dynamic}, {kMxfp4Static, std::nullopt}, {kNvfp4Static, kNvfp4Dynamic},
                                 {kNvfp4Static, kMxfp8Dynamic}, {kNvfp4Static, std::nullopt}}),
        .parallel = [](const MoeParallelConfig& p) { return !p.use_ep && p.ep_size == 1 && !p.use_all2all_kernels() && !p.enable_eplb; },
        .before = b12x_layer_checks,
        .summary = "b12x fused MoE (SM12x, needs the b12x library)",
    },
};

}  // namespace

std::span<const ExpertsClass> b12x_experts() { return kB12xExperts; }

}  // namespace moepack::oracle::experts
