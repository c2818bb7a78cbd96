// See triton_strided.h for the drawn layout and the upstream definition.
#include "packers/triton_strided.h"

#include <algorithm>
#include <cstring>

#include "packers/triton_common.h"

namespace moepack::packers {

TritonStridedLayout::TritonStridedLayout(uint64_t k_groups_pad) : k_groups_pad_(k_groups_pad) {
  if (k_groups_pad_ == 0) throw_internal("TritonStridedLayout: k_groups_pad must be >= 1");
}

std::string TritonStridedLayout::name() const {
  std::string params = k_groups_pad_ == 1 ? "" : "k_groups_pad=" + std::to_string(k_groups_pad_) + ",";
  return "triton_kernels.Strided(" + params + std::string(detail::kTritonKernelsVersion) + ")";
}

std::vector<uint64_t> TritonStridedLayout::packed_shape(std::span<const uint64_t> canonical_shape) const {
  // Any one-byte dtype: the dtype check happens in pack, the shape check here.
  detail::Matrix m = detail::expect_byte_matrix(name(), DType::U8, canonical_shape);
  return {m.rows, detail::round_up(m.cols, k_groups_pad_)};
}

uint64_t TritonStridedLayout::packed_offset(std::span<const uint64_t> canonical_shape, uint64_t n, uint64_t c) const {
  return n * detail::round_up(canonical_shape[1], k_groups_pad_) + c;
}

void TritonStridedLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  detail::Matrix m = detail::expect_byte_matrix(name(), canonical.dtype, canonical.shape);
  const uint64_t packed_cols = detail::round_up(m.cols, k_groups_pad_);
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), m.rows * m.cols);
  detail::expect_bytes(name(), "packed", packed.size(), m.rows * packed_cols);
  for (uint64_t n = 0; n < m.rows; ++n) {
    uint8_t* dst = packed.data() + n * packed_cols;
    std::memcpy(dst, canonical.bytes.data() + n * m.cols, m.cols);
    std::fill(dst + m.cols, dst + packed_cols, uint8_t{0});
  }
}

void TritonStridedLayout::unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const {
  detail::Matrix m = detail::expect_byte_matrix(name(), canonical.dtype, canonical.shape);
  const uint64_t packed_cols = detail::round_up(m.cols, k_groups_pad_);
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), m.rows * m.cols);
  detail::expect_bytes(name(), "packed", packed.size(), m.rows * packed_cols);
  for (uint64_t n = 0; n < m.rows; ++n)
    std::memcpy(canonical.bytes.data() + n * m.cols, packed.data() + n * packed_cols, m.cols);
}

}  // namespace moepack::packers
