// The layout of a tensor the backend keeps as loaded: no transform at all.
//
//   canonical [N, C] (any dtype)  ──►  packed [N, C], same bytes
//
// vLLM keeps the loaded parameter unchanged for several backends (DeepGEMM MXFP4 weights, the
// CUTLASS W4A4 weights, XPU, EMULATION, b12x, the gpt-oss w2 bias on FlashInfer CUTLASS); the
// artifact still names the layout so that every packed tensor has one.
// (vllm-project/vllm : vllm/model_executor/layers/fused_moe/oracle/mxfp4.py @ e9d1398d9.)
#pragma once

#include "packers/layout.h"

namespace moepack::packers {

class UnchangedLayout final : public Layout {
 public:
  std::string name() const override { return "vllm.unchanged"; }
  DType packed_dtype(DType canonical) const override { return canonical; }
  std::vector<uint64_t> packed_shape(std::span<const uint64_t> canonical_shape) const override {
    return {canonical_shape.begin(), canonical_shape.end()};
  }
  void pack(const TensorView& canonical, std::span<uint8_t> packed) const override;
  void unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const override;
};

}  // namespace moepack::packers
