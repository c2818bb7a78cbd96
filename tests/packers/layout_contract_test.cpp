// Every registered layout against its own index map, in the manner of ggml's test-backend-ops:
// one parameterised case per registry row, sizes drawn from what the layout declares it
// accepts (packers/index_map.h, Accepts) instead of shape lists redefined per test file.
//
// For every declared dtype and every size built from awkward extents (1, 2, 3, 17, 33, 127, 129)
// and from the layout's own multiples (m, 3m, 5m, and the tails m-1, m+1):
//   accepted -> pack() (a hand-written bulk path where the layout has one) writes every byte and
//               equals pack_by_map(); unpack() (a bulk path too, where there is one) equals
//               unpack_by_map() and overwrites every canonical byte; unpack(pack(x)) == x (for a
//               narrowing cast: pack(unpack(p)) == p); the visit names every canonical unit once, no packed unit twice, nothing
//               out of range, and the bytes no unit reaches hold the padding byte;
//               parameter_shape holds exactly E slabs
//   refused  -> packed_shape, pack and unpack all fail with a bad_input error naming the layout.
// The per-layout files keep what this cannot know: worked examples, upstream transliterations,
// torch-op emulations and the golden bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lib/core/error.h"
#include "packers/index_map.h"
#include "packers/registry.h"
#include "tests/packers/triton_reference_ops.h"

