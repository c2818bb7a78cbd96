// vLLM's `bias.to(torch.float32)` for MXFP4 MoE biases: a value-preserving widening cast.
//
// Upstream definition followed:
//   vllm-project/vllm : vllm/model_executor/layers/fused_moe/oracle/mxfp4.py @ e9d1398d9
//     `convert_gpt_oss_weight_to_mxfp4_moe_kernel_format`, CPU branch (`w13_bias.data.to(torch.float32)`,
//     same for w2) and the TRITON / AITER branches of both converters (cast before `shuffle_weight`).
//   The checkpoint bias (gpt-oss: BF16 `gate_up_proj_bias` [E, 2I], `down_proj_bias` [E, H]) is
//   loaded into a parameter of the model dtype; the kernel wants fp32.
//
// Index map: element i -> 4-byte little-endian float at byte 4*i; values widen exactly
// (BF16 and F16 are subsets of F32), so unpack narrows back without loss for anything pack made.
//
// Drawn example, BF16 bias [3] = {1.0, -2.5, 0.0}:
//     canonical bytes  80 3F | 20 C0 | 00 00
//     packed bytes     00 00 80 3F | 00 00 20 C0 | 00 00 00 00
//
// Canonical input: one expert's bias [N] (1-D) of BF16, F16 or F32, N as padded by the backend.
//
// vllm.scalar_f32 is the same cast for a per-expert scalar parameter (shape []), the static
// input scales that a layer keeps as [E] fp32 (Quark w_mxfp4_a_fp8 on AITER_MXFP4_FP8: the
// parameter is created fp32 and the checkpoint value copied into it, widened if narrower).
//   BF16 scalar 0.5 = 00 3F  ->  00 00 00 3F
#pragma once

#include "packers/index_map.h"

namespace moepack::packers {

// Units are elements, cast on the way (Units::converts). Narrowing back with
// round-to-nearest-even is exact for every value pack produced.
class BiasToF32Layout final : public IndexMap<BiasToF32Layout> {
 public:
  std::string name() const override { return std::string(layout_id::bias_f32); }
  DType packed_dtype(DType) const override { return DType::F32; }
  Accepts accepts() const override;
  Units units(DType canonical) const override;

  // Index map: element i -> element i.
  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    for (uint64_t i = 0; i < shape[0]; ++i) fn(i, i);
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape[0]}; }
};

class ScalarToF32Layout final : public IndexMap<ScalarToF32Layout> {
 public:
  std::string name() const override { return std::string(layout_id::scalar_f32); }
  DType packed_dtype(DType) const override { return DType::F32; }
  Accepts accepts() const override;
  Units units(DType canonical) const override;

  // Index map: the one element stays.
  template <class Fn>
  void visit(DType, std::span<const uint64_t>, Fn&& fn) const {
    fn(0, 0);
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t>) const override { return {}; }
};

}  // namespace moepack::packers
