// See triton_shuffle_weight.h for the drawn layout and the upstream definition.
#include "packers/triton_shuffle_weight.h"

#include <cstring>

#include "packers/triton_common.h"

namespace moepack::packers {
namespace {

struct Geometry {
  uint64_t rows = 1;      // product of the leading axes (1 for a 1-D tensor)
  uint64_t length = 0;    // last axis
  uint64_t elem_bytes = 0;
};

Geometry geometry(const std::string& layout, DType dtype, std::span<const uint64_t> shape) {
  const int bits = dtype_bits(dtype);
  if (bits % 8 != 0) detail::refuse(layout, shape, "needs a whole-byte dtype, got " + std::string(dtype_name(dtype)));
  if (shape.empty() || shape.size() > 2) detail::refuse(layout, shape, "expects one expert's 1-D or 2-D tensor");
  Geometry g;
  g.length = shape.back();
  if (shape.size() == 2) g.rows = shape[0];
  if (g.rows == 0 || g.length == 0) detail::refuse(layout, shape, "empty tensor");
  if (g.length % 2 != 0) detail::refuse(layout, shape, "the last axis must be even to split it into two halves");
  g.elem_bytes = static_cast<uint64_t>(bits / 8);
  return g;
}

}  // namespace

std::string TritonShuffleWeightLayout::name() const { return "vllm.mxfp4_triton_shuffle_weight(e9d1398d9)"; }

std::vector<uint64_t> TritonShuffleWeightLayout::packed_shape(std::span<const uint64_t> canonical_shape) const {
  geometry(name(), DType::U8, canonical_shape);
  return {canonical_shape.begin(), canonical_shape.end()};
}

void TritonShuffleWeightLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  const Geometry g = geometry(name(), canonical.dtype, canonical.shape);
  const uint64_t row_bytes = g.length * g.elem_bytes, half = g.length / 2;
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), g.rows * row_bytes);
  detail::expect_bytes(name(), "packed", packed.size(), g.rows * row_bytes);
  for (uint64_t r = 0; r < g.rows; ++r) {
    const uint8_t* src = canonical.bytes.data() + r * row_bytes;
    uint8_t* dst = packed.data() + r * row_bytes;
    for (uint64_t j = 0; j < half; ++j) {
      std::memcpy(dst + (2 * j) * g.elem_bytes, src + j * g.elem_bytes, g.elem_bytes);
      std::memcpy(dst + (2 * j + 1) * g.elem_bytes, src + (half + j) * g.elem_bytes, g.elem_bytes);
    }
  }
}

void TritonShuffleWeightLayout::unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const {
  const Geometry g = geometry(name(), canonical.dtype, canonical.shape);
  const uint64_t row_bytes = g.length * g.elem_bytes, half = g.length / 2;
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), g.rows * row_bytes);
  detail::expect_bytes(name(), "packed", packed.size(), g.rows * row_bytes);
  for (uint64_t r = 0; r < g.rows; ++r) {
    const uint8_t* src = packed.data() + r * row_bytes;
    uint8_t* dst = canonical.bytes.data() + r * row_bytes;
    for (uint64_t j = 0; j < half; ++j) {
      std::memcpy(dst + j * g.elem_bytes, src + (2 * j) * g.elem_bytes, g.elem_bytes);
      std::memcpy(dst + (half + j) * g.elem_bytes, src + (2 * j + 1) * g.elem_bytes, g.elem_bytes);
    }
  }
}

}  // namespace moepack::packers
