// DeepGEMM packed-UE8M0 MXFP4 scale layout; the drawn layout and the upstream references are in
// deepgemm_mxfp4_scales.h.
#include "packers/deepgemm_mxfp4_scales.h"

#include <algorithm>
#include <cstring>

#include "packers/flashinfer_common.h"

namespace moepack::packers {

namespace {
uint64_t align4(uint64_t x) { return (x + 3) / 4 * 4; }
}  // namespace

std::string DeepGemmMxfp4ScaleLayout::name() const {
  return "deep_gemm.transform_sf_into_required_layout(recipe=1x1x32,sm100,packed_ue8m0,mn_major,8b1392b9)";
}

std::vector<uint64_t> DeepGemmMxfp4ScaleLayout::packed_shape(std::span<const uint64_t> canonical_shape) const {
  const fi_detail::ByteMatrix m = fi_detail::expect_byte_matrix(name(), DType::U8, canonical_shape);
  return {align4(m.cols) / 4, align4(m.rows)};
}

// Bulk path: one pass over the output words, each assembled from four consecutive scales of a row.
void DeepGemmMxfp4ScaleLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  const fi_detail::ByteMatrix m = fi_detail::expect_byte_matrix(name(), canonical.dtype, canonical.shape);
  const uint64_t mn_aligned = align4(m.rows), words_per_row = align4(m.cols) / 4;
  fi_detail::expect_buffer(name(), "canonical", canonical.bytes.size(), m.rows * m.cols);
  fi_detail::expect_buffer(name(), "packed", packed.size(), 4 * words_per_row * mn_aligned);
  std::fill(packed.begin(), packed.end(), uint8_t{0});
  for (uint64_t j = 0; j < words_per_row; ++j) {
    const uint64_t first = 4 * j, count = std::min<uint64_t>(4, m.cols - first);
    for (uint64_t mn = 0; mn < m.rows; ++mn)
      std::memcpy(packed.data() + 4 * (j * mn_aligned + mn), canonical.bytes.data() + mn * m.cols + first, count);
  }
}

void DeepGemmMxfp4ScaleLayout::unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const {
  const fi_detail::ByteMatrix m = fi_detail::expect_byte_matrix(name(), canonical.dtype, canonical.shape);
  const uint64_t mn_aligned = align4(m.rows), words_per_row = align4(m.cols) / 4;
  fi_detail::expect_buffer(name(), "canonical", canonical.bytes.size(), m.rows * m.cols);
  fi_detail::expect_buffer(name(), "packed", packed.size(), 4 * words_per_row * mn_aligned);
  for (uint64_t mn = 0; mn < m.rows; ++mn)
    for (uint64_t c = 0; c < m.cols; ++c) canonical.bytes[mn * m.cols + c] = packed[packed_offset(mn, c, mn_aligned)];
}

}  // namespace moepack::packers
