// Marlin MXFP4 weight, scale and bias layouts; the drawn layouts and the upstream references
// are in marlin_mxfp4.h.
#include "packers/marlin_mxfp4.h"

#include <cstring>

#include "packers/flashinfer_common.h"

namespace moepack::packers {

namespace {

constexpr std::string_view kVllm = fi_detail::kVllmCommit;
constexpr uint64_t kChunk = 1024;  // values per permutation run = one Marlin tile

// `scale_perm_single` of get_scale_perms: within 32 columns, x = 8i + j takes 2i + X[j].
constexpr std::array<uint64_t, 8> kSingleOffsets = {0, 1, 8, 9, 16, 17, 24, 25};
uint64_t single_perm(uint64_t x) { return (x / 32) * 32 + 2 * ((x % 32) / 8) + kSingleOffsets[x % 8]; }
// `scale_perm` (grouped): within 64 columns, x = 8i + j takes i + 8j.
uint64_t grouped_perm(uint64_t x) { return (x / 64) * 64 + (x % 64) / 8 + 8 * (x % 8); }

// The fp8 path's exponent bias between E2M1 (bias 1) and E4M3 (bias 7) dequantisation.
constexpr uint8_t kFp8ExponentBias = 6;
constexpr uint8_t kFp8LargestScale = 255 - kFp8ExponentBias;

}  // namespace

// ---- weight -----------------------------------------------------------------------------------

MarlinMxfp4WeightLayout::MarlinMxfp4WeightLayout(MarlinActivation act) : act_(act) {
  // get_weight_perm(num_bits=4, is_a_8bit): per lane i the tiled offsets of its 32 values
  // (16*row + col + 8*block over the lane's rows, then the next subtiles), then each group of 8
  // reordered by the nibble interleave.
  const bool a8 = act_ == MarlinActivation::fp8;
  std::array<uint16_t, 1024> raw{};
  size_t pos = 0;
  for (uint64_t i = 0; i < 32; ++i) {
    const uint64_t col = i / 4;
    std::array<uint64_t, 16> lane{};
    size_t count = 0;
    for (uint64_t block = 0; block < 2; ++block) {
      if (a8) {
        for (uint64_t rbase : {4 * (i % 4), 4 * (i % 4 + 4)})
          for (uint64_t d = 0; d < 4; ++d) lane[count++] = 16 * (rbase + d) + col + 8 * block;
      } else {
        for (uint64_t row : {2 * (i % 4), 2 * (i % 4) + 1, 2 * (i % 4 + 4), 2 * (i % 4 + 4) + 1})
          lane[count++] = 16 * row + col + 8 * block;
      }
    }
    const uint64_t repeats = a8 ? 2 : 4;
    const uint64_t stride = a8 ? 512 : 256;
    for (uint64_t j = 0; j < repeats; ++j)
      for (size_t v = 0; v < count; ++v) raw[pos++] = static_cast<uint16_t>(lane[v] + stride * j);
  }
  const std::array<uint64_t, 8> interleave =
      a8 ? std::array<uint64_t, 8>{0, 4, 1, 5, 2, 6, 3, 7} : std::array<uint64_t, 8>{0, 2, 4, 6, 1, 3, 5, 7};
  for (uint64_t g = 0; g < kChunk / 8; ++g)
    for (uint64_t v = 0; v < 8; ++v) perm_[8 * g + v] = raw[8 * g + interleave[v]];
}

std::string MarlinMxfp4WeightLayout::name() const {
  return std::string("vllm.gptq_marlin_repack(num_bits=4,fp4_codes,is_a_8bit=") +
         (act_ == MarlinActivation::fp8 ? "1" : "0") + "," + std::string(kVllm) + ")";
}

MarlinMxfp4WeightLayout::Shape MarlinMxfp4WeightLayout::check_shape(DType dtype, std::span<const uint64_t> shape) const {
  const fi_detail::ByteMatrix m = fi_detail::expect_byte_matrix(name(), dtype, shape);
  if (m.rows % 64 != 0) fi_detail::refuse(name(), shape, "Marlin needs N % 64 == 0 (tile_n_size)");
  if ((2 * m.cols) % tile_k() != 0)
    fi_detail::refuse(name(), shape, "Marlin needs K % " + std::to_string(tile_k()) + " == 0 (tile_k_size)");
  return {m.rows, 2 * m.cols};
}

std::vector<uint64_t> MarlinMxfp4WeightLayout::packed_shape(std::span<const uint64_t> canonical_shape) const {
  const Shape s = check_shape(DType::U8, canonical_shape);
  return {s.k / 16, 2 * s.n};
}

MarlinMxfp4WeightLayout::Element MarlinMxfp4WeightLayout::source(uint64_t f, uint64_t n_cols) const {
  // marlin_permute_weights: tiles [tile_k x 16] laid k-tile major, then 16-column subtile, then
  // row, then column; each run of 1024 is gathered through perm_.
  const uint64_t t = (f / kChunk) * kChunk + perm_[f % kChunk];
  const uint64_t nn = t % 16;
  const uint64_t kk = (t / 16) % tile_k();
  const uint64_t rest = t / (16 * tile_k());
  return {(rest / (n_cols / 16)) * tile_k() + kk, (rest % (n_cols / 16)) * 16 + nn};
}

void MarlinMxfp4WeightLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  const Shape s = check_shape(canonical.dtype, canonical.shape);
  fi_detail::expect_buffer(name(), "canonical", canonical.bytes.size(), s.n * s.k / 2);
  fi_detail::expect_buffer(name(), "packed", packed.size(), s.n * s.k / 2);
  // Within a chunk the source offsets (dk, dn) are the same for every chunk; a chunk spans
  // `subtiles` 16-column subtiles of one k-tile.
  std::array<uint16_t, kChunk> dk{}, dn{};
  for (uint64_t p = 0; p < kChunk; ++p) {
    dk[p] = static_cast<uint16_t>((perm_[p] / 16) % tile_k());
    dn[p] = static_cast<uint16_t>((perm_[p] / (16 * tile_k())) * 16 + perm_[p] % 16);
  }
  const uint64_t subtiles = kChunk / (16 * tile_k());
  const uint64_t chunks_per_ktile = s.n / 16 / subtiles;
  const uint64_t chunks = s.n * s.k / kChunk;
  for (uint64_t c = 0; c < chunks; ++c) {
    const uint64_t k0 = (c / chunks_per_ktile) * tile_k();
    const uint64_t n0 = (c % chunks_per_ktile) * subtiles * 16;
    for (uint64_t w = 0; w < kChunk / 8; ++w) {
      uint32_t word = 0;
      for (uint64_t v = 0; v < 8; ++v) {
        const uint64_t p = 8 * w + v;
        word |= static_cast<uint32_t>(get_nibble(canonical.bytes, n0 + dn[p], s.k, k0 + dk[p])) << (4 * v);
      }
      std::memcpy(packed.data() + 4 * (c * (kChunk / 8) + w), &word, 4);
    }
  }
}

