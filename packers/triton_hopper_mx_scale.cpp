// See triton_hopper_mx_scale.h for the drawn layout and the upstream definition.
#include "packers/triton_hopper_mx_scale.h"

namespace moepack::packers {

TritonHopperMXScaleLayout::TritonHopperMXScaleLayout(uint64_t num_warps) : num_warps_(num_warps) {
  // triton_kernels asserts a power of two; vLLM uses 8 (default) and, historically, 4.
  if (num_warps_ != 4 && num_warps_ != 8)
    throw_internal("TritonHopperMXScaleLayout: num_warps must be 4 or 8, got " + std::to_string(num_warps_));
}

std::string TritonHopperMXScaleLayout::name() const {
  return "triton_kernels.HopperMXScale(mx_axis=1,num_warps=" + std::to_string(num_warps_) + ",k_groups_pad=4," +
         std::string(pins::kTritonKernels) + ")";
}

}  // namespace moepack::packers
