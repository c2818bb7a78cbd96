// A layout defined by its index map: the base every packer derives from.
//
// As in FBGEMM's PackBMatrix (one `pack_unpack_` routine serves both directions, `addr(r, c)`
// is the map, the base owns the blocking arithmetic), a packer states its geometry and ONE
// visit of (canonical position, packed position) pairs; pack, unpack, the shape checks and the
// refusals are derived from that here, so the two directions cannot disagree. A packer gives:
//
//   accepts()                  the canonical tensors it takes (dtype class, ranks, multiples of
//                              the leading and last axis, a value limit); everything else is
//                              refused with a bad_input error naming the rule before a byte moves
//   units(dtype)               what one visited position is: a bit (bit twiddles), an FP4 code,
//                              a byte, or an element (casts and element shuffles)
//   packed_shape_of(shape)     the per-expert packed shape of an accepted canonical shape
//   visit(dtype, shape, fn)    calls fn(canonical unit index, packed unit index) exactly once
//                              for every canonical unit, in any order; packed units no canonical
//                              unit reaches are padding and hold Units::pad_byte
//
// Unit i of a buffer of b-bit units is bits [i*b, (i+1)*b): for b < 8 counted from the least
// significant bit of byte i*b/8 (so FP4 unit 2k is byte k's low nibble, as checkpoints store
// FP4 pairs), for b >= 8 the little-endian bytes at i*b/8.
//
// A packer may override pack() and unpack() with hand-written bulk paths (whole rows, tiles,
// tables); tests/packers/layout_contract_test.cpp checks every registered layout's pack()
// against pack_by_map(), unpack() against unpack_by_map() on the same packed bytes, and
// unpack(pack(x)) == x over awkward sizes drawn from accepts().
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "packers/common.h"
#include "packers/layout.h"

namespace moepack::packers {

// The canonical tensors a layout takes. The base refuses the rest in this order: dtype, rank,
// empty tensor, leading-axis multiple, last-axis multiple, irregular_refusal().
struct Accepts {
  enum class Dtypes {
    one_byte,    // any one-byte dtype: U8 FP4 pairs or E8M0 bytes, F8_E8M0, F8_E4M3, I8 (bytes move whole)
    u8,          // exactly U8 packed FP4 pairs
    whole_byte,  // any dtype of whole bytes (elements move whole, whatever their width)
    float_bias,  // BF16, F16 or F32 (the layout casts the values)
    any,         // anything, FP4 included (bytes kept)
    i32,         // exactly I32 (packed integer words: GPTQ/AWQ qweight and qzeros)
    bf16,        // exactly BF16 (a kernel that takes no other 16-bit type)
    i8,          // exactly I8 (signed int8 values)
  };
  static constexpr uint32_t rank(unsigned r) { return 1u << r; }
  static constexpr uint32_t kAnyRank = ~0u;

  Dtypes dtypes = Dtypes::one_byte;
  std::string dtype_rule;                       // the dtype refusal's reason when the class's own is not enough
  uint32_t ranks = rank(2);                     // bit r set: rank r accepted
  std::string what = "one expert's 2-D tensor [N, C]";  // what a wrong rank is told to be
  bool allows_empty = false;                    // a zero extent is refused unless set
  uint64_t rows_multiple = 1;                   // shape[0] (a 1-D tensor's only axis)
  std::string rows_rule;                        // the refusal's reason, naming upstream's rule
  uint64_t last_multiple = 1;                   // shape.back()
  std::string last_rule;
  std::optional<uint64_t> largest_value;        // canonical unit values above it are refused by pack
  std::string value_rule;

