// vLLM's CUTLASS W4A8 MoE (int4 weights, FP8 activations, SM90): the int4 weight reorder and the
// packed FP8 group-scale lookup table that CutlassExpertsW4A8Fp8 reads.
//
// Upstream definitions followed:
//   vllm-project/vllm @ e9d1398d9 : vllm/model_executor/layers/fused_moe/oracle/w4a8.py
//     `convert_to_w4a8_moe_kernel_format` (called by compressed_tensors_moe_w4a8_fp8.py
//     CompressedTensorsW4A8Fp8MoEMethod.process_weights_after_loading);
//   csrc/libtorch_stable/quantization/cutlass_w4a8/w4a8_grouped_mm_entry.cu
//     `encode_and_reorder_int4b` (cutlass_encode_and_reorder_int4b_grouped), w4a8_utils.cu
//     `unified_encode_int4b`, w4a8_mm_entry.cu `pack_scale_fp8`;
//   NVIDIA/cutlass @ v4.4.2 (vLLM's CUTLASS_REVISION) : tools/util/include/cutlass/util/
//     mixed_dtype_utils.hpp `compute_memory_reordering_atom`, `reorder_tensor`,
//     `packed_scale_t`; include/cutlass/float8.h `convert_float_to_fp8` (the host conversion
//     pack_scale_fp8 runs); include/cute/atom/mma_traits_sm90_gmma.hpp `ALayout_64x32`.
//
// ---- weight: vllm.cutlass_encode_and_reorder_int4b_grouped ---------------------------------------
// Canonical: one expert's loaded w{13,2}_weight_packed, I32 [N, K/8]; value (n, k) is nibble
// k%8 (bits 4(k%8)..) of word (n, k/8) in compressed-tensors' uint4b8 code u = w + 8.
// Values: convert_packed_uint4b8_to_signed_int4_inplace makes each nibble two's complement
// s = (u - 8) & 0xF, then unified_encode_int4b maps s in 1..7 to 8 - s (keeping 0 and 8..15),
// so a positive w is stored as the low three bits of -w:
//     u     0  1  2  3  4  5  6  7 | 8 |  9 10 11 12 13 14 15
//     w    -8 -7 -6 -5 -4 -3 -2 -1 | 0 |  1  2  3  4  5  6  7
//     code  8  9  A  B  C  D  E  F | 0 |  7  6  5  4  3  2  1
// Positions: the packed I32 [N, K/8] holds the codes at cute layout tile_to_shape(atom, (N, K))
// with the atom (((8,2),1),((4,4,2),1)) : (((64,4),0),((1,16,8),0)) of
// compute_memory_reordering_atom<float_e4m3_t>() (the register fragment of the GMMA 64x16x32
// F32E4M3E4M3 RS A operand, one warp's 16 x 32 values, each lane's 16 values contiguous):
//     nibble (n, k) -> 512 * (n/16 + (N/16) * (k/32))            16 x 32 tiles, n fastest
//                    + 64 * (n%8) + 4 * ((n%16)/8)               lane = (k%32/4)%4 + 4 * (n%8)
//                    + 16 * ((k%32/4)%4) + 8 * (k%32/16) + k%4   value = k%4 + 4*(n%16/8) + 8*(k%32/16)
//   drawn, one 16 x 32 tile: the nibble offsets of four rows n, by groups of four k
//            k 0-3    4-7      8-11     12-15    16-19    20-23    24-27    28-31
//     n=0      0-3    16-19    32-35    48-51     8-11    24-27    40-43    56-59
//     n=1     64-67   80-83    96-99   112-115   72-75    88-91   104-107  120-123
//     n=8      4-7    20-23    36-39    52-55    12-15    28-31    44-47    60-63
//     n=15   452-455 468-471  484-487  500-503  460-463  476-479  492-495  508-511
//   Pairs (k, k+1), k even, stay in one byte, so the map moves whole bytes.
// Needs N % 16 == 0 and K % 256 == 0 (vLLM's check before reorder_tensor).
//
// ---- scales: vllm.cutlass_pack_scale_fp8 ---------------------------------------------------------
// Canonical: one expert's FP8 group scales s8 F8_E4M3 [N, G] (what convert_bf16_scales_to_fp8
// returns, lib/convert/w4a8_cutlass.h). vLLM permutes them to [G, N] (`.permute(0, 2, 1)
// .contiguous()`, per expert) and pack_scale_fp8 writes 8 bytes per scale: cutlass::
// packed_scale_t<float_e4m3_t, int4b_t>, the two's complement lookup table
//     byte j = e4m3(float(s8) * -(8 - j)),  j = 0..7   (s8 * -8, -7, ..., -1)
// converted by CUTLASS's host float -> e4m3 (round to nearest even, satfinite: |v| > 448 -> 448).
// Packed: F8_E4M3 [G, N, 8] per expert; vLLM holds the 1-D [E * G * N * 8].
//   drawn, N = 2, G = 2, s8 = [[1.0, 0.5], [2.0, 0.25]] (rows n):
//     packed = LUT(1.0) LUT(2.0) | LUT(0.5) LUT(0.25)   (g = 0 then g = 1)
//     LUT(1.0) = D0 CE CC CA C8 C4 C0 B8  (-8 -7 -6 -5 -4 -3 -2 -1)
// The inverse reads s8 back from byte 7 (-s8, exact). It exists for s8 in [0, 448]: a NaN's
// table is all 0x7F and a negative s8 is no scale vLLM's symmetric int4 method produces, so the
// layout takes codes 0x00..0x7E only.
#pragma once

