// See triton_strided.h for the drawn layout and the upstream definition.
#include "packers/triton_strided.h"

namespace moepack::packers {

TritonStridedLayout::TritonStridedLayout(uint64_t k_groups_pad) : k_groups_pad_(k_groups_pad) {
  if (k_groups_pad_ == 0) throw_internal("TritonStridedLayout: k_groups_pad must be >= 1");
}

std::string TritonStridedLayout::name() const {
  return layout_id::strided(static_cast<int>(k_groups_pad_));
}

void TritonStridedLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  expect_pack_args(canonical, packed);
  const uint64_t rows = canonical.shape[0], cols = canonical.shape[1], packed_cols = round_up(cols, k_groups_pad_);
  for (uint64_t n = 0; n < rows; ++n) {
    uint8_t* dst = packed.data() + n * packed_cols;
    std::memcpy(dst, canonical.bytes.data() + n * cols, cols);
    std::fill(dst + cols, dst + packed_cols, uint8_t{0});
  }
}

}  // namespace moepack::packers
