// Marlin MXFP4 weight, scale and bias layouts; the drawn layouts and the upstream references
// are in marlin_mxfp4.h.
#include "packers/marlin_mxfp4.h"

#include <vector>

namespace moepack::packers {

namespace {

// `scale_perm_single` of get_scale_perms: within 32 columns, x = 8i + j takes 2i + X[j].
constexpr std::array<uint64_t, 8> kSingleOffsets = {0, 1, 8, 9, 16, 17, 24, 25};
uint64_t single_perm(uint64_t x) { return (x / 32) * 32 + 2 * ((x % 32) / 8) + kSingleOffsets[x % 8]; }
// `scale_perm` (grouped): within 64 columns, x = 8i + j takes i + 8j.
uint64_t grouped_perm(uint64_t x) { return (x / 64) * 64 + (x % 64) / 8 + 8 * (x % 8); }

// The fp8 path's exponent bias between E2M1 (bias 1) and E4M3 (bias 7) dequantisation.
constexpr uint8_t kFp8ExponentBias = 6;
constexpr uint8_t kFp8LargestScale = 255 - kFp8ExponentBias;

const std::string kMarlinRowsRule = "Marlin needs N % 64 == 0 (tile_n_size)";

// One lane's tiled offsets in get_weight_perm (num_bits 4): 16*row + col + 8*block over the
// lane's rows (4 of them, or 8 with FP8 activations), for both 8-column blocks.
std::vector<uint64_t> lane_offsets(uint64_t lane, bool a8) {
  const uint64_t col = lane / 4;
  std::vector<uint64_t> offsets;
  for (uint64_t block = 0; block < 2; ++block) {
    if (a8) {
      for (uint64_t rbase : {4 * (lane % 4), 4 * (lane % 4 + 4)})
        for (uint64_t d = 0; d < 4; ++d) offsets.push_back(16 * (rbase + d) + col + 8 * block);
    } else {
      for (uint64_t row : {2 * (lane % 4), 2 * (lane % 4) + 1, 2 * (lane % 4 + 4), 2 * (lane % 4 + 4) + 1})
        offsets.push_back(16 * row + col + 8 * block);
    }
  }
  return offsets;
}

}  // namespace

// ---- weight -----------------------------------------------------------------------------------

MarlinMxfp4WeightLayout::MarlinMxfp4WeightLayout(MarlinActivation act) : act_(act) {
  // get_weight_perm(num_bits=4, is_a_8bit): per lane the tiled offsets of its values, repeated
  // over the next subtiles, then each group of 8 reordered by the nibble interleave.
  const bool a8 = act_ == MarlinActivation::fp8;
  const uint64_t repeats = a8 ? 2 : 4, stride = a8 ? 512 : 256;
  std::array<uint16_t, kChunk> raw{};
  size_t pos = 0;
  for (uint64_t lane = 0; lane < 32; ++lane) {
    const std::vector<uint64_t> offsets = lane_offsets(lane, a8);
    for (uint64_t j = 0; j < repeats; ++j)
      for (uint64_t offset : offsets) raw[pos++] = static_cast<uint16_t>(offset + stride * j);
  }
  const std::array<uint64_t, 8> interleave =
      a8 ? std::array<uint64_t, 8>{0, 4, 1, 5, 2, 6, 3, 7} : std::array<uint64_t, 8>{0, 2, 4, 6, 1, 3, 5, 7};
  for (uint64_t g = 0; g < kChunk / 8; ++g)
    for (uint64_t v = 0; v < 8; ++v) perm_[8 * g + v] = raw[8 * g + interleave[v]];
}

std::string MarlinMxfp4WeightLayout::name() const {
  return layout_id::marlin_fp4_repack(act_ == MarlinActivation::fp8);
}

Accepts MarlinMxfp4WeightLayout::accepts() const {
  Accepts a;
  a.rows_multiple = 64;
  a.rows_rule = kMarlinRowsRule;
  a.last_multiple = tile_k() / 2;  // bytes of FP4 pairs
  a.last_rule = "Marlin needs K % " + std::to_string(tile_k()) + " == 0 (tile_k_size)";
  return a;
}

// Builds each packed word whole. Within a chunk the source offsets (dk, dn) are the same for
// every chunk; a chunk spans `subtiles` 16-column subtiles of one k-tile.
void MarlinMxfp4WeightLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  expect_pack_args(canonical, packed);
  const uint64_t n_cols = canonical.shape[0], k_elems = 2 * canonical.shape[1];
  std::array<uint16_t, kChunk> dk{}, dn{};
  for (uint64_t p = 0; p < kChunk; ++p) {
    dk[p] = static_cast<uint16_t>((perm_[p] / 16) % tile_k());
    dn[p] = static_cast<uint16_t>((perm_[p] / (16 * tile_k())) * 16 + perm_[p] % 16);
  }
  const uint64_t subtiles = kChunk / (16 * tile_k());
  const uint64_t chunks_per_ktile = n_cols / 16 / subtiles;
  for (uint64_t c = 0; c < n_cols * k_elems / kChunk; ++c) {
    const uint64_t k0 = (c / chunks_per_ktile) * tile_k(), n0 = (c % chunks_per_ktile) * subtiles * 16;
    for (uint64_t w = 0; w < kChunk / 8; ++w) {
      uint32_t word = 0;
      for (uint64_t v = 0; v < 8; ++v)
        word |= static_cast<uint32_t>(get_nibble(canonical.bytes, n0 + dn[8 * w + v], k_elems, k0 + dk[8 * w + v])) << (4 * v);
      std::memcpy(packed.data() + 4 * (c * (kChunk / 8) + w), &word, 4);
    }
  }
}

