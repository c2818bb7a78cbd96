// Marlin MXFP4 MoE layouts (vLLM backends MARLIN / BATCHED_MARLIN for MXFP4, and the Marlin
// fallback of compressed-tensors / AutoRound MXFP4): the 4-bit Marlin repack of the FP4 codes,
// the E8M0 scale permutation and processing, and the bias permutation.
//
// Upstream definitions followed (vllm-project/vllm @ e9d1398d9):
//   vllm/model_executor/layers/quantization/utils/marlin_utils_fp4.py
//     `prepare_moe_mxfp4_layer_for_marlin` (and `prepare_moe_fp4_layer_for_marlin`, same bytes):
//     per expert `weight[i].view(int32).T` -> `gptq_marlin_repack(num_bits=4, empty perm,
//     is_a_8bit)`; scales `.view(e8m0).to(params_dtype)`, `.T`, `marlin_permute_scales(group 32)`,
//     `mxfp4_marlin_process_scales`; bias `.to(params_dtype)`, `marlin_permute_bias`
//   vllm/model_executor/layers/quantization/utils/marlin_utils.py `get_scale_perms`,
//     `marlin_permute_scales`, `marlin_permute_bias`, `get_marlin_input_dtype`
//   vllm/model_executor/layers/quantization/utils/marlin_utils_test.py `get_weight_perm`,
//     `marlin_permute_weights`, `marlin_weights` (the Python twin of csrc gptq_marlin_repack.cu)
//   ERRATA 4: no row padding inside the Marlin preparation (I arrives rounded to 128, H to 256).
//
// ---- weight (4-bit repack) ------------------------------------------------------------------
// q[k][n] = FP4 code of canonical (row n, element k). The view as int32 and transpose give the
// GPTQ matrix [K/8][N] whose word (r, n) holds q[8r..8r+7][n] (low nibble first), i.e. FP4 codes
// are repacked as if they were uint4 GPTQ weights; the codes themselves are never changed.
// 16-bit activations: 16x64 tiles. Tile (kt, nt) = 128 words at (kt*(N/64) + nt)*128; lane t
// (0..31) and warp w (0..3) own word 4t + w, whose 8 nibbles are, with r = 2*(t%4),
// c = 64nt + 16w + t/4:
//     nibble : 0        1        2          3          4        5        6          7
//     q      : [r][c]   [r+8][c] [r][c+8]   [r+8][c+8] [r+1][c] [r+9][c] [r+1][c+8] [r+9][c+8]
//   (k offsets within the tile). Worked example (layouts-marlin 2.2, K=16, N=64,
//   q[k][n] = (k+n)%16): word 0 = 0x19910880, word 4 = 0x3bb32aa2, word 16 = 0x2aa21991.
// FP8 activations (is_a_8bit, VLLM_MARLIN_INPUT_DTYPE=fp8 on SM89/SM12x): 32(k) x 32(n) tiles,
// tile (kt, nt) = 128 words at (kt*(N/32) + nt)*128; word 4t + w holds, with r = 4*(t%4), n = 32nt + 16*(w/2) + t/4 + 8*(w%2),
//   nibbles 0..7 = q[r][n] q[r+16][n] q[r+1][n] q[r+17][n] q[r+2][n] q[r+18][n] q[r+3][n] q[r+19][n].
// Canonical: U8 [N, K/2]; packed: I32 [K/16, 2N] (tile-major words). Needs N % 64 == 0 and
// K % 16 == 0 (K % 32 == 0 for FP8 activations).
//
// ---- scales ---------------------------------------------------------------------------------
// S = canonical E8M0 bytes [N][G] (G = K/32). T = S transposed, [G][N]. Then per row g:
//   grouped (G > 1, 16-bit act.): P[g][64b + 8i + j] = T[g][64b + i + 8j]     (8x8 transpose)
//   single  (G == 1 or FP8 act.): P[g][32b + 8i + x] = T[g][32b + 2i + X[x]], X = 0 1 8 9 16 17 24 25
//   16-bit act.: Q[g][4a + u] = P[g][4a + U[u]], U = 0 2 1 3;   FP8 act.: Q = P + 6 (every byte;
//   vLLM asserts the largest byte is <= 249, refused here the same way)
//   e.g. 16-bit, grouped: Q[g][0..7] = T[g][0] T[g][16] T[g][8] T[g][24] T[g][32] T[g][48] T[g][40] T[g][56]
// params_dtype must be bf16: the bf16 round trip keeps all 256 E8M0 codes (an fp16 model would
// flush codes < 103 to 0 and turn codes > 142 into NaN; not reproduced, the layout name says bf16).
// Canonical: U8 [N, G]; packed: F8_E8M0 [G, N]; N % 64 == 0.
//
// ---- bias -----------------------------------------------------------------------------------
// out[32b + 8i + x] = in[32b + 2i + X[x]] (the "single" map), cast to bf16.
// Canonical: BF16/F16/F32 [N]; packed: BF16 [N]; N % 32 == 0.
//
// Canonical w13 tensors are in vLLM's parameter order ([w1; w3], or gpt-oss' interleaved rows:
// Marlin keeps whatever order the loader produced), one expert, sizes padded by vLLM.
#pragma once

