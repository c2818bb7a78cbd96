// See aiter_shuffle_scale.h for the drawn layout and the upstream definition.
#include "packers/aiter_shuffle_scale.h"

namespace moepack::packers {
namespace {

constexpr uint64_t kE8m0RowPad = 256;  // e8m0_shuffle's row pad of the flattened [E*N, G]
constexpr uint8_t kE8m0One = 0x7F;     // is_guinterleave fills padded columns with 2^0

}  // namespace

std::string AiterShuffleScaleLayout::name() const {
  switch (variant_) {
    case AiterScaleShuffle::guinterleave: return layout_id::aiter_shuffle_scale(0);
    case AiterScaleShuffle::guinterleave_gate_up: return layout_id::aiter_shuffle_scale(1);
    case AiterScaleShuffle::e8m0_param2d: return layout_id::aiter_e8m0_shuffle(2);
    case AiterScaleShuffle::e8m0_param3d: return layout_id::aiter_e8m0_shuffle(3);
  }
  return "?";
}

Accepts AiterShuffleScaleLayout::accepts() const {
  Accepts a;
  a.rows_multiple = kBlockRows;
  a.rows_rule = "rows must be a multiple of 32 (the shuffle's 32-row blocks, one expert at a time)";
  return a;
}

uint8_t AiterShuffleScaleLayout::pad_byte() const {
  // e8m0_shuffle pads into torch.empty memory; zero is the deterministic stand-in.
  return variant_ == AiterScaleShuffle::guinterleave || variant_ == AiterScaleShuffle::guinterleave_gate_up ? kE8m0One
                                                                                                          : uint8_t{0};
}

std::vector<uint64_t> AiterShuffleScaleLayout::parameter_shape(uint64_t num_experts,
                                                               std::span<const uint64_t> canonical_shape) const {
  const std::vector<uint64_t> slab = packed_shape(canonical_shape);
  const uint64_t all_rows = num_experts * slab[0];
  if (variant_ == AiterScaleShuffle::e8m0_param2d || variant_ == AiterScaleShuffle::e8m0_param3d) {
    if (all_rows % kE8m0RowPad != 0)
      throw Error(ErrorKind::bad_input,
                  name() + ": " + std::to_string(num_experts) + " experts of " + shape_string(canonical_shape) +
                      " refused: e8m0_shuffle pads the flattened " + std::to_string(all_rows) +
                      " scale rows to a multiple of 256 with uninitialised rows that belong to no expert");
    if (variant_ == AiterScaleShuffle::e8m0_param3d) return {num_experts, slab[0], slab[1]};
  }
  return {all_rows, slab[1]};
}

// ---- E8m0ViewLayout ----

Accepts E8m0ViewLayout::accepts() const {
  Accepts a;
  a.ranks = ~Accepts::rank(0);
  a.what = "a tensor, not a scalar";
  a.allows_empty = true;  // a view of an empty tensor is an empty tensor
  return a;
}

}  // namespace moepack::packers
