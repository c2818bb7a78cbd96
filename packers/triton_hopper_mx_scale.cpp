// See triton_hopper_mx_scale.h for the drawn layout and the upstream definition.
#include "packers/triton_hopper_mx_scale.h"

#include <algorithm>

namespace moepack::packers {

TritonHopperMXScaleLayout::TritonHopperMXScaleLayout(uint64_t num_warps) : num_warps_(num_warps) {
  // triton_kernels asserts a power of two; vLLM uses 8 (default) and, historically, 4.
  if (num_warps_ != 4 && num_warps_ != 8)
    throw_internal("TritonHopperMXScaleLayout: num_warps must be 4 or 8, got " + std::to_string(num_warps_));
}

std::string TritonHopperMXScaleLayout::name() const {
  return layout_id::hopper_mx_scale(static_cast<int>(num_warps_));
}

namespace {

// Where scale row n starts in the packed storage (its group k then sits 64*(k/2) + 2*(k%2)
// further on): the visit's arithmetic, once per row instead of once per scale.
uint64_t packed_row_start(uint64_t n, uint64_t W, uint64_t out_cols) {
  const uint64_t m0 = n / (32 * W), a = n / (16 * W) % 2, w = n / 16 % W, b = n / 8 % 2, r = n % 8;
  return (W * m0 + w) * out_cols + 32 * a + 4 * r + b;
}

}  // namespace

void TritonHopperMXScaleLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  expect_pack_args(canonical, packed);
  const uint64_t rows = canonical.shape[0], groups = canonical.shape[1], out_cols = round_up(groups, kVllmGroupPad) * 32;
  std::fill(packed.begin(), packed.end(), uint8_t{0});
  const uint8_t* src = canonical.bytes.data();
  for (uint64_t n = 0; n < rows; ++n, src += groups) {
    uint8_t* dst = packed.data() + packed_row_start(n, num_warps_, out_cols);
    uint64_t k = 0;
    for (; k + 1 < groups; k += 2, dst += 64) {
      dst[0] = src[k];
      dst[2] = src[k + 1];
    }
    if (k < groups) dst[0] = src[k];
  }
}

void TritonHopperMXScaleLayout::unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const {
  expect_unpack_args(packed, canonical);
  const uint64_t rows = canonical.shape[0], groups = canonical.shape[1], out_cols = round_up(groups, kVllmGroupPad) * 32;
  uint8_t* dst = canonical.bytes.data();
  for (uint64_t n = 0; n < rows; ++n, dst += groups) {
    const uint8_t* src = packed.data() + packed_row_start(n, num_warps_, out_cols);
    for (uint64_t k = 0; k < groups; ++k) dst[k] = src[64 * (k / 2) + 2 * (k % 2)];
  }
}

}  // namespace moepack::packers
