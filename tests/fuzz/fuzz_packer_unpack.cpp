// Every registered packer layout (packers::layout_table()) on fuzzed dimensions and bytes. The
// emulation experts call `unpack` on packed tensors read from someone else's artifact, whose
// shape comes from its manifest, so the dimensions are validated first (packed_shape /
// parameter_shape may refuse with bad_input) and nothing after that may fail or read out of
// bounds. Properties, against the layout's own inverse:
//   - pack then unpack of a fuzzed canonical tensor gives it back (unpack ∘ pack = identity),
//     bit for bit; only a layout that casts (a bias widened to f32 or narrowed to bf16) may
//     change a NaN's payload, never a number, and an exact cast only (see same_values);
//   - for a fuzzed packed buffer x that unpack accepts, a layout's bulk unpack equals its index
//     map's inverse (unpack_by_map), padding bytes of any value included;
//   - for a fuzzed packed buffer x that unpack accepts, c = unpack(x) packs (no refusal) to p
//     with unpack(p) == c, and packing is idempotent from there (pack(unpack(p)) == p):
//     padding bytes x may hold are dropped once, never the payload.
// Input: layout index, canonical dtype, rank and dims (each <= 512, at most kMaxElements
// elements), an expert count for parameter_shape, then the bytes (cycled to fill a buffer).
// fuzz-links: moepack_packers
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "fuzz/byte_reader.h"
#include "lib/core/codecs.h"
#include "fuzz/fuzz_target.h"
#include "packers/index_map.h"
#include "packers/registry.h"

namespace {

using moepack::DType;

// Every one-byte-or-wider dtype a canonical expert tensor can have (FP4 pairs and E8M0 live in
// U8); the layouts refuse the ones they do not take.
constexpr DType kCanonicalDtypes[] = {DType::U8, DType::I8, DType::BF16, DType::F16, DType::F32, DType::I32, DType::F8_E4M3};
constexpr uint64_t kMaxDim = 512;
constexpr uint64_t kMaxElements = 1u << 16;
constexpr uint64_t kMaxPackedBytes = 64u << 20;

std::vector<uint8_t> fill_from(const uint8_t* data, size_t size, size_t n) {
  std::vector<uint8_t> out(n);
  // Cycling the tail (instead of zeros) keeps nibbles and exponents varied in every tile.
  for (size_t i = 0; i < n; ++i) out[i] = size == 0 ? static_cast<uint8_t>(i * 37 + 11) : data[i % size];
  return out;
}

// Bytes equal, or — for a layout that casts floats — elements equal, both NaN, or a value beyond
// F16's range against the infinity the F16 cast makes of it. torch's casts do not promise NaN
// payloads, and the packers cast through float.
bool same_values(DType dtype, bool casts, const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a == b) return true;
  if (!casts || a.size() != b.size()) return false;
  const size_t width = static_cast<size_t>(moepack::dtype_bits(dtype) / 8);
  auto nan_at = [&](const uint8_t* p) {
    uint32_t bits = 0;
    for (size_t k = width; k-- > 0;) bits = (bits << 8) | p[k];
    switch (dtype) {
      case DType::BF16: return (bits & 0x7F80u) == 0x7F80u && (bits & 0x007Fu) != 0;
      case DType::F16: return (bits & 0x7C00u) == 0x7C00u && (bits & 0x03FFu) != 0;
      case DType::F32: return (bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0;
      default: return false;
    }
  };
  auto value_at = [&](const uint8_t* p) -> float {
    uint32_t bits = 0;
    for (size_t k = width; k-- > 0;) bits = (bits << 8) | p[k];
    switch (dtype) {
      case DType::BF16: return moepack::bf16_to_float(static_cast<uint16_t>(bits));
      case DType::F16: return moepack::f16_to_float(static_cast<uint16_t>(bits));
      case DType::F32: {
        float f = 0;
        std::memcpy(&f, &bits, 4);
        return f;
      }
      default: return 0.0f;
    }
  };
  // A value beyond F16's range (65504) overflows to an infinity of its sign when a layout casts
  // to F16, as torch's .to(float16) does: bf16(65504) is 65536, so a foreign F16 slab read into
  // BF16 params does not come back from the F16 packing unchanged at that edge.
  auto overflowed = [&](const uint8_t* x, const uint8_t* y) {
    const float u = value_at(x), v = value_at(y);
    return std::isinf(v) && std::isfinite(u) && std::fabs(u) > 65504.0f && std::signbit(u) == std::signbit(v);
  };
  for (size_t i = 0; i + width <= a.size(); i += width)
    if (std::memcmp(&a[i], &b[i], width) != 0 && !(nan_at(&a[i]) && nan_at(&b[i])) && !overflowed(&a[i], &b[i]) && !overflowed(&b[i], &a[i]))
      return false;
  return true;
}

}  // namespace

