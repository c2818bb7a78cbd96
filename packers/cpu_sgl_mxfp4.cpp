// See cpu_sgl_mxfp4.h for the drawn layouts and the upstream definitions.
#include "packers/cpu_sgl_mxfp4.h"

#include "packers/triton_common.h"

namespace moepack::packers {
namespace {

constexpr uint64_t kBlockN = 32;  // sgl-kernel block_size_n()
constexpr uint64_t kTileK = 32;   // FP4 elements; Kb must be a multiple of kTileK / 2

detail::Matrix weight_matrix(const std::string& layout, DType dtype, std::span<const uint64_t> shape) {
  if (dtype != DType::U8) detail::refuse(layout, shape, "expects U8 packed FP4 pairs, got " + std::string(dtype_name(dtype)));
  detail::Matrix m = detail::expect_byte_matrix(layout, dtype, shape);
  if (m.rows % kBlockN != 0)
    detail::refuse(layout, shape, "output rows must be a multiple of 32 (BLOCK_N; a 16-row tail is undefined upstream)");
  if ((2 * m.cols) % kTileK != 0) detail::refuse(layout, shape, "K = 2*bytes must be a multiple of 32 (TILE_K)");
  return m;
}

detail::Matrix scale_matrix(const std::string& layout, DType dtype, std::span<const uint64_t> shape) {
  detail::Matrix m = detail::expect_byte_matrix(layout, dtype, shape);
  if (m.rows % kBlockN != 0) detail::refuse(layout, shape, "rows must be a multiple of 32 (BLOCK_N)");
  return m;
}

}  // namespace

// ---- weight ----

std::vector<uint64_t> CpuSglWeightPackedMxfp4Layout::packed_shape(std::span<const uint64_t> canonical_shape) const {
  detail::Matrix m = weight_matrix(name(), DType::U8, canonical_shape);
  return {m.rows, m.cols};
}

CpuSglWeightPackedMxfp4Layout::NibblePosition CpuSglWeightPackedMxfp4Layout::packed_position(
    std::span<const uint64_t> canonical_shape, uint64_t row, uint64_t k) {
  const uint64_t bytes_per_row = canonical_shape[1];
  const uint64_t block = row / kBlockN, r = row % kBlockN, kb = k / 2;
  const bool high = r >= kBlockN / 2;
  const uint64_t j = 2 * (r % (kBlockN / 2)) + k % 2;
  return {block * kBlockN * bytes_per_row + kb * kBlockN + j, high};
}

void CpuSglWeightPackedMxfp4Layout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  const detail::Matrix m = weight_matrix(name(), canonical.dtype, canonical.shape);
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), m.rows * m.cols);
  detail::expect_bytes(name(), "packed", packed.size(), m.rows * m.cols);
  const uint8_t* w = canonical.bytes.data();
  // Packed byte j of column kb: nibble slot j and slot j+32 of the 64 listed for that column;
  // slot s belongs to block row s/2, nibble s%2 of its byte.
  auto slot = [&](const uint8_t* block, uint64_t kb, uint64_t s) -> uint8_t {
    const uint8_t byte = block[(s / 2) * m.cols + kb];
    return (s % 2) ? static_cast<uint8_t>(byte >> 4) : static_cast<uint8_t>(byte & 0xF);
  };
  for (uint64_t nb = 0; nb < m.rows / kBlockN; ++nb) {
    const uint8_t* block = w + nb * kBlockN * m.cols;
    uint8_t* out = packed.data() + nb * kBlockN * m.cols;
    for (uint64_t kb = 0; kb < m.cols; ++kb)
      for (uint64_t j = 0; j < kBlockN; ++j)
        out[kb * kBlockN + j] = static_cast<uint8_t>(slot(block, kb, j) | (slot(block, kb, j + kBlockN) << 4));
  }
}

void CpuSglWeightPackedMxfp4Layout::unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const {
  const detail::Matrix m = weight_matrix(name(), canonical.dtype, canonical.shape);
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), m.rows * m.cols);
  detail::expect_bytes(name(), "packed", packed.size(), m.rows * m.cols);
  uint8_t* w = canonical.bytes.data();
  for (uint64_t nb = 0; nb < m.rows / kBlockN; ++nb) {
    uint8_t* block = w + nb * kBlockN * m.cols;
    const uint8_t* in = packed.data() + nb * kBlockN * m.cols;
    for (uint64_t kb = 0; kb < m.cols; ++kb)
      for (uint64_t j = 0; j < kBlockN; ++j) {
        const uint8_t byte = in[kb * kBlockN + j];
        // Slot j (low nibble) and slot j+32 (high nibble) go back to rows j/2 and 16 + j/2.
        set_nibble({block, kBlockN * m.cols}, j / 2, 2 * m.cols, 2 * kb + j % 2, byte & 0xF);
        set_nibble({block, kBlockN * m.cols}, kBlockN / 2 + j / 2, 2 * m.cols, 2 * kb + j % 2, byte >> 4);
      }
  }
}

// ---- scale ----

std::vector<uint64_t> CpuSglScalePackedLayout::packed_shape(std::span<const uint64_t> canonical_shape) const {
  detail::Matrix m = scale_matrix(name(), DType::U8, canonical_shape);
  return {m.rows, m.cols};
}

uint64_t CpuSglScalePackedLayout::packed_offset(std::span<const uint64_t> canonical_shape, uint64_t n, uint64_t g) {
  const uint64_t groups = canonical_shape[1];
  return (n / kBlockN) * kBlockN * groups + g * kBlockN + n % kBlockN;
}

void CpuSglScalePackedLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  const detail::Matrix m = scale_matrix(name(), canonical.dtype, canonical.shape);
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), m.rows * m.cols);
  detail::expect_bytes(name(), "packed", packed.size(), m.rows * m.cols);
  for (uint64_t nb = 0; nb < m.rows / kBlockN; ++nb) {
    const uint8_t* src = canonical.bytes.data() + nb * kBlockN * m.cols;
    uint8_t* dst = packed.data() + nb * kBlockN * m.cols;
    for (uint64_t g = 0; g < m.cols; ++g)
      for (uint64_t n = 0; n < kBlockN; ++n) dst[g * kBlockN + n] = src[n * m.cols + g];
  }
}

void CpuSglScalePackedLayout::unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const {
  const detail::Matrix m = scale_matrix(name(), canonical.dtype, canonical.shape);
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), m.rows * m.cols);
  detail::expect_bytes(name(), "packed", packed.size(), m.rows * m.cols);
  for (uint64_t nb = 0; nb < m.rows / kBlockN; ++nb) {
    const uint8_t* src = packed.data() + nb * kBlockN * m.cols;
    uint8_t* dst = canonical.bytes.data() + nb * kBlockN * m.cols;
    for (uint64_t g = 0; g < m.cols; ++g)
      for (uint64_t n = 0; n < kBlockN; ++n) dst[n * m.cols + g] = src[g * kBlockN + n];
  }
}

}  // namespace moepack::packers
