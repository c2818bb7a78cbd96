// NVFP4 MoE layouts that no MXFP4 path already has: vLLM's w13 row reorders kept as their own
// layout, `swizzle_blockscale` (the 128x4 block-scale swizzle WITH its padding), and the Marlin
// NVFP4 block scales (permutation plus the S0E5M3 re-encoding). The TRT-LLM-gen row shuffles
// and the 4-bit Marlin weight repack are shared with MXFP4 (flashinfer_trtllm_mxfp4.h,
// marlin_mxfp4.h): they move FP4 bytes and scale bytes without looking at them.
//
// Upstream definitions followed (vllm-project/vllm @ e9d1398d9):
//   vllm/model_executor/layers/quantization/utils/flashinfer_fp4_moe.py
//     `prepare_nvfp4_moe_layer_for_fi_or_cutlass` (`reorder_w1w3_to_w3w1` for FLASHINFER_CUTLASS,
//     FLASHINFER_TRTLLM and FLASHINFER_B12X, gated only), `prepare_nvfp4_moe_layer_for_flashinfer_cutedsl`
//     (`reorder_w13_to_w31_for_flashinfer_cutedsl` then `interleave_linear_and_gate(group_size=64)`)
//   vllm/model_executor/layers/quantization/utils/nvfp4_utils.py `swizzle_blockscale`
//   vllm/model_executor/layers/quantization/utils/marlin_utils_fp4.py `prepare_nvfp4_moe_layer_for_marlin`,
//     `nvfp4_marlin_process_scales`; marlin_utils.py `marlin_permute_scales`, `get_scale_perms`
//
// ---- vllm.reorder_w13_rows(rows=ORDER) ------------------------------------------------------------
// One expert's w13 weight or scale matrix [2I, C], rows gathered: out[r] = in[row_order_source(r)]
// (common.h). swap_halves, I = 4:            rows in  g0 g1 g2 g3 u0 u1 u2 u3
//                                            rows out u0 u1 u2 u3 g0 g1 g2 g3
// cutedsl_w31_interleave64, I = 128:         out rows 0..63 <- 128..191 (up), 64..127 <- 0..63 (gate),
//                                            128..191 <- 192..255 (up), 192..255 <- 64..127 (gate)
// Bytes of a row are untouched (FP4 pairs, E4M3 scales alike).
//
// ---- vllm.swizzle_blockscale(rows=ORDER,sf=128x4) ------------------------------------------------
// Rows gathered as above, then the CUTLASS 128x4 atom (common.h sf_128x4_offset) over the matrix
// zero-padded to Mp = round_up(M, 128) rows and Cp = round_up(C, 4) columns; vLLM keeps the
// result as [Mp, Cp] per expert (swizzle_blockscale returns [E, Mp, Cp]).
//   M = 130, C = 5 -> [256, 8]: S[33][1] at byte 21, S[129][4] at 1552, bytes of rows 130..255 and
//   columns 5..7 zero (layouts-fp4.md 4).
//
// ---- vllm.nvfp4_marlin_process_scales(group_size=16) ---------------------------------------------
// Canonical: one expert's E4M3 scales [N, K/16] AFTER the layer's value stage (the shared power-of-
// two factor applied and every scale below 2^-6 set to zero, lib/convert/nvfp4_prepare), so +0 or
// a positive normal E4M3; the map itself takes every non-negative code (subnormals would give the
// bytes 104..126 vLLM then zeroes) and refuses negative ones and NaN. Per expert, T = S transposed [K/16][N], then per row g
//   P[g][64b + 8i + j] = T[g][64b + i + 8j]            (marlin_permute_scales, grouped)
//   Q[g][4a + u]       = P[g][4a + U[u]], U = 0 2 1 3   (the dequant pair order)
// and every byte re-encoded as S0E5M3: the half of value*2^7 shifted left once, high byte kept.
// For a normal E4M3 code b (exponent E, mantissa m) that half is ((E+15)<<10 | m<<7), so the byte
// is ((E+15)<<3 | m) = b + 120; zero stays zero.
//   e.g. 1.0 (0x38) -> 0xB0, 448 (0x7E) -> 0xF6, 2^-6 (0x08) -> 0x80.
// Packed: F8_E4M3 [K/16, N] (vLLM's dtype for the bytes); N % 64 == 0 (tile_n_size).
#pragma once

#include "packers/index_map.h"

namespace moepack::packers {

class ReorderW13RowsLayout final : public IndexMap<ReorderW13RowsLayout> {
 public:
  explicit ReorderW13RowsLayout(RowOrder rows) : rows_(rows) {}
  std::string name() const override;
  DType packed_dtype(DType canonical) const override { return canonical; }
  Accepts accepts() const override;
  // Units are whole elements (FP4 pairs, E4M3 scales, 16-bit floats alike).
  Units units(DType canonical) const override {
    const auto bits = static_cast<unsigned>(dtype_bits(canonical));
    return {.canonical_bits = bits, .packed_bits = bits};
  }
  void pack(const TensorView& canonical, std::span<uint8_t> packed) const override;  // bulk: whole rows

  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], cols = shape[1];
    for (uint64_t r = 0; r < rows; ++r) {
      const uint64_t source = row_order_source(rows_, r, rows);
      for (uint64_t c = 0; c < cols; ++c) fn(source * cols + c, r * cols + c);
    }
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape[0], shape[1]}; }

 private:
  RowOrder rows_;
};

class SwizzleBlockscaleLayout final : public IndexMap<SwizzleBlockscaleLayout> {
 public:
  explicit SwizzleBlockscaleLayout(RowOrder rows) : rows_(rows) {}
  std::string name() const override;
  DType packed_dtype(DType canonical) const override { return canonical; }
  Accepts accepts() const override;

  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], cols = shape[1], cols_padded = (cols + 3) / 4 * 4;
    for (uint64_t m = 0; m < rows; ++m) {
      const uint64_t source = row_order_source(rows_, m, rows);
      const uint64_t row = sf_128x4_row_offset(m, cols_padded);
      for (uint64_t c = 0; c < cols; ++c) fn(source * cols + c, row + sf_128x4_column_offset(c));
    }
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override {
    return {(shape[0] + 127) / 128 * 128, (shape[1] + 3) / 4 * 4};
  }

 private:
  RowOrder rows_;
};

class MarlinNvfp4ScaleLayout final : public IndexMap<MarlinNvfp4ScaleLayout> {
 public:
  std::string name() const override;
  DType packed_dtype(DType) const override { return DType::F8_E4M3; }
  Accepts accepts() const override;
  Units units(DType) const override { return {.converts = true}; }

  // Packed column x of every packed row g comes from canonical row source_column(x) (column g).
  static uint64_t source_column(uint64_t x) {
    constexpr uint64_t kDequantPairOrder[4] = {0, 2, 1, 3};
    const uint64_t y = (x / 4) * 4 + kDequantPairOrder[x % 4];
    return (y / 64) * 64 + (y % 64) / 8 + 8 * (y % 8);
  }

  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], groups = shape[1];
    for (uint64_t x = 0; x < rows; ++x) {
      const uint64_t source = source_column(x);
      for (uint64_t g = 0; g < groups; ++g) fn(source * groups + g, g * rows + x);
    }
  }

  static constexpr uint64_t kLargestCode = 0x7E;  // 448; above: NaN and the negative codes

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape[1], shape[0]}; }
  uint64_t encode_unit(DType canonical, uint64_t value, uint64_t canonical_unit) const override;
  uint64_t decode_unit(DType canonical, uint64_t value, uint64_t canonical_unit) const override;
};

}  // namespace moepack::packers
