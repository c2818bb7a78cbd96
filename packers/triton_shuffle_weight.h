// vLLM's generic-converter `shuffle_weight` for the TRITON MXFP4 backend: split the LAST axis
// in two halves and interleave them element by element.
//
// Upstream definition followed:
//   vllm-project/vllm : vllm/model_executor/layers/fused_moe/oracle/mxfp4.py
//     `convert_weight_to_mxfp4_moe_kernel_format`, the local `shuffle_weight` @ e9d1398d9
//   Applied only there (Mxfp4MoEMethod / online MXFP4, backend TRITON — not TRITON_UNFUSED, not
//   the gpt-oss converter), to w13_weight, w13_weight_scale and the f32 w13_bias, BEFORE
//   `_swizzle_mxfp4`. The last axis of w13_weight [E, 2I, H/2] is the packed-K byte axis, so it
//   moves whole bytes along K (the scale's last axis is the K/32 group axis and the bias's the
//   2I row axis); that is what the code does at the reference and it is reproduced as is.
//
// Index map along the last axis (n elements, n even, h = n/2): out[2j] = in[j], out[2j+1] = in[h+j]
//   in[c] -> out[c < h ? 2c : 2(c-h)+1]
//
// Drawn example, last axis n = 6:
//     in   a0 a1 a2 | b0 b1 b2
//     out  a0 b0 a1 b1 a2 b2
//
// Canonical input: one expert's tensor, 1-D ([2I] bias) or 2-D ([N, C] weight/scale), any
// whole-byte dtype; the last axis must be even (torch.stack of unequal halves fails upstream).
// The element size comes from the dtype (U8: bytes; F32 bias: 4-byte floats).
#pragma once

#include "packers/index_map.h"

namespace moepack::packers {

class TritonShuffleWeightLayout final : public IndexMap<TritonShuffleWeightLayout> {
 public:
  std::string name() const override;
  DType packed_dtype(DType canonical) const override { return canonical; }
  Accepts accepts() const override;
  Units units(DType canonical) const override;

  // Index map along the last axis: element index c (of n) -> its position after the shuffle.
  static uint64_t shuffled_index(uint64_t n, uint64_t c) { return c < n / 2 ? 2 * c : 2 * (c - n / 2) + 1; }

  // Units are elements; every leading row is shuffled alike.
  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape.size() == 2 ? shape[0] : 1, length = shape.back();
    for (uint64_t r = 0; r < rows; ++r)
      for (uint64_t c = 0; c < length; ++c) fn(r * length + c, r * length + shuffled_index(length, c));
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape.begin(), shape.end()}; }
};

}  // namespace moepack::packers