namespace moepack::packers {
namespace {

using Shape = std::vector<uint64_t>;

constexpr uint64_t kAwkwardExtents[] = {1, 2, 3, 17, 33, 127, 129};

// The dtypes a declaration accepts, and some it must refuse.
std::vector<DType> accepted_dtypes(Accepts::Dtypes d) {
  switch (d) {
    case Accepts::Dtypes::one_byte: return {DType::U8, DType::F8_E8M0};
    case Accepts::Dtypes::u8: return {DType::U8};
    case Accepts::Dtypes::whole_byte: return {DType::U8, DType::BF16, DType::F32};
    case Accepts::Dtypes::float_bias: return {DType::BF16, DType::F16, DType::F32};
    case Accepts::Dtypes::any: return {DType::U8, DType::BF16};
    case Accepts::Dtypes::i32: return {DType::I32};
    case Accepts::Dtypes::bf16: return {DType::BF16};
    case Accepts::Dtypes::i8: return {DType::I8};
  }
  return {};
}
std::vector<DType> refused_dtypes(Accepts::Dtypes d) {
  switch (d) {
    case Accepts::Dtypes::one_byte: return {DType::BF16, DType::F4};
    case Accepts::Dtypes::u8: return {DType::F8_E8M0, DType::BF16};
    case Accepts::Dtypes::whole_byte: return {DType::F4};
    case Accepts::Dtypes::float_bias: return {DType::U8, DType::I32};
    case Accepts::Dtypes::any: return {};
    case Accepts::Dtypes::i32: return {DType::U8, DType::BF16};
    case Accepts::Dtypes::bf16: return {DType::F16, DType::F32, DType::U8};
    case Accepts::Dtypes::i8: return {DType::U8, DType::F8_E4M3, DType::BF16};
  }
  return {};
}

// Awkward extents plus the multiple m the axis must keep: m, 3m, 5m, and the tails around m.
std::vector<uint64_t> extents(uint64_t multiple) {
  std::set<uint64_t> out(std::begin(kAwkwardExtents), std::end(kAwkwardExtents));
  if (multiple > 1) out.insert({multiple, 3 * multiple, 5 * multiple, multiple - 1, multiple + 1});
  return {out.begin(), out.end()};
}

std::vector<Shape> candidate_shapes(const Accepts& a) {
  std::vector<Shape> shapes = {{}, {2, 3, 5}, {0, 4}, {4, 0}, {0}};
  const std::vector<uint64_t> leading = extents(a.rows_multiple), last = extents(a.last_multiple);
  std::set<uint64_t> vector_lengths(leading.begin(), leading.end());
  vector_lengths.insert(last.begin(), last.end());
  for (uint64_t n : vector_lengths) shapes.push_back({n});
  for (uint64_t n : leading)
    for (uint64_t c : last) shapes.push_back({n, c});
  if (a.takes_rank(3)) shapes.push_back({3, 2, 6});
  return shapes;
}

bool declared_to_accept(const IndexMapLayout& layout, const Accepts& a, const Shape& shape) {
  if (!a.takes_rank(shape.size())) return false;
  if (!a.allows_empty && std::find(shape.begin(), shape.end(), uint64_t{0}) != shape.end()) return false;
  if (!shape.empty() && (shape.front() % a.rows_multiple != 0 || shape.back() % a.last_multiple != 0)) return false;
  return !layout.irregular_refusal(shape).has_value();
}

// Random canonical bytes the layout must take back exactly: floats kept finite (casts do not
// promise NaN payloads) and values kept within a declared limit.
OwnedTensor canonical_input(const Accepts& a, DType dtype, const Shape& shape, uint64_t seed) {
  OwnedTensor t = testing::random_tensor(dtype, shape, seed);
  const size_t width = static_cast<size_t>(dtype_bits(dtype) / 8);
  if (is_float_bias_dtype(dtype))
    for (size_t i = width - 1; i < t.bytes.size(); i += width) t.bytes[i] &= 0xBF;  // exponent below all-ones
  if (a.largest_value)
    for (uint8_t& b : t.bytes) b = static_cast<uint8_t>(b % (*a.largest_value + 1));
  return t;
}

std::optional<ErrorKind> error_of(const std::function<void()>& fn, std::string* message = nullptr) {
  try {
    fn();
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.kind();
  }
  return std::nullopt;
}

// A value change that loses information: a float cast to a narrower float.
bool narrows(const Units& u, DType canonical, DType packed) {
  return u.converts && is_float_bias_dtype(canonical) && is_float_bias_dtype(packed) && packed != canonical &&
         packed != DType::F32;
}

// The visit, walked through its type-erased form: every canonical unit once, packed units in
// range and distinct, untouched packed bytes equal to the padding.
void expect_valid_map(const IndexMapLayout& layout, DType dtype, const Shape& shape, const std::vector<uint8_t>& packed) {
  const Units u = layout.units(dtype);
  const uint64_t canonical_units = byte_size(dtype, shape) * 8 / u.canonical_bits;
  const uint64_t packed_units = packed.size() * 8 / u.packed_bits;
  std::vector<uint8_t> canonical_seen(canonical_units, 0), packed_seen(packed_units, 0);
  std::vector<uint8_t> byte_reached(packed.size(), 0);
  bool in_range = true;
  layout.visit_pairs(dtype, shape, [&](uint64_t c, uint64_t p) {
    if (c >= canonical_units || p >= packed_units) {
      in_range = false;
      return;
    }
    ++canonical_seen[c];
    ++packed_seen[p];
    const uint64_t first_byte = p * u.packed_bits / 8, bytes = std::max<uint64_t>(u.packed_bits / 8, 1);
    std::fill_n(byte_reached.begin() + static_cast<std::ptrdiff_t>(first_byte), bytes, uint8_t{1});
  });
  ASSERT_TRUE(in_range) << "the visit leaves the canonical or packed buffer";
  EXPECT_EQ(std::count(canonical_seen.begin(), canonical_seen.end(), 1), static_cast<std::ptrdiff_t>(canonical_units))
      << "a canonical unit is visited not exactly once";
  EXPECT_EQ(std::count_if(packed_seen.begin(), packed_seen.end(), [](uint8_t n) { return n > 1; }), 0)
      << "two canonical units land on one packed unit";
  for (size_t i = 0; i < packed.size(); ++i) {
    if (!byte_reached[i]) {
      ASSERT_EQ(packed[i], u.pad_byte) << "padding byte " << i;
    }
  }
}

void expect_accepted(const IndexMapLayout& layout, DType dtype, const Shape& shape, uint64_t seed) {
  SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + shape_string(shape));
  const Accepts a = layout.accepts();
  const OwnedTensor canonical = canonical_input(a, dtype, shape, seed);
  const DType packed_dtype = layout.packed_dtype(dtype);
  const uint64_t slab = byte_size(packed_dtype, layout.packed_shape(shape));

  // Different fillers: equal results prove both paths write every byte.
  std::vector<uint8_t> bulk(slab, 0xA5), by_map(slab, 0x5A);
  layout.pack(canonical.view(), bulk);
  layout.pack_by_map(canonical.view(), by_map);
  ASSERT_EQ(bulk, by_map) << "pack differs from the index map";
  expect_valid_map(layout, dtype, shape, by_map);

  OwnedTensor back(dtype, shape), back_by_map(dtype, shape);
  std::fill(back.bytes.begin(), back.bytes.end(), uint8_t{0xA5});
  std::fill(back_by_map.bytes.begin(), back_by_map.bytes.end(), uint8_t{0x5A});
  layout.unpack(bulk, back);
  layout.unpack_by_map(bulk, back_by_map);
  ASSERT_EQ(back.bytes, back_by_map.bytes) << "unpack differs from the index map's inverse";
  if (narrows(layout.units(dtype), dtype, packed_dtype)) {
    std::vector<uint8_t> again(slab, 0xC3);
    layout.pack(back.view(), again);
    EXPECT_EQ(again, bulk) << "pack(unpack(p)) != p";
  } else {
    EXPECT_EQ(back.bytes, canonical.bytes) << "unpack(pack(x)) != x";
  }

