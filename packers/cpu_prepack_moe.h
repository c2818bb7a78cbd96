// vLLM's own CPU grouped-GEMM weight prepack for unquantized (BF16/FP16/FP32) MoE experts:
// `cpu_prepack_moe_weight(weight, isa)`, one expert's [O, K] weight regrouped in 16-row groups.
//
// Upstream definitions followed (vllm-project/vllm @ e9d1398d9):
//   vllm/model_executor/layers/fused_moe/experts/cpu_moe.py: CPUUnquantizedExperts (isa "vec")
//     and X86CPUUnquantizedExperts (isa "amx") `process_weights_after_loading`: the intermediate
//     size is first zero-padded to a multiple of 32 (each w13 half on its own; the convert
//     loader does that, docs: ERRATA 18), then w13 [2P, H] and w2 [H, P] are both prepacked.
//   vllm/_custom_ops.py `cpu_prepack_moe_weight`: output = torch.empty_like(weight), so the
//     parameter keeps dtype and shape [E, O, K]; only the bytes move.
//   csrc/cpu/cpu_fused_moe.cpp `prepack_moe_weight` (O % 32 == 0, expert by expert) ->
//     csrc/cpu/micro_gemm/cpu_micro_gemm_vec.hpp `MicroGemm<VEC>::pack_weight` and
//     csrc/cpu/micro_gemm/cpu_micro_gemm_amx.hpp `MicroGemm<AMX>::pack_weight` (K % 32 == 0
//     for bf16: 16 words of 4 bytes).
//
// Index maps (one expert, element (o, k) of [O, K] -> packed element index):
//   vec  [O/16][K][16]         (o/16)*16K + k*16 + o%16
//   amx  [O/16][K/2][16][2]    (o/16)*16K + (k/2)*32 + (o%16)*2 + k%2      (bf16, f16)
//        (the 32-bit word [g][k/2][o%16] holds the pair W[o][k & ~1], W[o][k | 1]; an F32
//        weight has one element per word, which is the vec map)
//
// Drawn example, O = 32, K = 4 (vec) — packed elements of group 0 (rows 0..15):
//   packed 0..15  = W[0][0] W[1][0] ... W[15][0]
//   packed 16..31 = W[0][1] W[1][1] ... W[15][1]      ... packed 64.. = group 1 (rows 16..31)
// Drawn example, amx, O = 32, K = 32 — group 0 words:
//   word 0 = (W[0][0], W[0][1]), word 1 = (W[1][0], W[1][1]), ..., word 15 = (W[15][0], W[15][1]),
//   word 16 = (W[0][2], W[0][3]), ...; group 1 starts at element 16*32 = 512.
//
// Canonical input: one expert's weight [O, K] of BF16, F16 or F32 (VLLM_DISPATCH_FLOATING_TYPES;
// the oracle gives X86CPUUnquantizedExperts bf16 only) as the layer holds it after the padding.
// Refused: O % 32 (prepack_moe_weight), amx K % 32 (pack_weight's 16 words of bf16 pairs).
// Biases are not prepacked: the kernel reads them as loaded (w13_bias padded like w13).
#pragma once

#include "packers/index_map.h"

namespace moepack::packers {

enum class CpuMoeIsa { vec, amx };

class CpuPrepackMoeWeightLayout final : public IndexMap<CpuPrepackMoeWeightLayout> {
 public:
  static constexpr uint64_t kGroupRows = 16;

  explicit CpuPrepackMoeWeightLayout(CpuMoeIsa isa) : isa_(isa) {}

  std::string name() const override;
  DType packed_dtype(DType canonical) const override { return canonical; }
  Accepts accepts() const override;
  Units units(DType canonical) const override;

  // Elements per 32-bit AMX word (4 / sizeof(scalar_t)); vec packs single elements.
  uint64_t per_word(DType t) const { return isa_ == CpuMoeIsa::vec ? 1 : 4 / static_cast<uint64_t>(dtype_bits(t) / 8); }

  // Packed element index of canonical element (o, k) of an expert with K columns, `per`
  // elements to a word: [O/16][K/per][16][per].
  static uint64_t packed_index(uint64_t o, uint64_t k, uint64_t cols, uint64_t per) {
    return (o / kGroupRows) * kGroupRows * cols + (k / per) * (per * kGroupRows) + (o % kGroupRows) * per + k % per;
  }

  // Units are elements.
  template <class Fn>
  void visit(DType dtype, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], cols = shape[1], per = per_word(dtype);
    for (uint64_t o = 0; o < rows; ++o)
      for (uint64_t k = 0; k < cols; ++k) fn(o * cols + k, packed_index(o, k, cols, per));
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape[0], shape[1]}; }

 private:
  CpuMoeIsa isa_;
};

}  // namespace moepack::packers
