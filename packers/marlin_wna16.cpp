// Marlin WNA16 weight, scale and zero-point layouts; the drawn layouts and the upstream
// references are in marlin_wna16.h.
#include "packers/marlin_wna16.h"

namespace moepack::packers {

namespace {

// Field of an AWQ word that holds column c of its group (the inverse of AWQ's pack order).
constexpr std::array<uint64_t, 8> kAwqUndo4 = {0, 4, 1, 5, 2, 6, 3, 7};
constexpr std::array<uint64_t, 4> kAwqUndo8 = {0, 2, 1, 3};
// Nibble / byte of the Marlin word that holds tile value 4h + 2up + d (4-bit) or 2up + d (8-bit).
constexpr std::array<uint64_t, 8> kInv4 = {0, 4, 1, 5, 2, 6, 3, 7};
constexpr std::array<uint64_t, 4> kInv8 = {0, 2, 1, 3};
// marlin_zero_points' column interleave.
constexpr std::array<uint64_t, 8> kZpOrder4 = {0, 2, 4, 6, 1, 3, 5, 7};
constexpr std::array<uint64_t, 4> kZpOrder8 = {0, 2, 1, 3};
constexpr std::array<uint64_t, 8> kSingleOffsets = {0, 1, 8, 9, 16, 17, 24, 25};

// `scale_perm` (64-wide 8x8 transpose) and `scale_perm_single` (32-wide) over flat positions.
uint64_t grouped_perm(uint64_t f) { return (f / 64) * 64 + (f % 64) / 8 + 8 * (f % 8); }
uint64_t single_perm(uint64_t f) { return (f / 32) * 32 + 2 * ((f % 32) / 8) + kSingleOffsets[f % 8]; }

uint64_t awq_field(unsigned bits, uint64_t column) { return bits == 4 ? kAwqUndo4[column % 8] : kAwqUndo8[column % 4]; }

void require_bits(unsigned bits, const std::string& what) {
  if (bits != 4 && bits != 8) throw_internal(what + ": Marlin WNA16 takes 4 or 8 bits, got " + std::to_string(bits));
}

}  // namespace

// ---- weight -------------------------------------------------------------------------------------

std::string MarlinIntWeightLayout::name() const {
  require_bits(bits_, "gptq_marlin_repack");
  return layout_id::marlin_int_repack(source_ == IntSource::gptq ? layout_id::IntPacking::gptq : layout_id::IntPacking::awq, bits_);
}

Accepts MarlinIntWeightLayout::accepts() const {
  Accepts a;
  a.dtypes = Accepts::Dtypes::i32;
  a.what = "one expert's packed int32 weight";
  const uint64_t pf = pack_factor();
  if (source_ == IntSource::gptq) {
    a.what += " [K/" + std::to_string(pf) + ", N] (packed along K)";
    a.rows_multiple = 16 / pf;
    a.rows_rule = "Marlin needs K % 16 == 0 (tile_k_size), i.e. " + std::to_string(16 / pf) + " packed rows";
    a.last_multiple = 64;
    a.last_rule = "Marlin needs N % 64 == 0 (tile_n_size)";
  } else {
    a.what += " [K, N/" + std::to_string(pf) + "] (AWQ, packed along N)";
    a.rows_multiple = 16;
    a.rows_rule = "Marlin needs K % 16 == 0 (tile_k_size)";
    a.last_multiple = 64 / pf;
    a.last_rule = "Marlin needs N % 64 == 0 (tile_n_size), i.e. " + std::to_string(64 / pf) + " packed columns";
  }
  return a;
}

uint64_t MarlinIntWeightLayout::canonical_unit(uint64_t k, uint64_t n, uint64_t size_n) const {
  const uint64_t pf = pack_factor();
  if (source_ == IntSource::gptq) return ((k / pf) * size_n + n) * pf + k % pf;
  return (k * (size_n / pf) + n / pf) * pf + awq_field(bits_, n);
}

uint64_t MarlinIntWeightLayout::packed_unit(uint64_t k, uint64_t n, uint64_t size_n) const {
  const uint64_t kt = k / 16, kk = k % 16, nt = n / 64, nn = n % 64;
  const uint64_t w = nn / 16, h = (nn % 16) / 8, c8 = nn % 8;
  const uint64_t t = 4 * c8 + (kk % 8) / 2, up = kk / 8, d = kk % 2;
  const uint64_t tile_words = 1024 / pack_factor();
  const uint64_t base = (kt * (size_n / 64) + nt) * tile_words;
  if (bits_ == 4) return (base + 4 * t + w) * 8 + kInv4[4 * h + 2 * up + d];
  return (base + 8 * t + 2 * w + h) * 4 + kInv8[2 * up + d];
}

// ---- scales -------------------------------------------------------------------------------------

std::string MarlinIntScaleLayout::name() const {
  return layout_id::marlin_moe_permute_scales(grouped_, dtype_name(params_dtype_));
}

Accepts MarlinIntScaleLayout::accepts() const {
  Accepts a;
  a.dtypes = Accepts::Dtypes::float_bias;
  a.what = "one expert's group scales [G, N]";
  a.last_multiple = grouped_ ? 64 : 32;
  a.last_rule = grouped_ ? "marlin_permute_scales (grouped) needs N % 64 == 0" : "marlin_permute_scales (single) needs N % 32 == 0";
  return a;
}

uint64_t MarlinIntScaleLayout::source(uint64_t f) const { return grouped_ ? grouped_perm(f) : single_perm(f); }

// ---- zero points --------------------------------------------------------------------------------

std::string MarlinIntZeroPointLayout::name() const {
  require_bits(bits_, "marlin_zero_points");
  return layout_id::marlin_zero_points(source_ == IntSource::gptq ? layout_id::IntPacking::gptq : layout_id::IntPacking::awq, bits_);
}

Accepts MarlinIntZeroPointLayout::accepts() const {
  Accepts a;
  a.dtypes = Accepts::Dtypes::i32;
  a.what = "one expert's packed int32 zero points [G, N/" + std::to_string(pack_factor()) + "]";
  a.last_multiple = 64 / pack_factor();
  a.last_rule = "marlin_zero_points needs N % 64 == 0 (" + std::to_string(64 / pack_factor()) + " packed columns)";
  return a;
}

uint64_t MarlinIntZeroPointLayout::source_unit(uint64_t f) const {
  const uint64_t interleaved = bits_ == 4 ? (f / 8) * 8 + kZpOrder4[f % 8] : (f / 4) * 4 + kZpOrder8[f % 4];
  const uint64_t z = grouped_perm(interleaved);  // flat g*N + n of the unpacked zero point
  if (source_ == IntSource::gptq) return z;
  const uint64_t pf = pack_factor();
  return (z / pf) * pf + awq_field(bits_, z % pf);
}

}  // namespace moepack::packers
