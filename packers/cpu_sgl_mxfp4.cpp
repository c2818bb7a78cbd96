// See cpu_sgl_mxfp4.h for the drawn layouts and the upstream definitions.
#include "packers/cpu_sgl_mxfp4.h"

#include <algorithm>
#include <cstring>

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
// of its byte. So bytes 2r and 2r+1 of column kb come from rows r and r+16 of the block only:
//   out[kb*32 + 2r]     = lo(row r)[kb] | lo(row r+16)[kb] << 4
//   out[kb*32 + 2r + 1] = hi(row r)[kb] | hi(row r+16)[kb] << 4
// i.e. one 16-bit word per (r, kb), and the column is the transpose of those words. The bulk
// path makes the words of a tile of columns row by row (vectorizable), then transposes the
// tile in L1.
void CpuSglWeightPackedMxfp4Layout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  expect_pack_args(canonical, packed);
  const uint64_t rows = canonical.shape[0], cols = canonical.shape[1];
  constexpr uint64_t kHalf = kSglBlockN / 2;  // 16 row pairs
  constexpr uint64_t kTile = 64;              // columns per tile: 16 x 64 words = 2 KiB
  uint16_t words[kHalf][kTile];
  for (uint64_t nb = 0; nb < rows / kSglBlockN; ++nb) {
    const uint8_t* block = canonical.bytes.data() + nb * kSglBlockN * cols;
    uint8_t* out = packed.data() + nb * kSglBlockN * cols;
    for (uint64_t k0 = 0; k0 < cols; k0 += kTile) {
      const uint64_t width = std::min(kTile, cols - k0);
      for (uint64_t r = 0; r < kHalf; ++r) {
        const uint8_t* a = block + r * cols + k0;
        const uint8_t* b = block + (r + kHalf) * cols + k0;
        for (uint64_t i = 0; i < width; ++i) {
          const unsigned lo = (a[i] & 0x0Fu) | ((b[i] & 0x0Fu) << 4);
          const unsigned hi = (a[i] >> 4) | (b[i] & 0xF0u);
          words[r][i] = static_cast<uint16_t>(lo | (hi << 8));  // little-endian: lo is byte 2r
        }
      }
      for (uint64_t i = 0; i < width; ++i) {
        uint16_t column[kHalf];
        for (uint64_t r = 0; r < kHalf; ++r) column[r] = words[r][i];
        std::memcpy(out + (k0 + i) * kSglBlockN, column, sizeof column);
      }
    }
  }
}

// The inverse, tile by tile: a tile of packed columns is read column by column into words
// (L1), then each word's two bytes give back rows r and r+16 at that column:
//   row r    = lo & 0x0F | (hi & 0x0F) << 4        row r+16 = lo >> 4 | hi & 0xF0
void CpuSglWeightPackedMxfp4Layout::unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const {
  expect_unpack_args(packed, canonical);
  const uint64_t rows = canonical.shape[0], cols = canonical.shape[1];
  constexpr uint64_t kHalf = kSglBlockN / 2;
  constexpr uint64_t kTile = 64;
  uint16_t words[kTile][kHalf];
  for (uint64_t nb = 0; nb < rows / kSglBlockN; ++nb) {
    uint8_t* block = canonical.bytes.data() + nb * kSglBlockN * cols;
    const uint8_t* in = packed.data() + nb * kSglBlockN * cols;
    for (uint64_t k0 = 0; k0 < cols; k0 += kTile) {
      const uint64_t width = std::min(kTile, cols - k0);
      std::memcpy(words, in + k0 * kSglBlockN, static_cast<size_t>(width * kSglBlockN));
      for (uint64_t r = 0; r < kHalf; ++r) {
        uint8_t* a = block + r * cols + k0;
        uint8_t* b = block + (r + kHalf) * cols + k0;
        for (uint64_t i = 0; i < width; ++i) {
          const unsigned lo = words[i][r] & 0xFFu, hi = words[i][r] >> 8;
          a[i] = static_cast<uint8_t>((lo & 0x0Fu) | ((hi & 0x0Fu) << 4));
          b[i] = static_cast<uint8_t>((lo >> 4) | (hi & 0xF0u));
        }
      }
    }
  }
}

// ---- scale ----

Accepts CpuSglScalePackedLayout::accepts() const {
  Accepts a;
  a.rows_multiple = kSglBlockN;
  a.rows_rule = "rows must be a multiple of 32 (BLOCK_N)";
  return a;
}

Accepts CpuSglWeightPackedFp8Layout::accepts() const {
  Accepts a;
  a.dtypes = Accepts::Dtypes::one_byte;
  a.what = "one expert's 2-D F8_E4M3 weight [OC, K]";
  a.rows_multiple = kSglBlockN / 2;
  a.rows_rule = "output rows must be a multiple of 16 (TILE_N)";
  a.last_multiple = kTileK;
  a.last_rule = "K must be a multiple of 32 (TILE_K)";
  return a;
}

void CpuSglWeightPackedFp8Layout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  expect_pack_args(canonical, packed);
  const uint64_t rows = canonical.shape[0], k = canonical.shape[1];
  const uint8_t* w = canonical.bytes.data();
  for (uint64_t n0 = 0; n0 < rows; n0 += kSglBlockN) {
    const uint64_t n_size = std::min(kSglBlockN, rows - n0);
    uint8_t* out = packed.data() + n0 * k;
    for (uint64_t n = 0; n < n_size; ++n) {
      const uint8_t* src = w + (n0 + n) * k;
      for (uint64_t kk = 0; kk < k / 2; ++kk) std::memcpy(out + kk * 2 * n_size + 2 * n, src + 2 * kk, 2);
    }
  }
}

Accepts CpuSglVnni4Int8Layout::accepts() const {
  Accepts a;
  a.dtypes = Accepts::Dtypes::one_byte;
  a.what = "one expert's 2-D I8 weight [OC, K]";
  a.rows_multiple = kSglBlockN;
  a.rows_rule = "pack_vnni<int8_t> checks N == BLOCK_N: output rows must be a multiple of 32";
  a.last_multiple = kTileK;
  a.last_rule = "K must be a multiple of 32 (TILE_K)";
  return a;
}

}  // namespace moepack::packers
