// See cpu_sgl_mxfp4.h for the drawn layouts and the upstream definitions.
#include "packers/cpu_sgl_mxfp4.h"

namespace moepack::packers {
namespace {

constexpr uint64_t kTileK = 32;  // FP4 elements; Kb must be a multiple of kTileK / 2

}  // namespace

// ---- weight ----

Accepts CpuSglWeightPackedMxfp4Layout::accepts() const {
  Accepts a;
  a.dtypes = Accepts::Dtypes::u8;
  a.rows_multiple = kSglBlockN;
  a.rows_rule = "output rows must be a multiple of 32 (BLOCK_N; a 16-row tail is undefined upstream)";
  a.last_multiple = kTileK / 2;
  a.last_rule = "K = 2*bytes must be a multiple of 32 (TILE_K)";
  return a;
}

// Builds each packed byte whole, as upstream's loop does: byte j of column kb is nibble slot j
// and slot j+32 of the 64 listed for that column; slot s belongs to block row s/2, nibble s%2
// of its byte.
void CpuSglWeightPackedMxfp4Layout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  expect_pack_args(canonical, packed);
  const uint64_t rows = canonical.shape[0], cols = canonical.shape[1];
  auto slot = [&](const uint8_t* block, uint64_t kb, uint64_t s) -> uint8_t {
    const uint8_t byte = block[(s / 2) * cols + kb];
    return (s % 2) ? static_cast<uint8_t>(byte >> 4) : static_cast<uint8_t>(byte & 0xF);
  };
  for (uint64_t nb = 0; nb < rows / kSglBlockN; ++nb) {
    const uint8_t* block = canonical.bytes.data() + nb * kSglBlockN * cols;
    uint8_t* out = packed.data() + nb * kSglBlockN * cols;
    for (uint64_t kb = 0; kb < cols; ++kb)
      for (uint64_t j = 0; j < kSglBlockN; ++j)
        out[kb * kSglBlockN + j] = static_cast<uint8_t>(slot(block, kb, j) | (slot(block, kb, j + kSglBlockN) << 4));
  }
}

// ---- scale ----

Accepts CpuSglScalePackedLayout::accepts() const {
  Accepts a;
  a.rows_multiple = kSglBlockN;
  a.rows_rule = "rows must be a multiple of 32 (BLOCK_N)";
  return a;
}

}  // namespace moepack::packers
