// See aiter_gate_up_rows.h for the drawn layout and the upstream definition.
#include "packers/aiter_gate_up_rows.h"

namespace moepack::packers {

std::string AiterDeinterleaveGateUpRowsLayout::name() const {
  return layout_id::aiter_deinterleave_gate_up_rows();
}

Accepts AiterDeinterleaveGateUpRowsLayout::accepts() const {
  Accepts a;
  a.dtypes = Accepts::Dtypes::whole_byte;
  a.ranks = Accepts::rank(1) | Accepts::rank(2);
  a.what = "one expert's 1-D bias [N] or 2-D tensor [N, C]";
  a.rows_multiple = 2;
  a.rows_rule = "the interleaved gate/up rows must come in pairs (N = 2I)";
  return a;
}

Units AiterDeinterleaveGateUpRowsLayout::units(DType canonical) const {
  const unsigned bits = static_cast<unsigned>(dtype_bits(canonical));
  return {.canonical_bits = bits, .packed_bits = bits};
}

// Rows move whole (the w13 weights are large): one copy per row.
void AiterDeinterleaveGateUpRowsLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  expect_pack_args(canonical, packed);
  const uint64_t rows = canonical.shape[0], row_bytes = canonical.bytes.size() / rows;
  for (uint64_t r = 0; r < rows; ++r)
    std::memcpy(packed.data() + packed_row(rows, r) * row_bytes, canonical.bytes.data() + r * row_bytes, row_bytes);
}

}  // namespace moepack::packers
