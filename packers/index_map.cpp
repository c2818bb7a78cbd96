// The non-template half of IndexMapLayout: the checks every packer shares (index_map.h).
#include "packers/index_map.h"

namespace moepack::packers {
namespace {

bool dtype_taken(Accepts::Dtypes dtypes, DType t) {
  switch (dtypes) {
    case Accepts::Dtypes::one_byte: return dtype_bits(t) == 8;
    case Accepts::Dtypes::u8: return t == DType::U8;
    case Accepts::Dtypes::whole_byte: return dtype_bits(t) % 8 == 0;
    case Accepts::Dtypes::float_bias: return is_float_bias_dtype(t);
    case Accepts::Dtypes::any: return true;
    case Accepts::Dtypes::i32: return t == DType::I32;
    case Accepts::Dtypes::bf16: return t == DType::BF16;
    case Accepts::Dtypes::i8: return t == DType::I8;
  }
  return false;
}

std::string dtype_rule(Accepts::Dtypes dtypes) {
  switch (dtypes) {
    case Accepts::Dtypes::one_byte: return "expects a one-byte dtype (U8 FP4 pairs or E8M0 bytes)";
    case Accepts::Dtypes::u8: return "expects U8 packed FP4 pairs";
    case Accepts::Dtypes::whole_byte: return "needs a whole-byte dtype";
    case Accepts::Dtypes::float_bias: return "expects BF16, F16 or F32 values";
    case Accepts::Dtypes::any: return "";
    case Accepts::Dtypes::i32: return "expects I32 packed integer words";
    case Accepts::Dtypes::bf16: return "expects BF16 values";
    case Accepts::Dtypes::i8: return "expects I8 values";
  }
  return "";
}

// "(3, 7)" for unit 3*cols+7 of a 2-D tensor whose units are its elements.
std::string element_position(std::span<const uint64_t> shape, uint64_t unit) {
  std::vector<uint64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] == 0 ? 0 : unit % shape[d];
    unit = shape[d] == 0 ? 0 : unit / shape[d];
  }
  std::string out = "(";
  for (size_t d = 0; d < index.size(); ++d) out += (d ? ", " : "") + std::to_string(index[d]);
  return out + ")";
}

}  // namespace

void IndexMapLayout::check_dtype(DType canonical, std::span<const uint64_t> shape) const {
  const Accepts a = accepts();
  if (!dtype_taken(a.dtypes, canonical))
    refuse(name(), shape, dtype_rule(a.dtypes) + ", got " + std::string(dtype_name(canonical)) + (a.dtype_rule.empty() ? "" : ": " + a.dtype_rule));
}

void IndexMapLayout::check_shape(std::span<const uint64_t> shape) const {
  const Accepts a = accepts();
  if (!a.takes_rank(shape.size())) refuse(name(), shape, "expects " + a.what);
  if (!a.allows_empty && std::find(shape.begin(), shape.end(), uint64_t{0}) != shape.end()) refuse(name(), shape, "empty tensor");
  if (!shape.empty() && shape.front() % a.rows_multiple != 0) refuse(name(), shape, a.rows_rule);
  if (!shape.empty() && shape.back() % a.last_multiple != 0) refuse(name(), shape, a.last_rule);
  if (std::optional<std::string> rule = irregular_refusal(shape)) refuse(name(), shape, *rule);
}

std::vector<uint64_t> IndexMapLayout::packed_shape(std::span<const uint64_t> canonical_shape) const {
  check_shape(canonical_shape);
  return packed_shape_of(canonical_shape);
}

uint64_t IndexMapLayout::encode_unit(DType canonical, uint64_t value, uint64_t) const {
  return cast_float_bits(canonical, value, packed_dtype(canonical));
}

uint64_t IndexMapLayout::decode_unit(DType canonical, uint64_t value, uint64_t) const {
  return cast_float_bits(packed_dtype(canonical), value, canonical);
}

namespace {

void expect_widths(const IndexMapLayout& layout, const Units& u) {
  if (!u.converts && u.canonical_bits != u.packed_bits)
    throw_internal(layout.name() + ": units of " + std::to_string(u.canonical_bits) + " and " +
                   std::to_string(u.packed_bits) + " bits need a conversion");
}

void expect_size(const IndexMapLayout& layout, std::string_view what, uint64_t have, uint64_t want) {
  if (have != want) expect_bytes(layout.name(), what, have, want);  // the name is built only for the error
}

}  // namespace

Units IndexMapLayout::expect_pack_args(const TensorView& canonical, std::span<const uint8_t> packed) const {
  check_dtype(canonical.dtype, canonical.shape);
  check_shape(canonical.shape);
  expect_size(*this, "canonical", canonical.bytes.size(), byte_size(canonical.dtype, canonical.shape));
  expect_size(*this, "packed", packed.size(), byte_size(packed_dtype(canonical.dtype), packed_shape_of(canonical.shape)));
  const Units u = units(canonical.dtype);
  expect_widths(*this, u);
  return u;
}

Units IndexMapLayout::expect_unpack_args(std::span<const uint8_t> packed, const OwnedTensor& canonical) const {
  check_dtype(canonical.dtype, canonical.shape);
  check_shape(canonical.shape);
  expect_size(*this, "canonical", canonical.bytes.size(), byte_size(canonical.dtype, canonical.shape));
  expect_size(*this, "packed", packed.size(), byte_size(packed_dtype(canonical.dtype), packed_shape_of(canonical.shape)));
  const Units u = units(canonical.dtype);
  expect_widths(*this, u);
  return u;
}

void IndexMapLayout::refuse_value(std::span<const uint64_t> shape, uint64_t value, uint64_t canonical_unit) const {
  refuse(name(), shape, "value " + std::to_string(value) + " at element " + element_position(shape, canonical_unit) + ": " +
                            accepts().value_rule);
}

}  // namespace moepack::packers