void MarlinMxfp4WeightLayout::unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const {
  const Shape s = check_shape(canonical.dtype, canonical.shape);
  fi_detail::expect_buffer(name(), "canonical", canonical.bytes.size(), s.n * s.k / 2);
  fi_detail::expect_buffer(name(), "packed", packed.size(), s.n * s.k / 2);
  for (uint64_t f = 0; f < s.n * s.k; ++f) {
    const Element e = source(f, s.n);
    const uint8_t byte = packed[f / 2];
    set_nibble(canonical.bytes, e.n, s.k, e.k, static_cast<uint8_t>((f % 2) ? byte >> 4 : byte & 0xF));
  }
}

// ---- scales -----------------------------------------------------------------------------------

std::string MarlinMxfp4ScaleLayout::name() const {
  return std::string("vllm.mxfp4_marlin_process_scales(group_size=32,params_dtype=bf16,act=") +
         (act_ == MarlinActivation::fp8 ? "fp8" : "16bit") + "," + std::string(kVllm) + ")";
}

std::vector<uint64_t> MarlinMxfp4ScaleLayout::packed_shape(std::span<const uint64_t> canonical_shape) const {
  const fi_detail::ByteMatrix m = fi_detail::expect_byte_matrix(name(), DType::U8, canonical_shape);
  if (m.rows % 64 != 0) fi_detail::refuse(name(), canonical_shape, "Marlin needs N % 64 == 0");
  return {m.cols, m.rows};
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

void MarlinMxfp4ScaleLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  const std::vector<uint64_t> shape = packed_shape(canonical.shape);
  fi_detail::expect_byte_matrix(name(), canonical.dtype, canonical.shape);
  const uint64_t rows = canonical.shape[0], groups = canonical.shape[1];
  fi_detail::expect_buffer(name(), "canonical", canonical.bytes.size(), rows * groups);
  fi_detail::expect_buffer(name(), "packed", packed.size(), rows * groups);
  std::vector<uint64_t> columns(rows);
  for (uint64_t x = 0; x < rows; ++x) columns[x] = source_column(x, groups);
  for (uint64_t g = 0; g < groups; ++g) {
    for (uint64_t x = 0; x < rows; ++x) {
      const uint8_t code = canonical.bytes[columns[x] * groups + g];
      if (act_ == MarlinActivation::fp8) {
        if (code > kFp8LargestScale)
          fi_detail::refuse(name(), canonical.shape,
                            "E8M0 scale byte " + std::to_string(code) + " at row " + std::to_string(columns[x]) +
                                " group " + std::to_string(g) +
                                " exceeds 249: vLLM's fp8-activation Marlin path asserts max <= 249 before adding 6");
        packed[g * rows + x] = static_cast<uint8_t>(code + kFp8ExponentBias);
      } else {
        packed[g * rows + x] = code;
      }
    }
  }
}

