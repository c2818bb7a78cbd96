// CUTLASS 128x4 scale-factor swizzle and vLLM's CUTLASS W4A4 MXFP4 scale layout; the drawn
// layout and the upstream references are in cutlass_sf_128x4.h.
#include "packers/cutlass_sf_128x4.h"

#include <cstring>
#include <numeric>

#include "packers/flashinfer_common.h"

namespace moepack::packers {

// The bulk path walks destination tiles: one 128-row tile band is Cp*128 bytes; inside it each
// group of 4 columns is a 512-byte block holding row m at (m%32)*16 + ((m/32)%4)*4, so a
// row's 4 consecutive scales are copied as one 4-byte run.
void sf_128x4_swizzle(std::span<const uint8_t> in, std::span<uint8_t> out, uint64_t rows, uint64_t cols,
                      const std::vector<uint64_t>& row_source) {
  for (uint64_t m = 0; m < rows; ++m) {
    const uint8_t* src = in.data() + row_source[m] * cols;
    uint8_t* band = out.data() + (m / 128) * cols * 128 + (m % 32) * 16 + ((m / 32) % 4) * 4;
    for (uint64_t g = 0; g < cols / 4; ++g) std::memcpy(band + g * 512, src + 4 * g, 4);
  }
}

void sf_128x4_unswizzle(std::span<const uint8_t> out, std::span<uint8_t> in, uint64_t rows, uint64_t cols,
                        const std::vector<uint64_t>& row_source) {
  for (uint64_t m = 0; m < rows; ++m) {
    uint8_t* dst = in.data() + row_source[m] * cols;
    const uint8_t* band = out.data() + (m / 128) * cols * 128 + (m % 32) * 16 + ((m / 32) % 4) * 4;
    for (uint64_t g = 0; g < cols / 4; ++g) std::memcpy(dst + 4 * g, band + g * 512, 4);
  }
}

namespace {

fi_detail::ByteMatrix check_w4a4_shape(const std::string& layout, DType dtype, std::span<const uint64_t> shape) {
  const fi_detail::ByteMatrix m = fi_detail::expect_byte_matrix(layout, dtype, shape);
  if (m.rows % 128 != 0 || m.cols % 4 != 0)
    fi_detail::refuse(layout, shape,
                      "vLLM's CUTLASS W4A4 MXFP4 MoE needs N % 128 == 0 and (K/32) % 4 == 0 "
                      "(the swizzled expert is reshaped back to [N, K/32])");
  return m;
}

std::vector<uint64_t> identity_rows(uint64_t rows) {
  std::vector<uint64_t> r(rows);
  std::iota(r.begin(), r.end(), uint64_t{0});
  return r;
}

}  // namespace

std::string CutlassMxfp4ScaleSwizzleLayout::name() const {
  return "vllm.cutlass_moe.swizzle_mxfp4_scales(sf=128x4," + std::string(fi_detail::kVllmCommit) + ")";
}

std::vector<uint64_t> CutlassMxfp4ScaleSwizzleLayout::packed_shape(std::span<const uint64_t> canonical_shape) const {
  const fi_detail::ByteMatrix m = check_w4a4_shape(name(), DType::U8, canonical_shape);
  return {m.rows, m.cols};
}

void CutlassMxfp4ScaleSwizzleLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  const fi_detail::ByteMatrix m = check_w4a4_shape(name(), canonical.dtype, canonical.shape);
  fi_detail::expect_buffer(name(), "canonical", canonical.bytes.size(), m.rows * m.cols);
  fi_detail::expect_buffer(name(), "packed", packed.size(), m.rows * m.cols);
  sf_128x4_swizzle(canonical.bytes, packed, m.rows, m.cols, identity_rows(m.rows));
}

void CutlassMxfp4ScaleSwizzleLayout::unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const {
  const fi_detail::ByteMatrix m = check_w4a4_shape(name(), canonical.dtype, canonical.shape);
  fi_detail::expect_buffer(name(), "canonical", canonical.bytes.size(), m.rows * m.cols);
  fi_detail::expect_buffer(name(), "packed", packed.size(), m.rows * m.cols);
  sf_128x4_unswizzle(packed, canonical.bytes, m.rows, m.cols, identity_rows(m.rows));
}

}  // namespace moepack::packers
