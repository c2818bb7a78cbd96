// triton_kernels BlackwellMXValueLayout and BlackwellMXScaleLayout, v3.5.1: the SM100-family
// MXFP4 weight and scale layouts of vLLM's OAI Triton MoE.
//
// Upstream definitions followed:
//   triton-lang/triton : python/triton_kernels/triton_kernels/tensor_details/layout_details/blackwell_value.py @ v3.5.1
//   triton-lang/triton : python/triton_kernels/triton_kernels/tensor_details/layout_details/blackwell_scale.py @ v3.5.1
//     (both read in the verbatim vendored copies NVIDIA/TensorRT-LLM : triton_kernels/... @ 295cfebe)
//   triton-lang/triton : python/triton_kernels/triton_kernels/tensor_details/layout.py @ v3.5.1
//     (`make_default_matmul_mxfp4_w_layout` / `_w_scale_layout`: capability >= 10 picks these)
//   vllm-project/vllm : vllm/model_executor/layers/quantization/utils/mxfp4_utils.py `_swizzle_mxfp4` @ e9d1398d9
//
// ---- BlackwellMXValue ---------------------------------------------------------------------
// The layout gets vLLM's [E, Kb, N] transposed view, permutes it to row-major by stride (back to
// the contiguous [E, N, Kb]), zero-pads the stride-1 axis (Kb) to a multiple of 128 bytes and
// permutes back: the storage is [N, Kbp] per expert, Kbp = round_up(Kb, 128). No reordering.
//
//   canonical [N=2, Kb=3]         storage [2, 128]
//     q00 q01 q02          ->     q00 q01 q02 0 0 ... 0     (125 zero bytes)
//     q10 q11 q12                 q10 q11 q12 0 0 ... 0
//
// Refused: N == 1 together with Kb == 1. There every stride of the [E, 1, 1] view is 1, the
// stride sort in the upstream code picks the expert axis as the innermost one and pads THAT to
// 128 (the artifact would have extra experts); no MXFP4 checkpoint has K = 2 (K >= 32).
//
// ---- BlackwellMXScale ---------------------------------------------------------------------
// Per expert the scale [N, Ks] is zero-padded to [Np, Kp] (Np = round_up(N, 128),
// Kp = round_up(Ks, 8)) and tiled like CUTLASS's 128x4 scale-factor atom (layouts-fp4.md 4):
//   offset(n, k) = (n/128)*(Kp*128) + (k/4)*512 + (n%32)*16 + ((n/32)%4)*4 + k%4
// The experts' slabs are concatenated; vLLM's tensor is viewed [1, E*Np/128, Kp/4, 2, 256]
// (parameter_shape); per expert this packer reports [Np/128, Kp/4, 2, 256].
//
//   one 512-byte block (rows n0..n0+127 of one 128-row tile, groups 4j..4j+3):
//     byte  0.. 3: (n0+0, 4j..4j+3)   byte  4.. 7: (n0+32, ..)  8..11: (n0+64, ..)  12..15: (n0+96, ..)
//     byte 16..19: (n0+1, 4j..4j+3)   ...                                   508..511: (n0+127, ..)
//   Example N = 2, Ks = 2: 1024 bytes; s<0,0> -> 0, s<0,1> -> 1, s<1,0> -> 16, s<1,1> -> 17.
//
// Canonical inputs: one expert's FP4 weight U8 [N, K/2], resp. E8M0 scale bytes [N, K/32],
// in vLLM's parameter order with I/H padding applied (no SM90 group pad on this device).
#pragma once

#include "packers/index_map.h"

namespace moepack::packers {

class TritonBlackwellMXValueLayout final : public IndexMap<TritonBlackwellMXValueLayout> {
 public:
  static constexpr uint64_t kByteAlign = 128;  // the stride-1 axis is padded to 128 bytes (256 FP4)

  std::string name() const override;
  DType packed_dtype(DType) const override { return DType::U8; }
  Accepts accepts() const override { return {}; }
  std::optional<std::string> irregular_refusal(std::span<const uint64_t> shape) const override;
  void pack(const TensorView& canonical, std::span<uint8_t> packed) const override;  // bulk: row copies

  // Index map: canonical byte (n, b) -> packed byte n * Kbp + b.
  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], bytes = shape[1], padded = round_up(bytes, kByteAlign);
    for (uint64_t n = 0; n < rows; ++n)
      for (uint64_t b = 0; b < bytes; ++b) fn(n * bytes + b, n * padded + b);
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override {
    return {shape[0], round_up(shape[1], kByteAlign)};
  }
};

class TritonBlackwellMXScaleLayout final : public IndexMap<TritonBlackwellMXScaleLayout> {
 public:
  static constexpr uint64_t kRowAlign = 128;   // ALIGN_N
  static constexpr uint64_t kGroupAlign = 8;   // ALIGN_K (the 128x4 atom itself only needs 4)

  std::string name() const override;
  DType packed_dtype(DType canonical) const override { return canonical; }
  Accepts accepts() const override { return {}; }
  std::vector<uint64_t> parameter_shape(uint64_t num_experts, std::span<const uint64_t> canonical_shape) const override;

  // Index map: canonical scale byte (n, k) -> the CUTLASS 128x4 atom offset with Kp columns.
  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], groups = shape[1], padded = round_up(groups, kGroupAlign);
    for (uint64_t n = 0; n < rows; ++n) {
      const uint64_t row = sf_128x4_row_offset(n, padded);
      for (uint64_t k = 0; k < groups; ++k) fn(n * groups + k, row + sf_128x4_column_offset(k));
    }
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override {
    return {round_up(shape[0], kRowAlign) / 128, round_up(shape[1], kGroupAlign) / 4, 2, 256};
  }
};

}  // namespace moepack::packers
