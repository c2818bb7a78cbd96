// triton_kernels CDNA4MXScaleLayout (= GFX950MXScaleLayout under its older name): the MXFP4
// scale layout of vLLM's OAI Triton MoE on AMD MI350/MI355 (gfx950).
//
// Upstream definition followed:
//   triton-lang/triton : python/triton_kernels/triton_kernels/tensor_details/layout_details/cdna4_scale.py @ v3.5.1
//     (read in the verbatim vendored copy NVIDIA/TensorRT-LLM : triton_kernels/tensor_details/layout_details/cdna4_scale.py @ 295cfebe)
//   triton-lang/triton : python/triton_kernels/triton_kernels/tensor_details/layout_details/gfx950_scale.py @ 57c59ea0
//     (the older class name vLLM tries first; same permutation)
//   vllm-project/vllm : vllm/model_executor/layers/quantization/utils/mxfp4_utils.py `_swizzle_mxfp4` and
//     `should_use_cdna4_mx_scale_swizzle` @ e9d1398d9 (ROCm: values stay Strided; this scale layout
//      only on gfx950 with TP <= 2; no scale-group padding on ROCm)
// vLLM builds ROCm against ROCm/triton @ 0f380657 (release/internal/3.6.x); the CUDA pin is
// v3.5.1. The name carries v3.5.1 because that is the copy read; the 3.6-line class computes
// the same permutation (layouts-fp4.md 3.6).
//
// The layout gets the [E, Ks, N] transposed view, transposes it back to [E, N, Ks] and views
// it [E, N/32, 2, 16, Ks/8, 2, 4]; storage per expert [N/32, 32*Ks], no padding:
//   n = 32*n0 + 16*a + b   (a in 0..1, b in 0..15)      k = 8*k0 + 4*c + d   (c in 0..1, d in 0..3)
//   out[n0][256*k0 + 64*d + 4*b + 2*c + a] = S[n][k]
//
// Drawn example N = 32, Ks = 8 (one 32 x 8 tile = 256 bytes), first bytes of the storage:
//   offset:  0      1       2      3       4      5       6      7       8   ...  64
//   (n,k):  (0,0) (16,0)  (0,4) (16,4)  (1,0) (17,0)  (1,4) (17,4)  (2,0) ...  (0,1)
//
// Canonical input: one expert's E8M0 scale bytes [N, K/32]; requires N % 32 == 0 and
// (K/32) % 8 == 0 (the reshape fails otherwise; vLLM pads I and H to 256 on gfx950 so it holds).
#pragma once

#include "packers/index_map.h"

namespace moepack::packers {

class TritonCdna4MXScaleLayout final : public IndexMap<TritonCdna4MXScaleLayout> {
 public:
  static constexpr uint64_t kRowBlock = 32;   // NON_K_PRESHUFFLE_BLOCK_SIZE
  static constexpr uint64_t kGroupBlock = 8;  // the Ks/8 axis of the view

  std::string name() const override;
  DType packed_dtype(DType canonical) const override { return canonical; }
  Accepts accepts() const override;

  // Index map: n = 32*n0 + 16*a + b, k = 8*k0 + 4*c + d -> packed row n0, column
  // 256*k0 + 64*d + 4*b + 2*c + a (Ks*32 columns).
  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t groups = shape[1];
    for (uint64_t n = 0; n < shape[0]; ++n) {
      const uint64_t row = (n / 32) * groups * 32 + 4 * (n % 16) + n / 16 % 2;
      for (uint64_t k = 0; k < groups; ++k) fn(n * groups + k, row + 256 * (k / 8) + 64 * (k % 4) + 2 * (k / 4 % 2));
    }
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override {
    return {shape[0] / kRowBlock, shape[1] * kRowBlock};
  }
};

}  // namespace moepack::packers
