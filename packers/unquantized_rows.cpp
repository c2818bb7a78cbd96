// See unquantized_rows.h for the drawn layouts and the upstream definitions.
#include "packers/unquantized_rows.h"

namespace moepack::packers {
namespace {

Units elements(DType canonical) {
  const unsigned bits = static_cast<unsigned>(dtype_bits(canonical));
  return {.canonical_bits = bits, .packed_bits = bits};
}

}  // namespace

std::string SwapW13ToW31Layout::name() const { return layout_id::swap_w13_to_w31(); }

Accepts SwapW13ToW31Layout::accepts() const {
  Accepts a;
  a.dtypes = Accepts::Dtypes::whole_byte;
  a.what = "one expert's 2-D w13 weight [2I, K]";
  a.rows_multiple = 2;
  a.rows_rule = "the gated w13 must hold two equal halves [w1; w3]";
  return a;
}

Units SwapW13ToW31Layout::units(DType canonical) const { return elements(canonical); }

void SwapW13ToW31Layout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  expect_pack_args(canonical, packed);
  const uint64_t rows = canonical.shape[0], row_bytes = canonical.bytes.size() / rows;
  for (uint64_t r = 0; r < rows; ++r)
    std::memcpy(packed.data() + packed_row(rows, r) * row_bytes, canonical.bytes.data() + r * row_bytes, row_bytes);
}

std::string XpuTransposeLayout::name() const {
  switch (use_) {
    case TransposeUse::xpu_weight: return layout_id::xpu_transpose();
    case TransposeUse::wna16_triton_scales: return layout_id::wna16_triton_transpose();
    case TransposeUse::moe_wna16_scales: return layout_id::moe_wna16_scales();
  }
  return "?";
}

Accepts XpuTransposeLayout::accepts() const {
  Accepts a;
  a.dtypes = Accepts::Dtypes::whole_byte;
  a.what = "one expert's 2-D weight [N, K]";
  return a;
}

Units XpuTransposeLayout::units(DType canonical) const { return elements(canonical); }

}  // namespace moepack::packers
