// Two whole-tensor rearrangements vLLM applies to unquantized (BF16/FP16) MoE weights.
//
// 1. vllm.swap_w13_to_w31 — FLASHINFER_CUTLASS, gated activations only:
//    vllm-project/vllm : vllm/model_executor/layers/fused_moe/oracle/unquantized.py
//    `convert_to_unquantized_kernel_format` -> vllm/model_executor/layers/quantization/utils/
//    flashinfer_utils.py `swap_w13_to_w31` @ e9d1398d9 (reshape(-1, 2, rows/2, K).flip(1)):
//    one expert's [w1; w3] rows become [w3; w1].
//      index map (N rows): canonical row r -> packed row (r + N/2) % N
//      drawn, N = 4 (I = 2):  canonical g0 g1 u0 u1  ->  packed u0 u1 g0 g1
//    (common.h's RowOrder::swap_halves, for whole rows of any dtype.)
//
// 2. vllm.xpu_transpose — XPU: `UnquantizedFusedMoEMethod.process_weights_after_loading`,
//    XPU branch (vllm/model_executor/layers/fused_moe/unquantized_fused_moe_method.py
//    @ e9d1398d9): `w.transpose(-1, -2).contiguous()` for w13 and w2, so each expert's [N, K]
//    is stored [K, N].
//    The same transpose is what the XPU backend of the quantized families holds:
//    experts/xpu_moe.py `prepare_fp8_moe_layer_for_xpu` (FP8 and MXFP8 weights, and their scales
//    when the stacked scale is 3-D: per-channel [E, N, 1], 128x128 blocks, MXFP8 E8M0 groups) and
//    int_wna16.py `_process_weights_xpu` (the WNA16 group scales [G, N] -> [N, G]).
//      index map: element (n, k) of [N, K] -> element k*N + n of [K, N]
//      drawn, [2, 3] = a b c / d e f  ->  [3, 2] = a d / b e / c f
//
// Canonical input: one expert's 2-D weight, any whole-byte dtype (elements move whole).
#pragma once

#include "packers/index_map.h"

namespace moepack::packers {

class SwapW13ToW31Layout final : public IndexMap<SwapW13ToW31Layout> {
 public:
  std::string name() const override;
  DType packed_dtype(DType canonical) const override { return canonical; }
  Accepts accepts() const override;
  Units units(DType canonical) const override;
  void pack(const TensorView& canonical, std::span<uint8_t> packed) const override;  // bulk: row copies

  static uint64_t packed_row(uint64_t rows, uint64_t r) { return (r + rows / 2) % rows; }

  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], cols = shape[1];
    for (uint64_t r = 0; r < rows; ++r)
      for (uint64_t c = 0; c < cols; ++c) fn(r * cols + c, packed_row(rows, r) * cols + c);
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape[0], shape[1]}; }
};

// The same transpose serves the Triton WNA16 scales ([G, N] -> [N, G], int_wna16.py TRITON
// branch) and MoeWNA16's scales (moe_wna16.py's weight loader: `loaded_weight.T`, each group
// repeated group_size_div_factor times before the rank's slice, which the loader does:
// lib/convert/wna16_marlin.h), each registered under its own name.
enum class TransposeUse { xpu_weight, wna16_triton_scales, moe_wna16_scales };

class XpuTransposeLayout final : public IndexMap<XpuTransposeLayout> {
 public:
  explicit XpuTransposeLayout(TransposeUse use = TransposeUse::xpu_weight) : use_(use) {}
  std::string name() const override;
  DType packed_dtype(DType canonical) const override { return canonical; }
  Accepts accepts() const override;
  Units units(DType canonical) const override;

  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], cols = shape[1];
    for (uint64_t n = 0; n < rows; ++n)
      for (uint64_t k = 0; k < cols; ++k) fn(n * cols + k, k * rows + n);
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape[1], shape[0]}; }

 private:
  TransposeUse use_;
};

}  // namespace moepack::packers