MOEPACK_FUZZ_TARGET(packer_unpack) {
  using namespace moepack;
  fuzz::ByteReader in(data, size);
  const auto table = packers::layout_table();
  const packers::LayoutRow& row = table[static_cast<size_t>(in.in_range(0, table.size() - 1))];
  const DType dtype = kCanonicalDtypes[in.in_range(0, std::size(kCanonicalDtypes) - 1)];
  const size_t rank = static_cast<size_t>(in.in_range(1, 3));
  std::vector<uint64_t> shape(rank);
  for (uint64_t& d : shape) d = in.in_range(0, kMaxDim);
  uint64_t elements = 1;
  for (uint64_t d : shape) elements *= d;
  if (elements > kMaxElements) return;
  const uint64_t num_experts = in.in_range(1, 8);
  const std::string payload_context = std::string(row.id) + " " + std::string(dtype_name(dtype)) + shape_string(shape);

  std::unique_ptr<packers::Layout> layout = packers::make_layout(row.id);
  MOEPACK_FUZZ_CHECK(layout->name() == row.id, payload_context);
  DType packed_dtype = dtype;
  std::vector<uint64_t> packed_shape;
  uint64_t packed_bytes = 0;
  if (!fuzz::expect_input_error([&] {
        packed_dtype = layout->packed_dtype(dtype);
        packed_shape = layout->packed_shape(shape);
        const std::vector<uint64_t> param = layout->parameter_shape(num_experts, shape);
        packed_bytes = byte_size(packed_dtype, packed_shape);
        // The [E, ...] parameter holds exactly E slabs, whatever shape vLLM gives it.
        MOEPACK_FUZZ_CHECK(byte_size(packed_dtype, param) == num_experts * packed_bytes, payload_context);
      }))
    return;
  // A packed slab pads to tiles (a [1, K] scale becomes [128, K'] on Blackwell) and may widen to
  // f32, but for at most kMaxElements elements it never needs more than this; a size beyond it
  // would come from an overflow or an unchecked field.
  MOEPACK_FUZZ_CHECK(packed_bytes <= kMaxPackedBytes, payload_context + ": packed size out of proportion");

  const uint8_t* rest = data + (size - in.remaining());
  const size_t rest_size = in.remaining();

  // unpack ∘ pack on a fuzzed canonical tensor. pack may still refuse the dtype (bad_input).
  OwnedTensor canonical(dtype, shape);
  canonical.bytes = fill_from(rest, rest_size, canonical.bytes.size());
  std::vector<uint8_t> packed(static_cast<size_t>(packed_bytes), 0xA5);
  if (!fuzz::expect_input_error([&] { layout->pack(canonical.view(), packed); })) return;
  OwnedTensor back(dtype, shape);
  layout->unpack(packed, back);
  // A cast between float dtypes of the same value set (bf16 -> f32 -> bf16) keeps every number;
  // a narrowing one (f32 -> bf16) does not, so there only the second round trip below is exact.
  // (A dtype change between non-float types is a reinterpretation, U8 viewed as E8M0 or I32,
  // and must keep every bit.)
  const bool casts = packed_dtype != dtype && dtype_is_float(dtype) && dtype_is_float(packed_dtype);
  const bool exact_cast = !casts || (packed_dtype == DType::F32 && (dtype == DType::BF16 || dtype == DType::F16));
  if (exact_cast) MOEPACK_FUZZ_CHECK(same_values(dtype, casts, back.bytes, canonical.bytes), payload_context + ": unpack(pack(c)) != c");

  // A fuzzed packed slab, as read from a stranger's artifact.
  const std::vector<uint8_t> foreign = fill_from(rest, rest_size, static_cast<size_t>(packed_bytes));
  OwnedTensor from_foreign(dtype, shape);
  // unpack may refuse bytes that no canonical tensor packs to (bad_input); what it accepts
  // must pack again without complaint.
  if (!fuzz::expect_input_error([&] { layout->unpack(foreign, from_foreign); })) return;
  // A bulk unpack path reads the same bytes as the index map's inverse and ignores the padding
  // the same way, whatever the padding holds.
  if (const auto* map = dynamic_cast<const packers::IndexMapLayout*>(layout.get())) {
    OwnedTensor by_map(dtype, shape);
    std::fill(by_map.bytes.begin(), by_map.bytes.end(), uint8_t{0x3C});
    map->unpack_by_map(foreign, by_map);
    MOEPACK_FUZZ_CHECK(by_map.bytes == from_foreign.bytes, payload_context + ": unpack differs from unpack_by_map on a foreign slab");
  }
  std::vector<uint8_t> repacked(static_cast<size_t>(packed_bytes), 0x5A);
  layout->pack(from_foreign.view(), repacked);
  OwnedTensor again(dtype, shape);
  layout->unpack(repacked, again);
  MOEPACK_FUZZ_CHECK(same_values(dtype, casts, again.bytes, from_foreign.bytes), payload_context + ": unpack(pack(unpack(x))) != unpack(x)");
  std::vector<uint8_t> repacked_twice(static_cast<size_t>(packed_bytes), 0xC3);
  layout->pack(again.view(), repacked_twice);
  MOEPACK_FUZZ_CHECK(same_values(packed_dtype, casts, repacked_twice, repacked), payload_context + ": pack is not idempotent on its own output");
}