#include <array>
#include <cstdint>

#include "packers/index_map.h"

namespace moepack::packers {

class CutlassW4a8WeightLayout final : public IndexMap<CutlassW4a8WeightLayout> {
 public:
  std::string name() const override;
  DType packed_dtype(DType) const override { return DType::I32; }
  Accepts accepts() const override;
  Units units(DType) const override { return {.canonical_bits = 4, .packed_bits = 4, .converts = true}; }
  void pack(const TensorView& canonical, std::span<uint8_t> packed) const override;  // bulk: whole bytes

  // The nibble offset of (n, k) in one expert's reordered [rows, k] buffer.
  static uint64_t reordered_nibble(uint64_t n, uint64_t k, uint64_t rows) {
    const uint64_t kk = k % 32, m = n % 16;
    return 512 * (n / 16 + (rows / 16) * (k / 32)) + 64 * (m % 8) + 4 * (m / 8) + 16 * ((kk / 4) % 4) + 8 * (kk / 16) + kk % 4;
  }
  // uint4b8 nibble -> CUTLASS's unified int4 code, and back.
  static uint8_t encode_nibble(uint8_t u) { return u < 8 ? static_cast<uint8_t>(u + 8) : u == 8 ? 0 : static_cast<uint8_t>(16 - u); }
  static uint8_t decode_nibble(uint8_t code) { return code >= 8 ? static_cast<uint8_t>(code - 8) : code == 0 ? 8 : static_cast<uint8_t>(16 - code); }

  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], k = shape[1] * 8;
    for (uint64_t n = 0; n < rows; ++n)
      for (uint64_t c = 0; c < k; ++c) fn(n * k + c, reordered_nibble(n, c, rows));
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape.begin(), shape.end()}; }
  uint64_t encode_unit(DType, uint64_t value, uint64_t) const override { return encode_nibble(static_cast<uint8_t>(value)); }
  uint64_t decode_unit(DType, uint64_t value, uint64_t) const override { return decode_nibble(static_cast<uint8_t>(value)); }
};

class CutlassW4a8ScaleLayout final : public IndexMap<CutlassW4a8ScaleLayout> {
 public:
  std::string name() const override;
  DType packed_dtype(DType) const override { return DType::F8_E4M3; }
  Accepts accepts() const override;
  Units units(DType) const override { return {.canonical_bits = 8, .packed_bits = 64, .converts = true}; }
  std::vector<uint64_t> parameter_shape(uint64_t num_experts, std::span<const uint64_t> canonical_shape) const override;

  // CUTLASS's host float -> e4m3 (float8.h convert_float_to_fp8): round to nearest even,
  // finite values past 448 saturate to +-448, NaN -> 0x7F.
  static uint8_t cutlass_e4m3(float v);
  // The eight table bytes of one scale code, byte j = e4m3(s8 * -(8 - j)).
  static std::array<uint8_t, 8> lookup_table(uint8_t s8);

  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], groups = shape[1];
    for (uint64_t n = 0; n < rows; ++n)
      for (uint64_t g = 0; g < groups; ++g) fn(n * groups + g, g * rows + n);
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape[1], shape[0], 8}; }
  uint64_t encode_unit(DType, uint64_t value, uint64_t) const override;
  uint64_t decode_unit(DType, uint64_t value, uint64_t) const override;
};

}  // namespace moepack::packers
