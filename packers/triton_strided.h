// triton_kernels StridedLayout: the identity, optionally preceded by vLLM's SM90 zero padding
// of the scale-group axis.
//
// Upstream definition followed:
//   triton-lang/triton : python/triton_kernels/triton_kernels/tensor_details/layout_details/strided.py @ v3.5.1
//     (swizzle_data returns its input: the storage is the tensor vLLM passed in)
//   vllm-project/vllm : vllm/model_executor/layers/quantization/utils/mxfp4_utils.py `_swizzle_mxfp4` @ e9d1398d9
//     (transposes to [Kb, N] as a VIEW, so the storage stays the contiguous [N, C] buffer; on SM90
//      it first zero-pads the scale's last axis to a multiple of 4, ERRATA 1, even when the
//      layout is Strided because torch < 2.8.1)
//
// Drawn example, k_groups_pad = 4, canonical scale [N=2, Ks=3]:
//
//     canonical            packed [2, 4]
//     s00 s01 s02    ->    s00 s01 s02  0
//     s10 s11 s12          s10 s11 s12  0
//
// Where vLLM uses it (oracle.md 4.1 / layouts-fp4.md 3): values on sm < 90, on SM90 with
// torch < 2.8.1 and on every ROCm device; scales on sm < 90 and ROCm other than gfx950 (no
// pad), and SM90 with torch < 2.8.1 (pad 4).
//
// Canonical input: one expert's [N, C] byte matrix exactly as vLLM's parameter holds it
// (w13/w2 weight U8 [N, K/2], or scale E8M0 bytes [N, K/32]), backend padding of I/H applied.
#pragma once

#include "packers/index_map.h"

namespace moepack::packers {

class TritonStridedLayout final : public IndexMap<TritonStridedLayout> {
 public:
  // k_groups_pad: the last axis is zero-padded to a multiple of this (1 = plain identity).
  explicit TritonStridedLayout(uint64_t k_groups_pad = 1);

  std::string name() const override;
  DType packed_dtype(DType canonical) const override { return canonical; }
  Accepts accepts() const override { return {}; }
  void pack(const TensorView& canonical, std::span<uint8_t> packed) const override;  // bulk: row copies

  // Index map: canonical byte (n, c) -> packed byte n * round_up(C, k_groups_pad) + c.
  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], cols = shape[1], packed_cols = round_up(cols, k_groups_pad_);
    for (uint64_t n = 0; n < rows; ++n)
      for (uint64_t c = 0; c < cols; ++c) fn(n * cols + c, n * packed_cols + c);
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override {
    return {shape[0], round_up(shape[1], k_groups_pad_)};
  }

 private:
  uint64_t k_groups_pad_;
};

}  // namespace moepack::packers
