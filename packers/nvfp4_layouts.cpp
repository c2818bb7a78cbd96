// NVFP4 row reorders, swizzle_blockscale and the Marlin NVFP4 scales; the drawn layouts and the
// upstream references are in nvfp4_layouts.h.
#include "packers/nvfp4_layouts.h"

#include "lib/core/codecs.h"
#include "lib/core/error.h"

namespace moepack::packers {

namespace {

// The row orders that need whole 64-row groups of each half.
bool interleaves_64(RowOrder rows) { return rows == RowOrder::cutedsl_w31_interleave64 || rows == RowOrder::cutedsl_deinterleave_interleave64; }

void require_row_order_rows(RowOrder rows, Accepts& a) {
  if (interleaves_64(rows)) {
    a.rows_multiple = 128;
    a.rows_rule = "interleave_linear_and_gate(group_size=64) needs 2I % 128 == 0";
  } else if (rows != RowOrder::identity) {
    a.rows_multiple = 2;
    a.rows_rule = "a gate/up row reorder needs an even row count";
  }
}

}  // namespace

// ---- row reorders ---------------------------------------------------------------------------------

std::string ReorderW13RowsLayout::name() const { return layout_id::reorder_w13_rows(row_order_id(rows_)); }

Accepts ReorderW13RowsLayout::accepts() const {
  Accepts a;
  a.dtypes = Accepts::Dtypes::whole_byte;
  require_row_order_rows(rows_, a);
  return a;
}

void ReorderW13RowsLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  expect_pack_args(canonical, packed);
  const uint64_t rows = canonical.shape[0];
  const uint64_t row_bytes = canonical.bytes.size() / rows;
  for (uint64_t r = 0; r < rows; ++r)
    std::memcpy(packed.data() + r * row_bytes, canonical.bytes.data() + row_order_source(rows_, r, rows) * row_bytes, row_bytes);
}

// ---- swizzle_blockscale ---------------------------------------------------------------------------

std::string SwizzleBlockscaleLayout::name() const {
  return layout_id::swizzle_blockscale(row_order_id(rows_));
}

Accepts SwizzleBlockscaleLayout::accepts() const {
  Accepts a;
  require_row_order_rows(rows_, a);
  return a;
}

// ---- Marlin NVFP4 scales ----------------------------------------------------------------------------

std::string MarlinNvfp4ScaleLayout::name() const { return layout_id::nvfp4_marlin_process_scales(); }

Accepts MarlinNvfp4ScaleLayout::accepts() const {
  Accepts a;
  a.rows_multiple = 64;
  a.rows_rule = "Marlin needs N % 64 == 0 (tile_n_size)";
  a.largest_value = kLargestCode;
  a.value_rule = "negative and NaN E4M3 scales have no S0E5M3 byte (the Marlin NVFP4 value stage zeroes negative scales first)";
  return a;
}

uint64_t MarlinNvfp4ScaleLayout::encode_unit(DType, uint64_t value, uint64_t) const {
  // nvfp4_marlin_process_scales: the half of value * 2^7, shifted left once, high byte.
  const uint16_t half = float_to_f16(e4m3_to_float(static_cast<uint8_t>(value)) * 128.0f);
  return (half >> 7) & 0xFFu;
}

uint64_t MarlinNvfp4ScaleLayout::decode_unit(DType canonical, uint64_t value, uint64_t canonical_unit) const {
  const uint8_t code = float_to_e4m3(f16_to_float(static_cast<uint16_t>(value << 7)) / 128.0f);
  if (code > kLargestCode || encode_unit(canonical, code, canonical_unit) != value)
    throw Error(ErrorKind::bad_input, name() + ": packed S0E5M3 byte " + std::to_string(value) + " for canonical scale " +
                                          std::to_string(canonical_unit) + " (" + std::string(dtype_name(canonical)) +
                                          ") is not one an E4M3 scale packs to");
  return code;
}

}  // namespace moepack::packers