  for (uint64_t experts : {1u, 3u}) {
    std::vector<uint64_t> parameter;
    const std::optional<ErrorKind> error = error_of([&] { parameter = layout.parameter_shape(experts, shape); });
    if (error) {
      EXPECT_EQ(*error, ErrorKind::bad_input);
    } else {
      EXPECT_EQ(byte_size(packed_dtype, parameter), experts * slab) << "parameter_shape(" << experts << ")";
    }
  }
}

void expect_refused(const IndexMapLayout& layout, DType dtype, const Shape& shape) {
  SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + shape_string(shape));
  OwnedTensor canonical(dtype, shape);
  std::vector<uint8_t> packed(1 << 16);
  std::string message;
  EXPECT_EQ(error_of([&] { layout.pack(canonical.view(), packed); }, &message), ErrorKind::bad_input);
  EXPECT_NE(message.find(layout.name()), std::string::npos) << message;
  EXPECT_NE(message.find("refused"), std::string::npos) << message;
  EXPECT_EQ(error_of([&] { layout.unpack(packed, canonical); }), ErrorKind::bad_input);
}

class LayoutContract : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    layout_ = make_layout(GetParam());
    map_ = dynamic_cast<const IndexMapLayout*>(layout_.get());
  }
  std::unique_ptr<Layout> layout_;
  const IndexMapLayout* map_ = nullptr;
};

TEST_P(LayoutContract, IsDefinedByAnIndexMap) {
  ASSERT_NE(map_, nullptr) << "every registered layout derives from IndexMap (packers/index_map.h)";
  EXPECT_EQ(map_->name(), GetParam());
}

TEST_P(LayoutContract, AcceptedSizesPackLikeTheMapAndRoundTrip) {
  ASSERT_NE(map_, nullptr);
  const Accepts a = map_->accepts();
  uint64_t seed = 1, accepted = 0;
  for (const Shape& shape : candidate_shapes(a)) {
    if (!declared_to_accept(*map_, a, shape)) continue;
    for (DType dtype : accepted_dtypes(a.dtypes)) expect_accepted(*map_, dtype, shape, seed++);
    ++accepted;
    if (HasFatalFailure()) return;
  }
  EXPECT_GE(accepted, a.ranks == Accepts::rank(0) ? 1u : 3u) << "the declared rules leave too few sizes to test";
}

TEST_P(LayoutContract, RefusedSizesAndDtypesAreCleanBadInput) {
  ASSERT_NE(map_, nullptr);
  const Accepts a = map_->accepts();
  const DType dtype = accepted_dtypes(a.dtypes).front();
  for (const Shape& shape : candidate_shapes(a)) {
    if (declared_to_accept(*map_, a, shape)) continue;
    EXPECT_EQ(error_of([&] { map_->packed_shape(shape); }), ErrorKind::bad_input) << shape_string(shape);
    expect_refused(*map_, dtype, shape);
  }
  // The dtype rule on one accepted, non-empty shape (an FP4 tensor must also end on a byte
  // boundary to exist at all).
  for (const Shape& shape : candidate_shapes(a)) {
    uint64_t elements = 1;
    for (uint64_t d : shape) elements *= d;
    if (!declared_to_accept(*map_, a, shape) || elements == 0) continue;
    for (DType refused : refused_dtypes(a.dtypes))
      if (dtype_bits(refused) % 8 == 0 || elements % 2 == 0) expect_refused(*map_, refused, shape);
    return;
  }
  FAIL() << "no accepted shape to try the dtype rule on";
}

TEST_P(LayoutContract, DeclaredValueLimitIsRefused) {
  ASSERT_NE(map_, nullptr);
  const Accepts a = map_->accepts();
  if (!a.largest_value) return;  // nothing declared, nothing to refuse
  for (const Shape& shape : candidate_shapes(a)) {
    if (!declared_to_accept(*map_, a, shape) || shape.empty()) continue;
    const DType dtype = accepted_dtypes(a.dtypes).front();
    OwnedTensor canonical = canonical_input(a, dtype, shape, 7);
    canonical.bytes.back() = static_cast<uint8_t>(*a.largest_value + 1);
    std::vector<uint8_t> packed(static_cast<size_t>(byte_size(map_->packed_dtype(dtype), map_->packed_shape(shape))));
    std::string message;
    EXPECT_EQ(error_of([&] { map_->pack(canonical.view(), packed); }, &message), ErrorKind::bad_input);
    EXPECT_NE(message.find(a.value_rule), std::string::npos) << message;
    return;
  }
  FAIL() << "no accepted shape to try the value limit on";
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = std::to_string(info.index) + "_";
  for (char ch : info.param) name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Registry, LayoutContract, ::testing::ValuesIn(layout_ids()), test_name);

}  // namespace
}  // namespace moepack::packers
