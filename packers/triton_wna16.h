// vLLM's TRITON backend for GPTQ / compressed-tensors WNA16 MoE weights: the loader's K-first
// int32 parameters turned N-first bytes for fused_moe_kernel_gptq_awq.
//
// Upstream definition followed:
//   vllm-project/vllm @ e9d1398d9 : vllm/model_executor/layers/fused_moe/oracle/int_wna16.py
//   `convert_to_wna16_moe_kernel_format`, TRITON branch for AutoGPTQConfig / QuantizationArgs:
//     weights  w.transpose(1, 2).contiguous().view(torch.uint8)     [K/pf, N] I32 -> [N, 4K/pf] U8
//     scales   s.transpose(1, 2).contiguous()                       [G, N] -> [N, G] (registered
//              as "vllm.wna16_triton_transpose", the XPU transpose's index map)
//     zeros    z.transpose(1, 2).contiguous().view(uint8).reshape(N/pf, G, 4).permute(0, 2, 1)
//              .reshape(4N/pf, G)                                    [G, N/pf] I32 -> [4N/pf, G] U8
//   g_idx and the sort indices become None (dropped); AutoAWQ takes another branch (not here).
//
// Weights, index map in bytes: byte b of word (r, n) -> byte (n, 4r + b).
//   drawn, [K/pf = 2, N = 3] words w(r,n) = bytes w(r,n).0..3:
//     canonical  w(0,0) w(0,1) w(0,2) / w(1,0) w(1,1) w(1,2)
//     packed     row n=0: w(0,0).0-3 w(1,0).0-3 | n=1: w(0,1).. w(1,1).. | n=2: w(0,2).. w(1,2)..
// Zero points, index map in bytes: byte b of word (g, p) -> byte (4p + b, g).
//   drawn, [G = 2, N/pf = 1]: words z(0,0), z(1,0) -> rows 0..3 = [z(0,0).b, z(1,0).b] for b = 0..3
//   (row 4p + b holds, per group, the byte with the two int4 zero points of columns 8p + 2b, +1).
//
// The XPU backend's weights are the same bytes: int_wna16.py `_process_weights_xpu` @ e9d1398d9
// does w.transpose(1, 2).contiguous().view(torch.uint8) for GPTQ / compressed-tensors int4 (two
// nibbles per byte, the lower K index in the low nibble, as the little-endian view gives them);
// registered under its own name, vllm.xpu_wna16_weight.
//
// Canonical input: one expert's loaded I32 param (2-D).
#pragma once

#include "packers/index_map.h"

namespace moepack::packers {

enum class Wna16WeightUse { triton, xpu };

class TritonWna16WeightLayout final : public IndexMap<TritonWna16WeightLayout> {
 public:
  explicit TritonWna16WeightLayout(Wna16WeightUse use = Wna16WeightUse::triton) : use_(use) {}
  std::string name() const override;
  DType packed_dtype(DType) const override { return DType::U8; }
  Accepts accepts() const override;
  Units units(DType) const override { return {.canonical_bits = 8, .packed_bits = 8}; }

  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], cols = shape[1];
    for (uint64_t r = 0; r < rows; ++r)
      for (uint64_t n = 0; n < cols; ++n)
        for (uint64_t b = 0; b < 4; ++b) fn((r * cols + n) * 4 + b, n * rows * 4 + r * 4 + b);
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape[1], 4 * shape[0]}; }

 private:
  Wna16WeightUse use_;
};

class TritonWna16ZeroPointLayout final : public IndexMap<TritonWna16ZeroPointLayout> {
 public:
  std::string name() const override;
  DType packed_dtype(DType) const override { return DType::U8; }
  Accepts accepts() const override;
  Units units(DType) const override { return {.canonical_bits = 8, .packed_bits = 8}; }

  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t groups = shape[0], words = shape[1];
    for (uint64_t g = 0; g < groups; ++g)
      for (uint64_t p = 0; p < words; ++p)
        for (uint64_t b = 0; b < 4; ++b) fn((g * words + p) * 4 + b, (4 * p + b) * groups + g);
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {4 * shape[1], shape[0]}; }
};

}  // namespace moepack::packers