// ---- scales -----------------------------------------------------------------------------------

std::string MarlinMxfp4ScaleLayout::name() const {
  return layout_id::mxfp4_marlin_process_scales(act_ == MarlinActivation::fp8);
}

Accepts MarlinMxfp4ScaleLayout::accepts() const {
  Accepts a;
  a.rows_multiple = 64;
  a.rows_rule = kMarlinRowsRule;
  if (act_ == MarlinActivation::fp8) {
    a.largest_value = kFp8LargestScale;
    a.value_rule = "E8M0 scale bytes above 249 are refused: vLLM's fp8-activation Marlin path asserts max <= 249 before adding 6";
  }
  return a;
}

uint64_t MarlinMxfp4ScaleLayout::source_column(uint64_t x, uint64_t groups) const {
  if (act_ == MarlinActivation::fp8) return single_perm(x);
  // mxfp4_marlin_process_scales (16-bit activations): columns regrouped [0,2,1,3] in fours,
  // applied after marlin_permute_scales, so it composes on the inside.
  constexpr std::array<uint64_t, 4> kDequantPairOrder = {0, 2, 1, 3};
  const uint64_t y = (x / 4) * 4 + kDequantPairOrder[x % 4];
  // group_size 32 < size_k = 32*groups exactly when there is more than one group.
  return groups > 1 ? grouped_perm(y) : single_perm(y);
}

uint64_t MarlinMxfp4ScaleLayout::encode_unit(DType, uint64_t value, uint64_t) const { return value + kFp8ExponentBias; }

uint64_t MarlinMxfp4ScaleLayout::decode_unit(DType canonical, uint64_t value, uint64_t canonical_unit) const {
  // pack adds 6 on the fp8-activation path, so a stored byte below 6 comes from no scale
  // (a damaged or foreign artifact); subtracting would wrap it to a huge exponent.
  if (value < kFp8ExponentBias)
    throw Error(ErrorKind::bad_input, name() + ": packed E8M0 byte " + std::to_string(value) + " for canonical scale " +
                                          std::to_string(canonical_unit) + " (" + std::string(dtype_name(canonical)) +
                                          ") is below 6, which no scale packs to (the fp8-activation path adds 6)");
  return value - kFp8ExponentBias;
}

// ---- bias -------------------------------------------------------------------------------------

std::string MarlinBiasLayout::name() const { return layout_id::marlin_permute_bias(); }

Accepts MarlinBiasLayout::accepts() const {
  Accepts a;
  a.dtypes = Accepts::Dtypes::float_bias;
  a.ranks = Accepts::rank(1);
  a.what = "one expert's 1-D bias [rows]";
  a.rows_multiple = 32;
  a.rows_rule = "marlin_permute_bias needs N % 32 == 0";
  return a;
}

uint64_t MarlinBiasLayout::source_index(uint64_t x) { return single_perm(x); }

}  // namespace moepack::packers
