// The CUTLASS SM100 128x4 block-scale-factor swizzle, and vLLM's CUTLASS W4A4 MXFP4 MoE scale
// layout built on it (compressed-tensors / AutoRound MXFP4 on SM100-SM110, `CutlassExpertsMxfp4`).
//
// Upstream definitions followed:
//   NVIDIA/cutlass : include/cutlass/detail/sm100_blockscaled_layout.hpp (`Sm1xxBlockScaledConfig`,
//     atom Shape<(32,4),(SFVec,4)> Stride<(16,4),(0,1)>, K tiles fastest)
//   vllm-project/vllm : vllm/model_executor/layers/fused_moe/experts/cutlass_moe.py
//     `swizzle_mxfp4_scales` @ e9d1398d9, called per expert by
//     vllm/.../compressed_tensors_moe/compressed_tensors_moe_w4a4_mxfp4.py (and inc_mxfp4_moe.py)
//     `process_weights_after_loading`, which reshapes each swizzled expert back to [N, K/32]
//   flashinfer-ai/flashinfer : csrc/nv_internal/tensorrt_llm/kernels/quantization_utils.cuh
//     `get_sf_out_offset_128x4` @ v0.6.17 (the same offsets; `block_scale_interleave`)
//
// One expert's scale matrix S[M][C] (M output rows, C = K/32 E8M0 bytes) is zero-padded to
// Mp = round_up(M, 128) rows and Cp = round_up(C, 4) columns and cut into 128x4 tiles, tile
// (m/128, c/4) at ((m/128)*(Cp/4) + c/4) * 512; inside a tile the 128 rows are folded 32x4:
//
//   offset(m, c) = (m/128)*Cp*128 + (c/4)*512 + (m%32)*16 + ((m/32)%4)*4 + c%4
//
//   one 512-byte tile (rows m0..m0+127, columns c0..c0+3):
//     bytes   0..3  : S[m0+0 ][c0..c0+3]   4..7 : S[m0+32][..]   8..11: S[m0+64][..]  12..15: S[m0+96][..]
//     bytes  16..19 : S[m0+1 ][c0..c0+3]  20..23: S[m0+33][..]  ...
//     bytes 496..511: S[m0+31][..], S[m0+63][..], S[m0+95][..], S[m0+127][..]
//   Examples (layouts-fp4.md 4): M=130, C=5 -> 2048 bytes, S[33][1] -> 21, S[129][4] -> 1552.
//
// The vLLM W4A4 layout: every expert is swizzled alone and `.reshape(N, K/32)` must succeed, so
// vLLM refuses N % 128 != 0 or (K/32) % 4 != 0 (ERRATA 8); this packer refuses them the same way.
// Canonical input: one expert's w13 or w2 E8M0 scale bytes U8 [N, K/32], vLLM's parameter row
// order ([w1; w3] for w13), no padding. Packed: U8 [N, K/32] (same size, bytes swizzled).
#pragma once

#include "packers/index_map.h"

namespace moepack::packers {

// The atom's offset function, sf_128x4_offset, is in common.h: FlashInfer's and triton_kernels'
// layouts use it too.
class CutlassMxfp4ScaleSwizzleLayout final : public IndexMap<CutlassMxfp4ScaleSwizzleLayout> {
 public:
  std::string name() const override;
  DType packed_dtype(DType canonical) const override { return canonical; }
  Accepts accepts() const override;

  // Index map: scale (m, c) -> sf_128x4_offset(m, c, C); no padding (C % 4 == 0, M % 128 == 0).
  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    for (uint64_t m = 0; m < shape[0]; ++m) {
      const uint64_t row = sf_128x4_row_offset(m, shape[1]);
      for (uint64_t c = 0; c < shape[1]; ++c) fn(m * shape[1] + c, row + sf_128x4_column_offset(c));
    }
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape[0], shape[1]}; }
};

}  // namespace moepack::packers
