// See triton_hopper_mx_scale.h for the drawn layout and the upstream definition.
#include "packers/triton_hopper_mx_scale.h"

namespace moepack::packers {

TritonHopperMXScaleLayout::TritonHopperMXScaleLayout(uint64_t num_warps) : num_warps_(num_warps) {
  // triton_kernels asserts a power of two; vLLM uses 8 (default) and, historically, 4.
  if (num_warps_ != 4 && num_warps_ != 8)
    throw_internal("TritonHopperMXScaleLayout: num_warps must be 4 or 8, got " + std::to_string(num_warps_));
}

std::string TritonHopperMXScaleLayout::name() const {
  return layout_id::hopper_mx_scale(static_cast<int>(num_warps_));
}

}  // namespace moepack::packers
