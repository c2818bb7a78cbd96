// See aiter_shuffle_weight.h for the drawn layout and the upstream definition.
#include "packers/aiter_shuffle_weight.h"

#include <cstring>

#include "packers/aiter_common.h"
#include "packers/triton_common.h"

namespace moepack::packers {
namespace {

// The tile: 16 rows (NLane) by 16 bytes (the 16-byte load of one lane).
constexpr uint64_t kTileRows = 16;
constexpr uint64_t kTileBytes = 16;

struct Geometry {
  uint64_t rows = 0;   // N
  uint64_t cols = 0;   // C bytes per row
  uint64_t chunks() const { return cols / kTileBytes; }
  uint64_t blocks() const { return rows / kTileRows; }
};

}  // namespace

std::string AiterShuffleWeightLayout::name() const {
  std::string form;
  switch (variant_) {
    case AiterWeightShuffle::plain: break;
    case AiterWeightShuffle::guinterleave: form = "is_guinterleave=1,gate_up=0,"; break;
    case AiterWeightShuffle::guinterleave_gate_up: form = "is_guinterleave=1,gate_up=1,"; break;
  }
  return "aiter.shuffle_weight(layout=16x16," + form + std::string(aiter_detail::kAiterVersion) + ")";
}

static Geometry geometry(const std::string& layout, AiterWeightShuffle variant, DType dtype,
                         std::span<const uint64_t> shape) {
  const detail::Matrix m = detail::expect_byte_matrix(layout, dtype, shape);
  // torch's view in shuffle_weight fails unless the sizes split exactly: the plain branch
  // asserts rows % 16 and bytes % 32 (two 16-byte runs); the is_guinterleave branch needs
  // bytes % 64 (KLane = 64/16 = 4 runs) and, with gate_up, two halves of whole 16-row blocks.
  const uint64_t row_multiple = variant == AiterWeightShuffle::guinterleave_gate_up ? 2 * kTileRows : kTileRows;
  const uint64_t col_multiple = variant == AiterWeightShuffle::plain ? 2 * kTileBytes : 4 * kTileBytes;
  if (m.rows % row_multiple != 0)
    detail::refuse(layout, shape, "rows must be a multiple of " + std::to_string(row_multiple) +
                                      (variant == AiterWeightShuffle::guinterleave_gate_up
                                           ? " (gate and up halves of whole 16-row blocks)"
                                           : " (16-row tiles)"));
  if (m.cols % col_multiple != 0)
    detail::refuse(layout, shape, "bytes per row must be a multiple of " + std::to_string(col_multiple) +
                                      " (K a multiple of " + std::to_string(2 * col_multiple) + ")");
  return {m.rows, m.cols};
}

std::vector<uint64_t> AiterShuffleWeightLayout::packed_shape(std::span<const uint64_t> canonical_shape) const {
  geometry(name(), variant_, DType::U8, canonical_shape);
  return {canonical_shape.begin(), canonical_shape.end()};
}

uint64_t AiterShuffleWeightLayout::block_row(uint64_t rows, uint64_t block, uint64_t lane) const {
  if (variant_ != AiterWeightShuffle::guinterleave_gate_up) return block * kTileRows + lane;
  // Even blocks come from the gate half, odd ones from the up half, same block index in each.
  const uint64_t half = rows / 2;
  return (block % 2) * half + (block / 2) * kTileRows + lane;
}

uint64_t AiterShuffleWeightLayout::packed_offset(std::span<const uint64_t> canonical_shape, uint64_t n, uint64_t kb) const {
  // The shape is one packed_shape accepts (the map is evaluated per element; no re-validation).
  const uint64_t rows = canonical_shape[0], chunks = canonical_shape[1] / kTileBytes;
  uint64_t block = n / kTileRows;
  if (variant_ == AiterWeightShuffle::guinterleave_gate_up) {
    const uint64_t half = rows / 2;
    block = 2 * ((n % half) / kTileRows) + n / half;
  }
  return ((block * chunks + kb / kTileBytes) * kTileRows + n % kTileRows) * kTileBytes + kb % kTileBytes;
}

void AiterShuffleWeightLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  const Geometry g = geometry(name(), variant_, canonical.dtype, canonical.shape);
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), g.rows * g.cols);
  detail::expect_bytes(name(), "packed", packed.size(), g.rows * g.cols);
  uint8_t* out = packed.data();
  for (uint64_t block = 0; block < g.blocks(); ++block)
    for (uint64_t chunk = 0; chunk < g.chunks(); ++chunk)
      for (uint64_t lane = 0; lane < kTileRows; ++lane, out += kTileBytes)
        std::memcpy(out, canonical.bytes.data() + block_row(g.rows, block, lane) * g.cols + chunk * kTileBytes, kTileBytes);
}

void AiterShuffleWeightLayout::unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const {
  const Geometry g = geometry(name(), variant_, canonical.dtype, canonical.shape);
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), g.rows * g.cols);
  detail::expect_bytes(name(), "packed", packed.size(), g.rows * g.cols);
  const uint8_t* in = packed.data();
  for (uint64_t block = 0; block < g.blocks(); ++block)
    for (uint64_t chunk = 0; chunk < g.chunks(); ++chunk)
      for (uint64_t lane = 0; lane < kTileRows; ++lane, in += kTileBytes)
        std::memcpy(canonical.bytes.data() + block_row(g.rows, block, lane) * g.cols + chunk * kTileBytes, in, kTileBytes);
}

}  // namespace moepack::packers
