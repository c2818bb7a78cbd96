// See aiter_shuffle_weight.h for the drawn layout and the upstream definition.
#include "packers/aiter_shuffle_weight.h"

namespace moepack::packers {

std::string AiterShuffleWeightLayout::name() const {
  switch (variant_) {
    case AiterWeightShuffle::plain: return layout_id::aiter_shuffle_weight();
    case AiterWeightShuffle::guinterleave: return layout_id::aiter_shuffle_weight_guinterleave(0);
    case AiterWeightShuffle::guinterleave_gate_up: return layout_id::aiter_shuffle_weight_guinterleave(1);
  }
  return "?";
}

// torch's view in shuffle_weight fails unless the sizes split exactly: the plain branch
// asserts rows % 16 and bytes % 32 (two 16-byte runs); the is_guinterleave branch needs
// bytes % 64 (KLane = 64/16 = 4 runs) and, with gate_up, two halves of whole 16-row blocks.
Accepts AiterShuffleWeightLayout::accepts() const {
  const bool gate_up = variant_ == AiterWeightShuffle::guinterleave_gate_up;
  Accepts a;
  // The plain form takes the FP8 and 16-bit weights of the other AITER backends too.
  if (variant_ == AiterWeightShuffle::plain) a.dtypes = Accepts::Dtypes::whole_byte;
  a.rows_multiple = gate_up ? 2 * kTileRows : kTileRows;
  a.rows_rule = "rows must be a multiple of " + std::to_string(a.rows_multiple) +
                (gate_up ? " (gate and up halves of whole 16-row blocks)" : " (16-row tiles)");
  a.last_multiple = variant_ == AiterWeightShuffle::plain ? 2 * kTileBytes : 4 * kTileBytes;
  a.last_rule = variant_ == AiterWeightShuffle::plain
                    ? "elements per row must be a multiple of 32 (bytes of packed FP4, or K of FP8 and 16-bit weights)"
                    : "bytes per row must be a multiple of " + std::to_string(a.last_multiple) + " (K a multiple of " + std::to_string(2 * a.last_multiple) + ")";
  return a;
}

Units AiterShuffleWeightLayout::units(DType canonical) const {
  const unsigned bits = static_cast<unsigned>(dtype_bits(canonical));
  return {.canonical_bits = bits, .packed_bits = bits};
}

// Stores the 16-row blocks in packed order, 16-byte run by run. Even packed blocks of the
// gate_up form come from the gate half, odd ones from the up half, same block index in each.
void AiterShuffleWeightLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  expect_pack_args(canonical, packed);
  // In bytes every element width gives the same 16-row x 16-byte tiles.
  const uint64_t rows = canonical.shape[0], cols = canonical.shape[1] * static_cast<uint64_t>(dtype_bits(canonical.dtype)) / 8;
  auto block_row = [&](uint64_t block, uint64_t lane) {
    if (variant_ != AiterWeightShuffle::guinterleave_gate_up) return block * kTileRows + lane;
    return (block % 2) * (rows / 2) + (block / 2) * kTileRows + lane;
  };
  uint8_t* out = packed.data();
  for (uint64_t block = 0; block < rows / kTileRows; ++block)
    for (uint64_t chunk = 0; chunk < cols / kTileBytes; ++chunk)
      for (uint64_t lane = 0; lane < kTileRows; ++lane, out += kTileBytes)
        std::memcpy(out, canonical.bytes.data() + block_row(block, lane) * cols + chunk * kTileBytes, kTileBytes);
}

}  // namespace moepack::packers