  bool takes_rank(size_t r) const { return ranks == kAnyRank || (r < 32 && ((ranks >> r) & 1u)); }
};

// What one visited position is. Widths are 1, 4, 8, 16, 32 or 64 bits.
struct Units {
  unsigned canonical_bits = 8;
  unsigned packed_bits = 8;
  // The value changes on its way (a cast to packed_dtype, unless the layout overrides
  // encode_unit / decode_unit). Without it units are copied bit for bit.
  bool converts = false;
  uint8_t pad_byte = 0;  // what every packed byte no canonical unit reaches holds
};

class IndexMapLayout : public Layout {
 public:
  virtual Accepts accepts() const = 0;
  virtual Units units(DType) const { return {}; }
  // A refusal no multiple can state; checked after accepts().
  virtual std::optional<std::string> irregular_refusal(std::span<const uint64_t>) const { return std::nullopt; }

  // Refuse (bad_input, naming layout and rule) what accepts() and irregular_refusal() exclude.
  void check_dtype(DType canonical, std::span<const uint64_t> canonical_shape) const;
  void check_shape(std::span<const uint64_t> canonical_shape) const;

  // check_shape, then packed_shape_of (out of line: callers should not see packed_shape_of
  // without the check that makes its indexing safe).
  std::vector<uint64_t> packed_shape(std::span<const uint64_t> canonical_shape) const final;
  // The generic path: every packed byte set to the padding, then every unit the visit names
  // moved. pack() is this unless the layout overrides it with a bulk path.
  virtual void pack_by_map(const TensorView& canonical, std::span<uint8_t> packed) const = 0;
  void pack(const TensorView& canonical, std::span<uint8_t> packed) const override { pack_by_map(canonical, packed); }
  // The generic inverse: every canonical unit read back from where the visit put it. unpack()
  // is this unless the layout overrides it with a bulk path (verify and run unpack every
  // routed expert of every layer, so the hot layouts have one).
  virtual void unpack_by_map(std::span<const uint8_t> packed, OwnedTensor& canonical) const = 0;
  void unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const override { unpack_by_map(packed, canonical); }
  // The visit with its callback type-erased (slower), for tests and tools that walk the map.
  virtual void visit_pairs(DType canonical, std::span<const uint64_t> canonical_shape,
                           const std::function<void(uint64_t canonical_unit, uint64_t packed_unit)>& fn) const = 0;

 protected:
  // Called only with a shape check_shape accepted.
  virtual std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> canonical_shape) const = 0;
  // Value change of one unit when Units::converts: a torch-style cast to packed_dtype by default.
  virtual uint64_t encode_unit(DType canonical, uint64_t value, uint64_t canonical_unit) const;
  virtual uint64_t decode_unit(DType canonical, uint64_t value, uint64_t canonical_unit) const;

  // Everything a pack call must satisfy (dtype, shape, both buffer sizes), for bulk overrides too.
  Units expect_pack_args(const TensorView& canonical, std::span<const uint8_t> packed) const;
  Units expect_unpack_args(std::span<const uint8_t> packed, const OwnedTensor& canonical) const;
  [[noreturn]] void refuse_value(std::span<const uint64_t> shape, uint64_t value, uint64_t canonical_unit) const;
};

