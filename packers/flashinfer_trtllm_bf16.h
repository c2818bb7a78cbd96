// FlashInfer TRT-LLM-gen BF16 MoE weights (vLLM unquantized backend FLASHINFER_TRTLLM,
// TrtLlmBf16Experts*): a row shuffle, then the BlockMajorK block layout.
//
// Upstream definitions followed:
//   vllm-project/vllm @ e9d1398d9 : vllm/model_executor/layers/fused_moe/oracle/unquantized.py
//     `convert_to_unquantized_kernel_format` (FLASHINFER_TRTLLM branch; a non-gated layer is
//     first zero-padded to I % 128 == 0 by `align_moe_weights_for_fi`, the loader's padding
//     here) -> vllm/model_executor/layers/quantization/utils/flashinfer_utils.py
//     `convert_moe_weights_to_flashinfer_trtllm_block_layout` (epilogue_tile_m = 128,
//     block_k = 128 bytes; bf16 only, ValueError otherwise; per expert, on the uint8 view:
//     w13 rows gathered by the w3_w1 permutation, then shifted by rows/2 when gated because
//     vLLM holds [w1; w3]; w2 rows gathered by the w2 permutation; then
//     view [rows, Kb/128, 128].permute(1, 0, 2) and index_select of the rows).
//   flashinfer-ai/flashinfer @ v0.6.17 : flashinfer/fused_moe/core.py
//     `_maybe_get_cached_w3_w1_permute_indices` (reorder-for-gated-act indices composed with the
//     shuffle: permute0[permute1]), `get_w2_permute_indices_with_cache`,
//     `get_reorder_rows_for_gated_act_gemm_row_indices`; flashinfer/utils.py
//     `get_shuffle_matrix_a_row_indices` (32-row blocks for epilogue_tile_m = 128).
//
// Packed row r gathers canonical row src(r):
//   S(r)   = (r/32)*32 + 4*(r%8) + (r%32)/8                        (the 32-row shuffle)
//   gated w13 (rows = w3w1_interleave): src(r) = S(r) even ? I + S(r)/2 : S(r)/2   (N = 2I rows)
//     — reorder[2i] = i, reorder[2i+1] = I + i, then +I mod 2I: [w3_0, w1_0, w3_1, w1_1, ...]
//   w2 and non-gated w13 (rows = identity): src(r) = S(r)
// then, with 64 bf16 = 128 bytes per block:
//   canonical element (src(r), 64*kb + j) -> packed element (kb, r, j) of [K/64, N, 64]
//
// Drawn example, gated w13, I = 16 (N = 32 rows), K = 128 (two 64-element blocks):
//   packed row r     : 0   1   2   3   4   5   6   7   8   9  10 ...
//   S(r)             : 0   4   8  12  16  20  24  28   1   5   9 ...
//   src(r)           : 16  18  20  22  24  26  28  30  0   2   4 ...   (S even -> up row I+S/2)
//   packed elements 0..63 = canonical row 16, columns 0..63; 64..127 = row 18, columns 0..63;
//   packed element 32*64 = 2048 starts block kb = 1: row 16, columns 64..127.
//
// Canonical input: one expert's BF16 weight [N, K]. Refused like vLLM fails at load:
// N % 32 (shuffle blocks), K % 64 (128-byte blocks). The parameter is [E, K/64, N, 64] bf16.
//
// FlashInfer TRT-LLM-gen DeepSeek FP8 block-scaled MoE weights (vLLM FP8 backend FLASHINFER_TRTLLM
// with 128x128 block scales) follow the same two steps with other parameters:
//   vllm-project/vllm @ e9d1398d9 : quantization/utils/flashinfer_utils.py
//     `prepare_fp8_moe_layer_for_fi` (gated w13: swap_w13_to_w31, no gate/up interleave) ->
//     `_shuffle_deepseek_fp8_moe_weights`: shuffle_matrix_a(w.view(uint8), epilogue_tile_m=64)
//     then convert_to_block_layout(t, 128): [M, K] -> [K/128, M, 128] bytes.
//   flashinfer @ v0.6.17 : utils.py `get_shuffle_matrix_a_row_indices` (epilogue_tile_m 64 ->
//     16-row blocks, srcToDstBlk16RowMap), fused_moe/core.py `convert_to_block_layout`.
// Packed row r gathers canonical row src(r):
//   S16(r) = (r/16)*16 + 2*(r%8) + (r%16)/8                        (the 16-row shuffle)
//   gated w13 (rows = swap_halves): src(r) = (S16(r) + I) mod 2I;  w2 (identity): src(r) = S16(r)
//   canonical byte (src(r), 128*kb + j) -> packed byte (kb, r, j) of [K/128, N, 128]
// Drawn example, gated w13, I = 16 (N = 32 rows), K = 128:
//   packed row r : 0   1   2   3   4   5   6   7   8   9  ... 16  17
//   S16(r)       : 0   2   4   6   8  10  12  14   1   3  ... 16  18
//   src(r)       : 16  18  20  22  24  26  28  30  17  19  ...  0   2   (up rows first)
// Canonical input: one expert's F8_E4M3 weight [N, K], N % 16 == 0, K % 128 == 0 (vLLM asserts).
#pragma once

