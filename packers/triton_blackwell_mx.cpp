// See triton_blackwell_mx.h for the drawn layouts and the upstream definitions.
#include "packers/triton_blackwell_mx.h"

namespace moepack::packers {

// ---- value ----

std::string TritonBlackwellMXValueLayout::name() const {
  return layout_id::blackwell_mx_value();
}

std::optional<std::string> TritonBlackwellMXValueLayout::irregular_refusal(std::span<const uint64_t> shape) const {
  if (shape[0] == 1 && shape[1] == 1) return "N = 1 with K/2 = 1: upstream's stride sort then pads the expert axis instead of K";
  return std::nullopt;
}

void TritonBlackwellMXValueLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  expect_pack_args(canonical, packed);
  const uint64_t rows = canonical.shape[0], bytes = canonical.shape[1], padded = round_up(bytes, kByteAlign);
  for (uint64_t n = 0; n < rows; ++n) {
    uint8_t* dst = packed.data() + n * padded;
    std::memcpy(dst, canonical.bytes.data() + n * bytes, bytes);
    std::fill(dst + bytes, dst + padded, uint8_t{0});
  }
}

// ---- scale ----

std::string TritonBlackwellMXScaleLayout::name() const {
  return layout_id::blackwell_mx_scale();
}

std::vector<uint64_t> TritonBlackwellMXScaleLayout::parameter_shape(uint64_t num_experts,
                                                                    std::span<const uint64_t> canonical_shape) const {
  const std::vector<uint64_t> slab = packed_shape(canonical_shape);
  return {1, num_experts * slab[0], slab[1], 2, 256};
}

}  // namespace moepack::packers
