// See triton_blackwell_mx.h for the drawn layouts and the upstream definitions.
#include "packers/triton_blackwell_mx.h"

#include <algorithm>
#include <cstring>

#include "packers/triton_common.h"

namespace moepack::packers {
namespace {

constexpr uint64_t kValueByteAlign = 128;  // the stride-1 axis is padded to 128 bytes (256 FP4)
constexpr uint64_t kScaleRowAlign = 128;   // ALIGN_N
constexpr uint64_t kScaleGroupAlign = 8;   // ALIGN_K (the 128x4 atom itself only needs 4)

detail::Matrix value_matrix(const std::string& layout, DType dtype, std::span<const uint64_t> shape) {
  detail::Matrix m = detail::expect_byte_matrix(layout, dtype, shape);
  if (m.rows == 1 && m.cols == 1)
    detail::refuse(layout, shape,
                   "N = 1 with K/2 = 1: upstream's stride sort then pads the expert axis instead of K");
  return m;
}

struct ScaleGeometry {
  uint64_t rows, groups, padded_rows, padded_groups;
  uint64_t slab_bytes() const { return padded_rows * padded_groups; }
};

ScaleGeometry scale_geometry(const std::string& layout, DType dtype, std::span<const uint64_t> shape) {
  detail::Matrix m = detail::expect_byte_matrix(layout, dtype, shape);
  return {m.rows, m.cols, detail::round_up(m.rows, kScaleRowAlign), detail::round_up(m.cols, kScaleGroupAlign)};
}

// Visits the slab in storage order: [Np/128][Kp/4][32 outer rows][4 inner rows][4 groups].
template <class Fn>
void for_each_scale_byte(const ScaleGeometry& g, Fn&& fn) {
  uint64_t out = 0;
  for (uint64_t tile = 0; tile < g.padded_rows / 128; ++tile)
    for (uint64_t group4 = 0; group4 < g.padded_groups / 4; ++group4)
      for (uint64_t outer = 0; outer < 32; ++outer)
        for (uint64_t inner = 0; inner < 4; ++inner)
          for (uint64_t j = 0; j < 4; ++j, ++out) fn(out, 128 * tile + 32 * inner + outer, 4 * group4 + j);
}

}  // namespace

// ---- value ----

std::string TritonBlackwellMXValueLayout::name() const {
  return "triton_kernels.BlackwellMXValue(" + std::string(detail::kTritonKernelsVersion) + ")";
}

std::vector<uint64_t> TritonBlackwellMXValueLayout::packed_shape(std::span<const uint64_t> canonical_shape) const {
  detail::Matrix m = value_matrix(name(), DType::U8, canonical_shape);
  return {m.rows, detail::round_up(m.cols, kValueByteAlign)};
}

uint64_t TritonBlackwellMXValueLayout::packed_offset(std::span<const uint64_t> canonical_shape, uint64_t n, uint64_t b) {
  return n * detail::round_up(canonical_shape[1], kValueByteAlign) + b;
}

void TritonBlackwellMXValueLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  const detail::Matrix m = value_matrix(name(), canonical.dtype, canonical.shape);
  const uint64_t packed_cols = detail::round_up(m.cols, kValueByteAlign);
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), m.rows * m.cols);
  detail::expect_bytes(name(), "packed", packed.size(), m.rows * packed_cols);
  for (uint64_t n = 0; n < m.rows; ++n) {
    uint8_t* dst = packed.data() + n * packed_cols;
    std::memcpy(dst, canonical.bytes.data() + n * m.cols, m.cols);
    std::fill(dst + m.cols, dst + packed_cols, uint8_t{0});
  }
}

void TritonBlackwellMXValueLayout::unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const {
  const detail::Matrix m = value_matrix(name(), canonical.dtype, canonical.shape);
  const uint64_t packed_cols = detail::round_up(m.cols, kValueByteAlign);
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), m.rows * m.cols);
  detail::expect_bytes(name(), "packed", packed.size(), m.rows * packed_cols);
  for (uint64_t n = 0; n < m.rows; ++n)
    std::memcpy(canonical.bytes.data() + n * m.cols, packed.data() + n * packed_cols, m.cols);
}

// ---- scale ----

std::string TritonBlackwellMXScaleLayout::name() const {
  return "triton_kernels.BlackwellMXScale(" + std::string(detail::kTritonKernelsVersion) + ")";
}

std::vector<uint64_t> TritonBlackwellMXScaleLayout::packed_shape(std::span<const uint64_t> canonical_shape) const {
  ScaleGeometry g = scale_geometry(name(), DType::U8, canonical_shape);
  return {g.padded_rows / 128, g.padded_groups / 4, 2, 256};
}

std::vector<uint64_t> TritonBlackwellMXScaleLayout::parameter_shape(uint64_t num_experts,
                                                                    std::span<const uint64_t> canonical_shape) const {
  ScaleGeometry g = scale_geometry(name(), DType::U8, canonical_shape);
  return {1, num_experts * (g.padded_rows / 128), g.padded_groups / 4, 2, 256};
}

uint64_t TritonBlackwellMXScaleLayout::packed_offset(std::span<const uint64_t> canonical_shape, uint64_t n, uint64_t k) {
  const uint64_t padded_groups = detail::round_up(canonical_shape[1], kScaleGroupAlign);
  return (n / 128) * (padded_groups * 128) + (k / 4) * 512 + (n % 32) * 16 + (n / 32 % 4) * 4 + k % 4;
}

void TritonBlackwellMXScaleLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  const ScaleGeometry g = scale_geometry(name(), canonical.dtype, canonical.shape);
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), g.rows * g.groups);
  detail::expect_bytes(name(), "packed", packed.size(), g.slab_bytes());
  const uint8_t* s = canonical.bytes.data();
  for_each_scale_byte(g, [&](uint64_t out, uint64_t n, uint64_t k) {
    packed[out] = n < g.rows && k < g.groups ? s[n * g.groups + k] : uint8_t{0};
  });
}

void TritonBlackwellMXScaleLayout::unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const {
  const ScaleGeometry g = scale_geometry(name(), canonical.dtype, canonical.shape);
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), g.rows * g.groups);
  detail::expect_bytes(name(), "packed", packed.size(), g.slab_bytes());
  uint8_t* s = canonical.bytes.data();
  for_each_scale_byte(g, [&](uint64_t out, uint64_t n, uint64_t k) {
    if (n < g.rows && k < g.groups) s[n * g.groups + k] = packed[out];
  });
}

}  // namespace moepack::packers