namespace unit_io {

static_assert(std::endian::native == std::endian::little, "units of 16 bits and more are read as little-endian words");

template <unsigned Bits>
inline uint64_t get(const uint8_t* buffer, uint64_t i) {
  if constexpr (Bits == 1) {
    return (buffer[i >> 3] >> (i & 7)) & 1u;
  } else if constexpr (Bits == 4) {
    return (buffer[i >> 1] >> ((i & 1) * 4)) & 0xFu;
  } else if constexpr (Bits == 8) {
    return buffer[i];
  } else {
    uint64_t v = 0;
    std::memcpy(&v, buffer + i * (Bits / 8), Bits / 8);
    return v;
  }
}

template <unsigned Bits>
inline void put(uint8_t* buffer, uint64_t i, uint64_t v) {
  if constexpr (Bits == 1) {
    const unsigned shift = static_cast<unsigned>(i & 7);
    buffer[i >> 3] = static_cast<uint8_t>((buffer[i >> 3] & ~(1u << shift)) | ((v & 1u) << shift));
  } else if constexpr (Bits == 4) {
    const unsigned shift = static_cast<unsigned>((i & 1) * 4);
    buffer[i >> 1] = static_cast<uint8_t>((buffer[i >> 1] & ~(0xFu << shift)) | ((v & 0xFu) << shift));
  } else if constexpr (Bits == 8) {
    buffer[i] = static_cast<uint8_t>(v);
  } else {
    std::memcpy(buffer + i * (Bits / 8), &v, Bits / 8);
  }
}

// Calls fn.template operator()<Bits>() for a runtime width, so the visit's inner loop is
// compiled once per width instead of testing the width per unit.
template <class Fn>
inline void with_width(unsigned bits, Fn&& fn) {
  switch (bits) {
    case 1: return fn.template operator()<1>();
    case 4: return fn.template operator()<4>();
    case 8: return fn.template operator()<8>();
    case 16: return fn.template operator()<16>();
    case 32: return fn.template operator()<32>();
    case 64: return fn.template operator()<64>();
  }
  throw_internal("index map: unsupported unit width " + std::to_string(bits) + " bits");
}

inline uint64_t get_any(const uint8_t* buffer, uint64_t i, unsigned bits) {
  uint64_t v = 0;
  with_width(bits, [&]<unsigned B>() { v = get<B>(buffer, i); });
  return v;
}
inline void put_any(uint8_t* buffer, uint64_t i, unsigned bits, uint64_t v) {
  with_width(bits, [&]<unsigned B>() { put<B>(buffer, i, v); });
}

}  // namespace unit_io

// CRTP: Derived provides `template <class Fn> void visit(DType, std::span<const uint64_t>, Fn&&) const`,
// inlined into both directions here.
template <class Derived>
class IndexMap : public IndexMapLayout {
 public:
  void pack_by_map(const TensorView& canonical, std::span<uint8_t> packed) const final {
    const Units u = expect_pack_args(canonical, packed);
    std::fill(packed.begin(), packed.end(), u.pad_byte);
    const uint8_t* in = canonical.bytes.data();
    uint8_t* out = packed.data();
    const std::optional<uint64_t> largest = accepts().largest_value;
    if (!u.converts && !largest) {
      unit_io::with_width(u.canonical_bits, [&]<unsigned B>() {
        self().visit(canonical.dtype, canonical.shape,
                     [&](uint64_t c, uint64_t p) { unit_io::put<B>(out, p, unit_io::get<B>(in, c)); });
      });
      return;
    }
    self().visit(canonical.dtype, canonical.shape, [&](uint64_t c, uint64_t p) {
      const uint64_t value = unit_io::get_any(in, c, u.canonical_bits);
      if (largest && value > *largest) refuse_value(canonical.shape, value, c);
      unit_io::put_any(out, p, u.packed_bits, u.converts ? encode_unit(canonical.dtype, value, c) : value);
    });
  }

  void unpack_by_map(std::span<const uint8_t> packed, OwnedTensor& canonical) const final {
    const Units u = expect_unpack_args(packed, canonical);
    const uint8_t* in = packed.data();
    uint8_t* out = canonical.bytes.data();
    if (!u.converts) {
      unit_io::with_width(u.canonical_bits, [&]<unsigned B>() {
        self().visit(canonical.dtype, canonical.shape,
                     [&](uint64_t c, uint64_t p) { unit_io::put<B>(out, c, unit_io::get<B>(in, p)); });
      });
      return;
    }
    self().visit(canonical.dtype, canonical.shape, [&](uint64_t c, uint64_t p) {
      unit_io::put_any(out, c, u.canonical_bits, decode_unit(canonical.dtype, unit_io::get_any(in, p, u.packed_bits), c));
    });
  }

  void visit_pairs(DType canonical, std::span<const uint64_t> canonical_shape,
                   const std::function<void(uint64_t, uint64_t)>& fn) const final {
    check_dtype(canonical, canonical_shape);
    check_shape(canonical_shape);
    self().visit(canonical, canonical_shape, fn);
  }

 private:
  const Derived& self() const { return static_cast<const Derived&>(*this); }
};

}  // namespace moepack::packers
