// triton_kernels HopperMXScaleLayout (mx_axis=1, num_warps 8 or 4), v3.5.1, preceded by vLLM's
// SM90 zero padding of the scale-group axis to a multiple of 4 (ERRATA 1).
//
// Upstream definition followed:
//   triton-lang/triton : python/triton_kernels/triton_kernels/tensor_details/layout_details/hopper_scale.py @ v3.5.1
//     (`HopperMXScaleLayout.swizzle_data`; read in the verbatim vendored copy
//      NVIDIA/TensorRT-LLM : triton_kernels/tensor_details/layout_details/hopper_scale.py @ 295cfebe)
//   vllm-project/vllm : vllm/model_executor/layers/quantization/utils/mxfp4_utils.py `_swizzle_mxfp4` @ e9d1398d9
//     (SM90: `pad(scale, (0, -Ks % 4))` before the transpose; num_warps defaults to 8; the
//      oracle at e9d1398d9 always calls it with the default, 4 is the older batched-MoE choice)
//
// vLLM passes the [E, Ks4, N] transposed view; the layout makes it [E, N, Ks4] contiguous,
// zero-pads N to A = 32*num_warps (and Ks4 to 2, a no-op after vLLM's 4), swizzles to a
// contiguous [E, Np/32, 32*Ksp] and hands the kernel the .mT view. Storage per expert:
// [Np/32, 32*Ksp], Np = round_up(N, 32*num_warps), Ksp = round_up(Ks, 4).
//
// Index map (W = num_warps):
//   n = A*m0 + 16*W*a + 16*w + 8*b + r   (a in 0..1, w in 0..W-1, b in 0..1, r in 0..7)
//   k = 2*k2 + c                          (c in 0..1)
//   out[W*m0 + w][64*k2 + 32*a + 4*r + 2*c + b] = S[n][k]
//
// Drawn example, num_warps = 8, one expert, N = 2, Ks = 2 (padded to 4): storage [8, 128].
//   row 0:  col 0    1   2    3   4    5   6    7   8 ..
//          s<0,0>  .  s<0,1>  .  s<1,0>  .  s<1,1>  .  . ..     ("." = zero padding)
//   rows 1..7 all padding (they would hold n = 16..31, 32..47, ... and n = 128.. via a=1).
//
// Canonical input: one expert's E8M0 scale bytes [N, Ks] = [N, K/32] in vLLM's parameter order
// (w13 rows as for the weights), I/H padding applied, the SM90 pad to 4 NOT applied (done here).
#pragma once

#include "packers/index_map.h"

namespace moepack::packers {

class TritonHopperMXScaleLayout final : public IndexMap<TritonHopperMXScaleLayout> {
 public:
  // vLLM e9d1398d9 pads the scale groups to a multiple of 4 on SM90 (a workaround it carries
  // until triton_kernels 3.8); the layout's own K alignment (2) is then already met.
  static constexpr uint64_t kVllmGroupPad = 4;

  explicit TritonHopperMXScaleLayout(uint64_t num_warps = 8);

  std::string name() const override;
  DType packed_dtype(DType canonical) const override { return canonical; }
  Accepts accepts() const override { return {}; }
  void pack(const TensorView& canonical, std::span<uint8_t> packed) const override;  // bulk: one row offset per scale row
  void unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const override;  // bulk inverse

  // Index map, with the digits of n and k (W = num_warps, A = 32*W):
  //   n = A*m0 + 16*W*a + 16*w + 8*b + r,  k = 2*k2 + c
  //   -> packed row W*m0 + w, column 64*k2 + 32*a + 4*r + 2*c + b (Ksp*32 columns)
  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], groups = shape[1], out_cols = round_up(groups, kVllmGroupPad) * 32;
    const uint64_t W = num_warps_;
    for (uint64_t n = 0; n < rows; ++n) {
      const uint64_t m0 = n / (32 * W), a = n / (16 * W) % 2, w = n / 16 % W, b = n / 8 % 2, r = n % 8;
      const uint64_t row = (W * m0 + w) * out_cols + 32 * a + 4 * r + b;
      for (uint64_t k = 0; k < groups; ++k) fn(n * groups + k, row + 64 * (k / 2) + 2 * (k % 2));
    }
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override {
    return {round_up(shape[0], 32 * num_warps_) / 32, round_up(shape[1], kVllmGroupPad) * 32};
  }

 private:
  uint64_t num_warps_;
};

}  // namespace moepack::packers