#include "packers/index_map.h"

namespace moepack::packers {

// The canonical row of packed row r of FlashInfer's shuffle_matrix_a with `block`-row shuffle
// blocks (32 for epilogue_tile_m 128, 16 for 64): rows are dealt round-robin over 8 lanes.
constexpr uint64_t shuffle_matrix_a_source_row(uint64_t r, uint64_t block) {
  return (r / block) * block + (block / 8) * (r % 8) + (r % block) / 8;
}

// Both variants are one layout with the element width and the shuffle's block as parameters.
enum class BlockMajorKElement { bf16, fp8 };

template <BlockMajorKElement E>
class FlashinferTrtllmBlockMajorKLayout final : public IndexMap<FlashinferTrtllmBlockMajorKLayout<E>> {
 public:
  static constexpr bool kFp8 = E == BlockMajorKElement::fp8;
  static constexpr uint64_t kShuffleBlock = kFp8 ? 16 : 32;  // rows: epilogue_tile_m 64 (fp8), 128 (bf16)
  static constexpr uint64_t kElementBytes = kFp8 ? 1 : 2;
  static constexpr uint64_t kBlockK = 128 / kElementBytes;  // elements of a 128-byte block

  explicit FlashinferTrtllmBlockMajorKLayout(RowOrder rows) : rows_(rows) {}

  std::string name() const override;
  DType packed_dtype(DType canonical) const override { return canonical; }
  Accepts accepts() const override;
  Units units(DType) const override { return {.canonical_bits = 8 * kElementBytes, .packed_bits = 8 * kElementBytes}; }
  void pack(const TensorView& canonical, std::span<uint8_t> packed) const override;  // bulk: 128-byte runs

  uint64_t source_row(uint64_t r, uint64_t rows) const { return row_order_source(rows_, shuffle_matrix_a_source_row(r, kShuffleBlock), rows); }

  // Index map, walked packed row by packed row: canonical (src(r), c) -> packed (c/kBlockK, r, c%kBlockK).
  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], cols = shape[1];
    for (uint64_t r = 0; r < rows; ++r) {
      const uint64_t source = source_row(r, rows);
      for (uint64_t c = 0; c < cols; ++c) fn(source * cols + c, ((c / kBlockK) * rows + r) * kBlockK + c % kBlockK);
    }
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape[1] / kBlockK, shape[0], kBlockK}; }

 private:
  RowOrder rows_;
};

using FlashinferTrtllmBf16Layout = FlashinferTrtllmBlockMajorKLayout<BlockMajorKElement::bf16>;
using FlashinferTrtllmFp8BlockLayout = FlashinferTrtllmBlockMajorKLayout<BlockMajorKElement::fp8>;

}  // namespace moepack::packers
