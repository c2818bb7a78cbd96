// See aiter_gate_up_rows.h for the drawn layout and the upstream definition.
#include "packers/aiter_gate_up_rows.h"

#include <cstring>

#include "packers/aiter_common.h"
#include "packers/triton_common.h"

namespace moepack::packers {
namespace {

struct Geometry {
  uint64_t rows = 0;
  uint64_t row_bytes = 0;
};

Geometry geometry(const std::string& layout, DType dtype, std::span<const uint64_t> shape) {
  const int bits = dtype_bits(dtype);
  if (bits % 8 != 0) detail::refuse(layout, shape, "needs a whole-byte dtype, got " + std::string(dtype_name(dtype)));
  if (shape.empty() || shape.size() > 2) detail::refuse(layout, shape, "expects one expert's 1-D bias [N] or 2-D tensor [N, C]");
  Geometry g;
  g.rows = shape[0];
  g.row_bytes = static_cast<uint64_t>(bits / 8) * (shape.size() == 2 ? shape[1] : 1);
  if (g.rows == 0 || g.row_bytes == 0) detail::refuse(layout, shape, "empty tensor");
  if (g.rows % 2 != 0) detail::refuse(layout, shape, "the interleaved gate/up rows must come in pairs (N = 2I)");
  return g;
}

}  // namespace

std::string AiterDeinterleaveGateUpRowsLayout::name() const {
  return "vllm.aiter_deinterleave_gate_up_rows(" + std::string(aiter_detail::kVllmCommit) + ")";
}

std::vector<uint64_t> AiterDeinterleaveGateUpRowsLayout::packed_shape(std::span<const uint64_t> canonical_shape) const {
  geometry(name(), DType::U8, canonical_shape);
  return {canonical_shape.begin(), canonical_shape.end()};
}

void AiterDeinterleaveGateUpRowsLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  const Geometry g = geometry(name(), canonical.dtype, canonical.shape);
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), g.rows * g.row_bytes);
  detail::expect_bytes(name(), "packed", packed.size(), g.rows * g.row_bytes);
  for (uint64_t r = 0; r < g.rows; ++r)
    std::memcpy(packed.data() + packed_row(g.rows, r) * g.row_bytes, canonical.bytes.data() + r * g.row_bytes, g.row_bytes);
}

void AiterDeinterleaveGateUpRowsLayout::unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const {
  const Geometry g = geometry(name(), canonical.dtype, canonical.shape);
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), g.rows * g.row_bytes);
  detail::expect_bytes(name(), "packed", packed.size(), g.rows * g.row_bytes);
  for (uint64_t r = 0; r < g.rows; ++r)
    std::memcpy(canonical.bytes.data() + r * g.row_bytes, packed.data() + packed_row(g.rows, r) * g.row_bytes, g.row_bytes);
}

}  // namespace moepack::packers
