// FlashInfer CUTLASS MXFP4 MoE layouts (vLLM backends FLASHINFER_CUTLASS_MXFP4_MXFP8 on SM100
// family and FLASHINFER_CUTLASS_MXFP4_BF16 on SM90).
//
// Upstream definitions followed:
//   vllm-project/vllm : vllm/model_executor/layers/fused_moe/oracle/mxfp4.py @ e9d1398d9
//     gpt-oss path `convert_gpt_oss_weight_to_mxfp4_moe_kernel_format`: w13 rows ::2 (gate) and
//     1::2 (up) de-interleaved, then [up; gate]; w13 bias the same, cast to bf16; w2 bias untouched.
//     generic path `convert_weight_to_mxfp4_moe_kernel_format`: `swap_w13_to_w31` ([w1;w3] ->
//     [w3;w1]) on weight and scale; w13 bias halves swapped, both biases cast to bf16.
//     MXFP8 (SM100): `flashinfer.block_scale_interleave` of the [E, N, K/32] scales, reshaped back.
//     BF16 (SM90): `interleave_moe_weights_for_sm90_mixed_gemm(w, "fp4")` on both weights and
//     `interleave_moe_scales_for_sm90_mixed_gemm` on both scales.
//   flashinfer-ai/flashinfer @ v0.6.17 : flashinfer/fused_moe/core.py
//     `interleave_moe_scales_for_sm90_mixed_gemm`, `interleave_moe_weights_for_sm90_mixed_gemm`;
//     csrc/fused_moe/cutlass_backend/flashinfer_cutlass_fused_moe_binding.cu (per-expert loop);
//     csrc/nv_internal/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_gemm_mixed_utils.cu
//     `interleave_fp4_weights_for_sm90_mixed_gemm_kernel` (the byte/nibble map below)
//
// ---- SM90 FP4 weight interleave (per expert, W = [N rows][K/2 bytes]) ----------------------
// Rows go in pairs (n, n+8) inside each 16-row group; bytes go in runs of 32 (64 FP4 values).
// For source bytes a = W[n][32p + l] and b = W[n+8][32p + l] (l = lane 0..31, n%16 < 8):
//   new_a = a.lo | b.lo << 4,  new_b = a.hi | b.hi << 4
//   both land in packed row n + 8*((l/8)%2), at bytes 32p + L(l) and 32p + L(l) + 1, with
//   L(l) = 16*(l/16) + 4*(l%4) + 2*((l%8)/4)
// Per source FP4 value (row n, element k): byte c = k/2, lane l = c%32; it goes to packed row
// 16*(n/16) + n%8 + 8*((l/8)%2), byte 32*(c/32) + L(l) + k%2, nibble (n%16)/8 (low for the first
// row of the pair, high for the second).
//
//   lanes l      : 0  1  2  3  4  5  6  7 |  8 .. 15            | 16 .. 23             | 24 .. 31
//   packed row   : n  n  n  n  n  n  n  n |  n+8                | n                    | n+8
//   packed bytes : 0  4  8 12  2  6 10 14 |  0 4 8 12 2 6 10 14 | 16 20 .. 18 22 .. 30 | 16 20 .. 30
//   (each lane writes the byte shown and the next one)
// Requires N % 16 == 0 and K % 64 == 0 (the kernel leaves other bytes unwritten).
//
// ---- SM90 scale interleave ------------------------------------------------------------------
// [N][C] -> [C/4][4N]:  out[j][4n + q] = in[n][4j + q]      (C = K/32, C % 4 == 0)
//   in  row n : s(n,0) s(n,1) s(n,2) s(n,3) s(n,4) ...
//   out row 0 : s(0,0) s(0,1) s(0,2) s(0,3) s(1,0) s(1,1) s(1,2) s(1,3) s(2,0) ...
//
// ---- SM100 (MXFP8 activations) scales: CUTLASS 128x4 swizzle (sf_128x4_offset, common.h) of the
// row-reordered [N][C]; vLLM reshapes each expert back, so N % 128 == 0 and C % 4 == 0.
//
// Canonical inputs (one expert, I and H already padded to 128 by vLLM): weight U8 [N, K/2],
// scale U8 [N, K/32] E8M0, bias BF16/F16/F32 [N]. w13 tensors carry the checkpoint family's row
// order (RowOrder, common.h): `deinterleave_up_first` expects gpt-oss' interleaved [g0,u0,...],
// `swap_halves` expects stacked [w1; w3]; w2 tensors use `identity`.
#pragma once