#include <array>

#include "packers/index_map.h"

namespace moepack::packers {

enum class MarlinActivation { bits16, fp8 };

class MarlinMxfp4WeightLayout final : public IndexMap<MarlinMxfp4WeightLayout> {
 public:
  static constexpr uint64_t kChunk = 1024;  // values per permutation run = one Marlin tile

  explicit MarlinMxfp4WeightLayout(MarlinActivation act);
  std::string name() const override;
  DType packed_dtype(DType) const override { return DType::I32; }
  Accepts accepts() const override;
  Units units(DType) const override { return {.canonical_bits = 4, .packed_bits = 4}; }
  void pack(const TensorView& canonical, std::span<uint8_t> packed) const override;  // bulk: whole words

  // Index map, as the reference builds it: packed value f (word f/8, nibble f%8) takes
  // q[k][n] = `source(f, N)`.
  struct Element {
    uint64_t k, n;
  };
  Element source(uint64_t f, uint64_t n_cols) const {
    // marlin_permute_weights: tiles [tile_k x 16] laid k-tile major, then 16-column subtile, then
    // row, then column; each run of 1024 is gathered through perm_.
    const uint64_t t = (f / kChunk) * kChunk + perm_[f % kChunk];
    const uint64_t nn = t % 16, kk = (t / 16) % tile_k(), rest = t / (16 * tile_k());
    return {(rest / (n_cols / 16)) * tile_k() + kk, (rest % (n_cols / 16)) * 16 + nn};
  }

  // Units are FP4 codes: canonical (n, k) is unit n*K + k, packed value f is unit f.
  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t n_cols = shape[0], k_elems = 2 * shape[1];
    for (uint64_t f = 0; f < n_cols * k_elems; ++f) {
      const Element e = source(f, n_cols);
      fn(e.n * k_elems + e.k, f);
    }
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override {
    return {2 * shape[1] / 16, 2 * shape[0]};
  }

 private:
  uint64_t tile_k() const { return act_ == MarlinActivation::fp8 ? 32 : 16; }

  MarlinActivation act_;
  // get_weight_perm(4, is_a_8bit) with its nibble interleave applied: packed value p of a
  // 1024-value chunk takes tiled value perm_[p] of the same chunk.
  std::array<uint16_t, kChunk> perm_{};
};

class MarlinMxfp4ScaleLayout final : public IndexMap<MarlinMxfp4ScaleLayout> {
 public:
  explicit MarlinMxfp4ScaleLayout(MarlinActivation act) : act_(act) {}
  std::string name() const override;
  DType packed_dtype(DType) const override { return DType::F8_E8M0; }
  Accepts accepts() const override;
  // FP8 activations add 6 to every byte (encode_unit / decode_unit).
  Units units(DType) const override { return {.converts = act_ == MarlinActivation::fp8}; }

  // Packed column x of every packed row g comes from canonical row `source_column(x, groups)`
  // (column g).
  uint64_t source_column(uint64_t x, uint64_t groups) const;

  // Index map: canonical (source_column(x), g) -> packed (g, x).
  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], groups = shape[1];
    for (uint64_t x = 0; x < rows; ++x) {
      const uint64_t source = source_column(x, groups);
      for (uint64_t g = 0; g < groups; ++g) fn(source * groups + g, g * rows + x);
    }
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape[1], shape[0]}; }
  uint64_t encode_unit(DType canonical, uint64_t value, uint64_t canonical_unit) const override;
  uint64_t decode_unit(DType canonical, uint64_t value, uint64_t canonical_unit) const override;

 private:
  MarlinActivation act_;
};

class MarlinBiasLayout final : public IndexMap<MarlinBiasLayout> {
 public:
  std::string name() const override;
  DType packed_dtype(DType) const override { return DType::BF16; }
  Accepts accepts() const override;
  Units units(DType canonical) const override {
    return {.canonical_bits = static_cast<unsigned>(dtype_bits(canonical)), .packed_bits = 16, .converts = true};
  }

  // Index map of `marlin_permute_bias` (the "single" scale permutation): packed x <- canonical source_index(x).
  static uint64_t source_index(uint64_t x);

  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    for (uint64_t x = 0; x < shape[0]; ++x) fn(source_index(x), x);
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape[0]}; }
};

}  // namespace moepack::packers
