// vLLM's own CPU grouped-GEMM weight prepacks for MoE experts, one expert's [O, K] weight
// regrouped in blocks of rows whose columns are cut into short runs:
//   `cpu_prepack_moe_weight(weight, isa)`       unquantized (BF16/FP16/FP32), isa vec, amx, neon, vsx
//   `cpu_prepack_moe_weight_int8(weight, isa)`  INT8 W8A8 on Arm, isa neon
//
// Upstream definitions followed (vllm-project/vllm @ e9d1398d9):
//   vllm/model_executor/layers/fused_moe/experts/cpu_moe.py `process_weights_after_loading` of
//     CPUUnquantizedExperts (isa "vec"), X86CPUUnquantizedExperts ("amx"),
//     ArmCPUUnquantizedExperts ("neon") and PowerCPUUnquantizedExperts ("vsx"): the intermediate
//     size is first zero-padded to the class's alignment, lcm(output_alignment,
//     reduction_alignment) = 32, 32, 32, 16 (each w13 half on its own, SWIGLUOAI never; the
//     convert loader does that, docs: ERRATA 18), then w13 [2P, H] and w2 [H, P] are prepacked;
//     ArmCPUExpertsInt8: w13 and w2 through `cpu_prepack_moe_weight_int8(w, "neon")`, the
//     per-channel fp32 scales left as loaded.
//   vllm/_custom_ops.py `cpu_prepack_moe_weight`, `cpu_prepack_moe_weight_int8`:
//     output = torch.empty_like(weight), so the parameter keeps dtype and shape [E, O, K].
//   csrc/cpu/cpu_fused_moe.cpp `prepack_moe_weight` (O % 32 == 0, expert by expert) ->
//     csrc/cpu/micro_gemm/cpu_micro_gemm_vec.hpp  `MicroGemm<VEC>::pack_weight`
//     csrc/cpu/micro_gemm/cpu_micro_gemm_amx.hpp  `MicroGemm<AMX>::pack_weight`  (K % 32 for bf16)
//     csrc/cpu/micro_gemm/cpu_micro_gemm_neon.hpp `MicroGemm<NEON, BFloat16>::pack_weight`
//       (O % NSize = 32, K % 4; every other scalar type's pack_weight raises "NEON BFMMLA
//       MicroGemm only supports bfloat16.")
//     csrc/cpu/micro_gemm/cpu_micro_gemm_vsx.hpp  `MicroGemm<VSX, scalar_t>::pack_weight`
//       (O % NSize = 16, K % 2; one template for every floating type)
//   csrc/cpu/cpu_fused_moe_int8.cpp `prepack_moe_weight_int8` (O % 32 == 0, K % 8) ->
//     csrc/cpu/micro_gemm/cpu_micro_gemm_int8_neon.hpp `MicroGemmINT8<NEON>::pack_weight`
//     (O % NSize = 32, K % 8: smmla's K).
//
// Every pack is the same map with its own block height G and run length C (elements):
//   packed [O/G][K/C][G][C]:  (o, k) -> (o/G)*G*K + (k/C)*(G*C) + (o%G)*C + k%C
//     vec        G 16, C 1                  (element [g][k][o%16])
//     amx        G 16, C 4/sizeof(scalar)   (32-bit words: bf16/f16 pairs, one f32)
//     neon       G  8, C 4 (bf16 only)      (bfmmla tiles: 4 row pairs of 2 rows x 4 elements)
//     vsx        G 16, C 2 (any float)      (xvbf16ger2pp: 2 input columns per output column)
//     neon int8  G  8, C 8 (int8)           (smmla tiles: 4 row pairs of 2 rows x 8 bytes)
// (upstream's neon and int8 loops write, per 8-row group and K step, the row pairs (0,1), (2,3),
// (4,5), (6,7), each as row 2p's run then row 2p+1's: that is rows 0..7 in order.)
//
// Drawn example, vec, O = 32, K = 4 — packed elements of group 0 (rows 0..15):
//   packed 0..15  = W[0][0] W[1][0] ... W[15][0]
//   packed 16..31 = W[0][1] W[1][1] ... W[15][1]      ... packed 64.. = group 1 (rows 16..31)
// Drawn example, amx, O = 32, K = 32 — group 0 words:
//   word 0 = (W[0][0], W[0][1]), word 1 = (W[1][0], W[1][1]), ..., word 15 = (W[15][0], W[15][1]),
//   word 16 = (W[0][2], W[0][3]), ...; group 1 starts at element 16*32 = 512.
// Drawn example, neon, O = 32, K = 8 — group 0 (rows 0..7), elements:
//   packed  0..7  = W[0][0..3] W[1][0..3]       packed  8..15 = W[2][0..3] W[3][0..3]
//   packed 16..23 = W[4][0..3] W[5][0..3]       packed 24..31 = W[6][0..3] W[7][0..3]
//   packed 32..63 = the same rows' columns 4..7; group 1 (rows 8..15) starts at 8*8 = 64.
// Drawn example, vsx, O = 32, K = 4 — group 0 (rows 0..15):
//   packed 0..31  = W[0][0] W[0][1] W[1][0] W[1][1] ... W[15][0] W[15][1]
//   packed 32..63 = W[0][2] W[0][3] W[1][2] W[1][3] ... ; group 1 starts at 16*4 = 64.
// Drawn example, neon int8, O = 32, K = 16 — group 0 (rows 0..7), bytes:
//   packed 0..63   = W[0][0..7] W[1][0..7] ... W[7][0..7]
//   packed 64..127 = W[0][8..15] ... W[7][8..15]; group 1 starts at 8*16 = 128.
//
// Canonical input: one expert's weight [O, K] as the layer holds it after the padding: BF16,
// F16 or F32 (VLLM_DISPATCH_FLOATING_TYPES) for vec, amx and vsx, BF16 for neon, I8 for the int8
// pack. Refused: what the TORCH_CHECKs above reject. Biases and scales are not prepacked: the
// kernels read them as loaded (w13_bias padded like w13).
#pragma once

