// The layout of a tensor the backend keeps as loaded: no transform at all.
//
//   canonical [N, C] (any dtype)  ──►  packed [N, C], same bytes
//
// vLLM keeps the loaded parameter unchanged for several backends (DeepGEMM MXFP4 weights, the
// CUTLASS W4A4 weights, XPU, EMULATION, b12x, the gpt-oss w2 bias on FlashInfer CUTLASS); the
// artifact still names the layout so that every packed tensor has one.
// (vllm-project/vllm : vllm/model_executor/layers/fused_moe/oracle/mxfp4.py @ e9d1398d9.)
#pragma once

#include "packers/index_map.h"

namespace moepack::packers {

// The body every byte-keeping layout shares (this one, and views that only relabel the dtype,
// such as E8m0ViewLayout): byte i stays byte i, the shape is kept, pack and unpack are one copy.
template <class Derived>
class ByteIdentityLayout : public IndexMap<Derived> {
 public:
  void pack(const TensorView& canonical, std::span<uint8_t> packed) const override {
    this->expect_pack_args(canonical, packed);
    // std::copy, not memcpy: an empty tensor has null data pointers, which memcpy may not take.
    std::copy(canonical.bytes.begin(), canonical.bytes.end(), packed.begin());
  }
  void unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const override {
    this->expect_unpack_args(packed, canonical);
    std::copy(packed.begin(), packed.end(), canonical.bytes.begin());
  }

  // Index map: byte i stays byte i.
  template <class Fn>
  void visit(DType dtype, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t bytes = byte_size(dtype, shape);
    for (uint64_t i = 0; i < bytes; ++i) fn(i, i);
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape.begin(), shape.end()}; }
};

class UnchangedLayout final : public ByteIdentityLayout<UnchangedLayout> {
 public:
  std::string name() const override { return std::string(layout_id::unchanged); }
  DType packed_dtype(DType canonical) const override { return canonical; }
  Accepts accepts() const override;
};

}  // namespace moepack::packers
