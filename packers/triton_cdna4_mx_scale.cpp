// See triton_cdna4_mx_scale.h for the drawn layout and the upstream definition.
#include "packers/triton_cdna4_mx_scale.h"

#include "packers/triton_common.h"

namespace moepack::packers {
namespace {

constexpr uint64_t kRowBlock = 32;   // NON_K_PRESHUFFLE_BLOCK_SIZE
constexpr uint64_t kGroupBlock = 8;  // the Ks/8 axis of the view

detail::Matrix checked(const std::string& layout, DType dtype, std::span<const uint64_t> shape) {
  detail::Matrix m = detail::expect_byte_matrix(layout, dtype, shape);
  if (m.rows % kRowBlock != 0) detail::refuse(layout, shape, "N must be a multiple of 32");
  if (m.cols % kGroupBlock != 0) detail::refuse(layout, shape, "scale groups K/32 must be a multiple of 8");
  return m;
}

// Visits the storage in order: [N/32][Ks/8][4 d][16 b][2 c][2 a].
template <class Fn>
void for_each_byte(const detail::Matrix& m, Fn&& fn) {
  uint64_t out = 0;
  for (uint64_t n0 = 0; n0 < m.rows / kRowBlock; ++n0)
    for (uint64_t k0 = 0; k0 < m.cols / kGroupBlock; ++k0)
      for (uint64_t d = 0; d < 4; ++d)
        for (uint64_t b = 0; b < 16; ++b)
          for (uint64_t c = 0; c < 2; ++c)
            for (uint64_t a = 0; a < 2; ++a, ++out) fn(out, 32 * n0 + 16 * a + b, 8 * k0 + 4 * c + d);
}

}  // namespace

std::string TritonCdna4MXScaleLayout::name() const {
  return "triton_kernels.CDNA4MXScale(" + std::string(detail::kTritonKernelsVersion) + ")";
}

std::vector<uint64_t> TritonCdna4MXScaleLayout::packed_shape(std::span<const uint64_t> canonical_shape) const {
  detail::Matrix m = checked(name(), DType::U8, canonical_shape);
  return {m.rows / kRowBlock, m.cols * kRowBlock};
}

uint64_t TritonCdna4MXScaleLayout::packed_offset(std::span<const uint64_t> canonical_shape, uint64_t n, uint64_t k) {
  const uint64_t n0 = n / 32, a = n / 16 % 2, b = n % 16;
  const uint64_t k0 = k / 8, c = k / 4 % 2, d = k % 4;
  return n0 * (canonical_shape[1] * 32) + 256 * k0 + 64 * d + 4 * b + 2 * c + a;
}

void TritonCdna4MXScaleLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  const detail::Matrix m = checked(name(), canonical.dtype, canonical.shape);
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), m.rows * m.cols);
  detail::expect_bytes(name(), "packed", packed.size(), m.rows * m.cols);
  const uint8_t* s = canonical.bytes.data();
  for_each_byte(m, [&](uint64_t out, uint64_t n, uint64_t k) { packed[out] = s[n * m.cols + k]; });
}

void TritonCdna4MXScaleLayout::unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const {
  const detail::Matrix m = checked(name(), canonical.dtype, canonical.shape);
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), m.rows * m.cols);
  detail::expect_bytes(name(), "packed", packed.size(), m.rows * m.cols);
  uint8_t* s = canonical.bytes.data();
  for_each_byte(m, [&](uint64_t out, uint64_t n, uint64_t k) { s[n * m.cols + k] = packed[out]; });
}

}  // namespace moepack::packers