#include "packers/index_map.h"

namespace moepack::packers {

enum class CpuMoeIsa { vec, amx, neon, vsx };

// Packed element index of canonical element (o, k) of an expert with `cols` columns, in blocks
// of `group` rows and runs of `run` elements: [O/group][K/run][group][run].
inline uint64_t cpu_moe_packed_index(uint64_t o, uint64_t k, uint64_t cols, uint64_t group, uint64_t run) {
  return (o / group) * group * cols + (k / run) * (group * run) + (o % group) * run + k % run;
}

class CpuPrepackMoeWeightLayout final : public IndexMap<CpuPrepackMoeWeightLayout> {
 public:
  explicit CpuPrepackMoeWeightLayout(CpuMoeIsa isa) : isa_(isa) {}

  std::string name() const override;
  DType packed_dtype(DType canonical) const override { return canonical; }
  Accepts accepts() const override;
  Units units(DType canonical) const override;

  // Rows per block (G) and elements per run (C) of `dtype`.
  uint64_t group_rows() const { return isa_ == CpuMoeIsa::neon ? 8 : 16; }
  uint64_t run_length(DType t) const {
    switch (isa_) {
      case CpuMoeIsa::vec: return 1;
      case CpuMoeIsa::amx: return 4 / static_cast<uint64_t>(dtype_bits(t) / 8);
      case CpuMoeIsa::neon: return 4;
      case CpuMoeIsa::vsx: return 2;
    }
    return 1;
  }

  // Units are elements.
  template <class Fn>
  void visit(DType dtype, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], cols = shape[1], group = group_rows(), run = run_length(dtype);
    for (uint64_t o = 0; o < rows; ++o)
      for (uint64_t k = 0; k < cols; ++k) fn(o * cols + k, cpu_moe_packed_index(o, k, cols, group, run));
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape[0], shape[1]}; }

 private:
  CpuMoeIsa isa_;
};

// `cpu_prepack_moe_weight_int8(weight, "neon")`: 8-row blocks of 8-byte runs (G 8, C 8).
class CpuPrepackMoeWeightInt8Layout final : public IndexMap<CpuPrepackMoeWeightInt8Layout> {
 public:
  static constexpr uint64_t kGroupRows = 8;
  static constexpr uint64_t kRun = 8;

  std::string name() const override;
  DType packed_dtype(DType canonical) const override { return canonical; }
  Accepts accepts() const override;

  // Units are bytes.
  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], cols = shape[1];
    for (uint64_t o = 0; o < rows; ++o)
      for (uint64_t k = 0; k < cols; ++k) fn(o * cols + k, cpu_moe_packed_index(o, k, cols, kGroupRows, kRun));
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape[0], shape[1]}; }
};

}  // namespace moepack::packers
