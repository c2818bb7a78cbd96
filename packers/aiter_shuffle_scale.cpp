// See aiter_shuffle_scale.h for the drawn layout and the upstream definition.
#include "packers/aiter_shuffle_scale.h"

#include <algorithm>
#include <cstring>

#include "packers/aiter_common.h"
#include "packers/triton_common.h"

namespace moepack::packers {
namespace {

constexpr uint64_t kBlockRows = 32;      // N_Pack * N_Lane
constexpr uint64_t kLanes = 16;          // N_Lane
constexpr uint64_t kGroupPad = 8;        // K_Pack * K_Lane: scale columns per 256-byte tile
constexpr uint64_t kE8m0RowPad = 256;    // e8m0_shuffle's row pad of the flattened [E*N, G]
constexpr uint8_t kE8m0One = 0x7F;       // is_guinterleave fills padded columns with 2^0

struct Geometry {
  uint64_t rows = 0;           // N
  uint64_t groups = 0;         // G
  uint64_t padded_groups = 0;  // G8
};

}  // namespace

std::string AiterShuffleScaleLayout::name() const {
  const std::string version(aiter_detail::kAiterVersion);
  switch (variant_) {
    case AiterScaleShuffle::guinterleave: return "aiter.shuffle_scale(is_guinterleave=1,gate_up=0," + version + ")";
    case AiterScaleShuffle::guinterleave_gate_up: return "aiter.shuffle_scale(is_guinterleave=1,gate_up=1," + version + ")";
    case AiterScaleShuffle::e8m0_param2d: return "aiter.e8m0_shuffle(param=2d," + version + ")";
    case AiterScaleShuffle::e8m0_param3d: return "aiter.e8m0_shuffle(param=3d," + version + ")";
  }
  return "?";
}

uint8_t AiterShuffleScaleLayout::pad_byte() const {
  // e8m0_shuffle pads into torch.empty memory; zero is the deterministic stand-in.
  return variant_ == AiterScaleShuffle::guinterleave || variant_ == AiterScaleShuffle::guinterleave_gate_up ? kE8m0One
                                                                                                          : uint8_t{0};
}

static Geometry geometry(const std::string& layout, DType dtype, std::span<const uint64_t> shape) {
  const detail::Matrix m = detail::expect_byte_matrix(layout, dtype, shape);
  if (m.rows % kBlockRows != 0)
    detail::refuse(layout, shape, "rows must be a multiple of 32 (the shuffle's 32-row blocks, one expert at a time)");
  return {m.rows, m.cols, detail::round_up(m.cols, kGroupPad)};
}

std::vector<uint64_t> AiterShuffleScaleLayout::packed_shape(std::span<const uint64_t> canonical_shape) const {
  const Geometry g = geometry(name(), DType::U8, canonical_shape);
  return {g.rows, g.padded_groups};
}

std::vector<uint64_t> AiterShuffleScaleLayout::parameter_shape(uint64_t num_experts,
                                                               std::span<const uint64_t> canonical_shape) const {
  const Geometry g = geometry(name(), DType::U8, canonical_shape);
  const uint64_t all_rows = num_experts * g.rows;
  if (variant_ == AiterScaleShuffle::e8m0_param2d || variant_ == AiterScaleShuffle::e8m0_param3d) {
    if (all_rows % kE8m0RowPad != 0)
      throw Error(ErrorKind::bad_input,
                  name() + ": " + std::to_string(num_experts) + " experts of " + shape_string(canonical_shape) +
                      " refused: e8m0_shuffle pads the flattened " + std::to_string(all_rows) +
                      " scale rows to a multiple of 256 with uninitialised rows that belong to no expert");
    if (variant_ == AiterScaleShuffle::e8m0_param3d) return {num_experts, g.rows, g.padded_groups};
  }
  return {all_rows, g.padded_groups};
}

namespace {

// Visits the packed storage of one expert in order: fn(out_offset, n, g) for every byte,
// padded columns included (g >= G there).
template <class Fn>
void for_each_byte(const Geometry& geo, bool gate_up, Fn&& fn) {
  const uint64_t half = geo.rows / 2;
  uint64_t out = 0;
  for (uint64_t n1 = 0; n1 < geo.rows / kBlockRows; ++n1)
    for (uint64_t k1 = 0; k1 < geo.padded_groups / kGroupPad; ++k1)
      for (uint64_t kl = 0; kl < 4; ++kl)
        for (uint64_t nl = 0; nl < kLanes; ++nl)
          for (uint64_t kp = 0; kp < 2; ++kp)
            for (uint64_t np = 0; np < 2; ++np, ++out) {
              const uint64_t n = gate_up ? np * half + n1 * kLanes + nl : n1 * kBlockRows + np * kLanes + nl;
              fn(out, n, k1 * kGroupPad + kp * 4 + kl);
            }
}

}  // namespace

uint64_t AiterShuffleScaleLayout::packed_offset(std::span<const uint64_t> canonical_shape, uint64_t n, uint64_t g) const {
  // The shape is one packed_shape accepts (the map is evaluated per element; no re-validation).
  const uint64_t rows = canonical_shape[0], padded_groups = detail::round_up(canonical_shape[1], kGroupPad);
  uint64_t n1, nl, np;
  if (gate_up()) {
    const uint64_t half = rows / 2;
    np = n / half, n1 = (n % half) / kLanes, nl = n % kLanes;
  } else {
    n1 = n / kBlockRows, np = (n / kLanes) % 2, nl = n % kLanes;
  }
  const uint64_t k1 = g / kGroupPad, kp = (g / 4) % 2, kl = g % 4;
  return n1 * kBlockRows * padded_groups + k1 * 256 + kl * 64 + nl * 4 + kp * 2 + np;
}

void AiterShuffleScaleLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  const Geometry geo = geometry(name(), canonical.dtype, canonical.shape);
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), geo.rows * geo.groups);
  detail::expect_bytes(name(), "packed", packed.size(), geo.rows * geo.padded_groups);
  const uint8_t pad = pad_byte();
  const uint8_t* s = canonical.bytes.data();
  for_each_byte(geo, gate_up(), [&](uint64_t out, uint64_t n, uint64_t g) {
    packed[out] = g < geo.groups ? s[n * geo.groups + g] : pad;
  });
}