void MarlinMxfp4ScaleLayout::unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const {
  packed_shape(canonical.shape);
  fi_detail::expect_byte_matrix(name(), canonical.dtype, canonical.shape);
  const uint64_t rows = canonical.shape[0], groups = canonical.shape[1];
  fi_detail::expect_buffer(name(), "canonical", canonical.bytes.size(), rows * groups);
  fi_detail::expect_buffer(name(), "packed", packed.size(), rows * groups);
  for (uint64_t g = 0; g < groups; ++g)
    for (uint64_t x = 0; x < rows; ++x) {
      const uint8_t stored = packed[g * rows + x];
      // pack adds 6 on the fp8-activation path, so a stored byte below 6 comes from no scale
      // (a damaged or foreign artifact); subtracting would wrap it to a huge exponent.
      if (act_ == MarlinActivation::fp8 && stored < kFp8ExponentBias)
        fi_detail::refuse(name(), canonical.shape,
                          "packed E8M0 byte " + std::to_string(stored) + " at column " + std::to_string(x) + " group " + std::to_string(g) +
                              " is below 6, which no scale packs to (the fp8-activation path adds 6)");
      canonical.bytes[source_column(x, groups) * groups + g] =
          act_ == MarlinActivation::fp8 ? static_cast<uint8_t>(stored - kFp8ExponentBias) : stored;
    }
}

// ---- bias -------------------------------------------------------------------------------------

std::string MarlinBiasLayout::name() const { return "vllm.marlin_permute_bias(params_dtype=bf16," + std::string(kVllm) + ")"; }

uint64_t MarlinBiasLayout::source_index(uint64_t x) { return single_perm(x); }

std::vector<uint64_t> MarlinBiasLayout::packed_shape(std::span<const uint64_t> canonical_shape) const {
  const uint64_t rows = fi_detail::expect_bias_vector(name(), DType::BF16, canonical_shape);
  if (rows % 32 != 0) fi_detail::refuse(name(), canonical_shape, "marlin_permute_bias needs N % 32 == 0");
  return {rows};
}

void MarlinBiasLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  const uint64_t rows = packed_shape(canonical.shape)[0];
  fi_detail::expect_bias_vector(name(), canonical.dtype, canonical.shape);
  fi_detail::expect_buffer(name(), "canonical", canonical.bytes.size(), byte_size(canonical.dtype, canonical.shape));
  fi_detail::expect_buffer(name(), "packed", packed.size(), 2 * rows);
  for (uint64_t x = 0; x < rows; ++x)
    fi_detail::cast_element(canonical.dtype, canonical.bytes, source_index(x), DType::BF16, packed, x);
}

void MarlinBiasLayout::unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const {
  const uint64_t rows = packed_shape(canonical.shape)[0];
  fi_detail::expect_bias_vector(name(), canonical.dtype, canonical.shape);
  fi_detail::expect_buffer(name(), "canonical", canonical.bytes.size(), byte_size(canonical.dtype, canonical.shape));
  fi_detail::expect_buffer(name(), "packed", packed.size(), 2 * rows);
  // Exact only for a BF16 canonical bias; wider biases were rounded by the cast.
  for (uint64_t x = 0; x < rows; ++x)
    fi_detail::cast_element(DType::BF16, packed, x, canonical.dtype, canonical.bytes, source_index(x));
}

}  // namespace moepack::packers