#include "packers/index_map.h"

namespace moepack::packers {

enum class FiCutlassTensor {
  weight,             // rows reordered only (SM100 MXFP8 activations)
  weight_sm90,        // rows reordered, then the SM90 FP4 interleave (BF16 activations)
  scale_128x4,        // rows reordered, then the 128x4 swizzle (SM100)
  scale_sm90,         // rows reordered, then [C/4][4N] (SM90)
  bias_bf16,          // rows reordered, cast to BF16
};

class FlashinferCutlassMxfp4Layout final : public IndexMap<FlashinferCutlassMxfp4Layout> {
 public:
  FlashinferCutlassMxfp4Layout(FiCutlassTensor tensor, RowOrder rows) : tensor_(tensor), rows_(rows) {}

  std::string name() const override;
  DType packed_dtype(DType canonical) const override;
  Accepts accepts() const override;
  Units units(DType canonical) const override;
  void pack(const TensorView& canonical, std::span<uint8_t> packed) const override;  // bulk for the weights

  // Row reorder: canonical row feeding reordered row r.
  uint64_t source_row(uint64_t r, uint64_t rows) const { return row_order_source(rows_, r, rows); }

  // SM90 FP4 interleave of an already reordered [rows][k_elems/2] matrix: where FP4 value
  // (n, k) goes, as packed byte offset and nibble (0 low, 1 high).
  struct NibblePosition {
    uint64_t byte;
    unsigned nibble;
  };
  static NibblePosition sm90_weight_position(uint64_t n, uint64_t k, uint64_t k_elems) {
    const uint64_t row_bytes = k_elems / 2, c = k / 2, lane = c % 32;
    const uint64_t row = 16 * (n / 16) + n % 8 + 8 * ((lane / 8) % 2);
    return {row * row_bytes + 32 * (c / 32) + sm90_lane_column(lane) + k % 2, static_cast<unsigned>((n % 16) / 8)};
  }
  // Packed-byte column of lane l inside its 32-byte run (the kernel's interleaved lane id).
  static uint64_t sm90_lane_column(uint64_t lane) { return 16 * (lane / 16) + 4 * (lane % 4) + 2 * ((lane % 8) / 4); }
  // SM90 scale interleave: packed byte offset of scale (n, c) in an [rows][cols] matrix.
  static uint64_t sm90_scale_offset(uint64_t n, uint64_t c, uint64_t rows) { return (c / 4) * 4 * rows + 4 * n + c % 4; }

  // Index map: reordered row r gathers canonical row source_row(r), then the tensor's own
  // placement. Units are bytes (FP4 codes for weight_sm90, elements for the bias).
  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], cols = shape.size() == 2 ? shape[1] : 1, k_elems = 2 * cols;
    for (uint64_t r = 0; r < rows; ++r) {
      const uint64_t source = source_row(r, rows);
      if (tensor_ == FiCutlassTensor::weight_sm90) {
        for (uint64_t k = 0; k < k_elems; ++k) {
          const NibblePosition p = sm90_weight_position(r, k, k_elems);
          fn(source * k_elems + k, 2 * p.byte + p.nibble);
        }
        continue;
      }
      if (tensor_ == FiCutlassTensor::scale_128x4) {
        const uint64_t row = sf_128x4_row_offset(r, cols);
        for (uint64_t c = 0; c < cols; ++c) fn(source * cols + c, row + sf_128x4_column_offset(c));
      } else if (tensor_ == FiCutlassTensor::scale_sm90) {
        for (uint64_t c = 0; c < cols; ++c) fn(source * cols + c, sm90_scale_offset(r, c, rows));
      } else {
        for (uint64_t c = 0; c < cols; ++c) fn(source * cols + c, r * cols + c);
      }
    }
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override {
    if (tensor_ == FiCutlassTensor::scale_sm90) return {shape[1] / 4, 4 * shape[0]};
    return {shape.begin(), shape.end()};
  }

 private:
  FiCutlassTensor tensor_;
  RowOrder rows_;
};

}  // namespace moepack::packers