void AiterShuffleScaleLayout::unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const {
  const Geometry geo = geometry(name(), canonical.dtype, canonical.shape);
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), geo.rows * geo.groups);
  detail::expect_bytes(name(), "packed", packed.size(), geo.rows * geo.padded_groups);
  uint8_t* s = canonical.bytes.data();
  for_each_byte(geo, gate_up(), [&](uint64_t out, uint64_t n, uint64_t g) {
    if (g < geo.groups) s[n * geo.groups + g] = packed[out];
  });
}

// ---- E8m0ViewLayout ----

std::vector<uint64_t> E8m0ViewLayout::packed_shape(std::span<const uint64_t> canonical_shape) const {
  if (canonical_shape.empty()) detail::refuse(name(), canonical_shape, "expects a tensor, got a scalar shape");
  return {canonical_shape.begin(), canonical_shape.end()};
}

void E8m0ViewLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  if (dtype_bits(canonical.dtype) != 8)
    detail::refuse(name(), canonical.shape, "a view as float8_e8m0fnu needs a one-byte dtype, got " +
                                                std::string(dtype_name(canonical.dtype)));
  packed_shape(canonical.shape);
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), byte_size(canonical.dtype, canonical.shape));
  detail::expect_bytes(name(), "packed", packed.size(), canonical.bytes.size());
  // std::copy, not memcpy: an empty tensor has null data pointers, which memcpy may not take.
  std::copy(canonical.bytes.begin(), canonical.bytes.end(), packed.begin());
}

void E8m0ViewLayout::unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const {
  if (dtype_bits(canonical.dtype) != 8)
    detail::refuse(name(), canonical.shape, "a view as float8_e8m0fnu needs a one-byte dtype, got " +
                                                std::string(dtype_name(canonical.dtype)));
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), byte_size(canonical.dtype, canonical.shape));
  detail::expect_bytes(name(), "packed", packed.size(), canonical.bytes.size());
  std::copy(packed.begin(), packed.end(), canonical.bytes.begin());
}

}  // namespace moepack::packers
