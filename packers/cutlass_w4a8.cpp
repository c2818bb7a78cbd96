// See cutlass_w4a8.h for the drawn layouts and the upstream definitions.
#include "packers/cutlass_w4a8.h"

#include <cmath>

namespace moepack::packers {

std::string CutlassW4a8WeightLayout::name() const {
  return layout_id::cutlass_encode_and_reorder_int4b_grouped();
}

Accepts CutlassW4a8WeightLayout::accepts() const {
  Accepts a;
  a.dtypes = Accepts::Dtypes::i32;
  a.what = "one expert's I32 packed int4 weight [N, K/8]";
  a.rows_multiple = 16;
  a.rows_rule = "encode_and_reorder_int4b: n must be divisible by 16 (CUTLASS reorder_tensor)";
  a.last_multiple = 32;
  a.last_rule = "encode_and_reorder_int4b: logical k must be divisible by 256 (CUTLASS reorder_tensor)";
  return a;
}

void CutlassW4a8WeightLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  expect_pack_args(canonical, packed);
  // Both nibbles of a byte move together (see the header), each re-encoded.
  static const std::array<uint8_t, 256> byte_code = [] {
    std::array<uint8_t, 256> t{};
    for (unsigned b = 0; b < 256; ++b)
      t[b] = static_cast<uint8_t>(encode_nibble(static_cast<uint8_t>(b & 0xF)) | (encode_nibble(static_cast<uint8_t>(b >> 4)) << 4));
    return t;
  }();
  const uint64_t rows = canonical.shape[0], k = canonical.shape[1] * 8;
  const uint8_t* in = canonical.bytes.data();
  for (uint64_t n = 0; n < rows; ++n) {
    const uint8_t* row = in + n * (k / 2);
    for (uint64_t c = 0; c < k; c += 2) packed[static_cast<size_t>(reordered_nibble(n, c, rows) / 2)] = byte_code[row[c / 2]];
  }
}

std::string CutlassW4a8ScaleLayout::name() const {
  return layout_id::cutlass_pack_scale_fp8();
}

Accepts CutlassW4a8ScaleLayout::accepts() const {
  Accepts a;
  a.dtypes = Accepts::Dtypes::one_byte;
  a.what = "one expert's F8_E4M3 group scales [N, K/128]";
  a.largest_value = 0x7E;
  a.value_rule = "the packed table of a negative or NaN FP8 group scale does not give the scale back (vLLM's W4A8 scales are in [0, 448])";
  return a;
}

std::vector<uint64_t> CutlassW4a8ScaleLayout::parameter_shape(uint64_t num_experts, std::span<const uint64_t> canonical_shape) const {
  const std::vector<uint64_t> s = packed_shape(canonical_shape);
  return {num_experts * s[0] * s[1] * s[2]};
}

uint8_t CutlassW4a8ScaleLayout::cutlass_e4m3(float v) {
  if (std::isnan(v)) return 0x7F;
  if (std::fabs(v) >= 448.0f) return static_cast<uint8_t>((std::signbit(v) ? 0x80 : 0x00) | 0x7E);
  return float_to_e4m3(v);
}

std::array<uint8_t, 8> CutlassW4a8ScaleLayout::lookup_table(uint8_t s8) {
  const float s = e4m3_to_float(s8);
  std::array<uint8_t, 8> t{};
  for (int j = 0; j < 8; ++j) t[static_cast<size_t>(j)] = cutlass_e4m3(s * static_cast<float>(j - 8));
  return t;
}

uint64_t CutlassW4a8ScaleLayout::encode_unit(DType, uint64_t value, uint64_t) const {
  const std::array<uint8_t, 8> t = lookup_table(static_cast<uint8_t>(value));
  uint64_t word = 0;
  for (size_t j = 0; j < 8; ++j) word |= static_cast<uint64_t>(t[j]) << (8 * j);
  return word;
}

uint64_t CutlassW4a8ScaleLayout::decode_unit(DType canonical, uint64_t value, uint64_t canonical_unit) const {
  const uint64_t s8 = ((value >> 56) & 0xFF) ^ 0x80;  // byte 7 = e4m3(-s8) = -s8
  // Only the tables pack writes read back: a stranger's artifact whose table is not the one of a
  // scale in [0, 448] has no canonical scale (and would not pack again).
  if (s8 > accepts().largest_value.value_or(0xFF) || encode_unit(canonical, s8, canonical_unit) != value)
    throw Error(ErrorKind::bad_input, name() + ": packed lookup table " + std::to_string(value) + " for canonical scale " +
                                          std::to_string(canonical_unit) + " is not the table of an FP8 group scale in [0, 448]");
  return s8;
}

}  // namespace moepack::packers
