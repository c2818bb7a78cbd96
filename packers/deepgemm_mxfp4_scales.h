// DeepGEMM packed-UE8M0 scale layout for MXFP4 MoE weights (vLLM backend DEEPGEMM_MXFP4,
// `DeepGemmFP4Experts`, SM100 family): four E8M0 bytes per int32, MN-major, MN padded to 4.
//
// Upstream definitions followed:
//   vllm-project/vllm : vllm/model_executor/layers/fused_moe/oracle/mxfp4.py
//     `_pack_deepgemm_mxfp4_scales` @ e9d1398d9 (w13: mn = 2I, k = H; w2: mn = H, k = I;
//     quant block (1, 32), num_groups = E) -> vllm/model_executor/layers/quantization/utils/fp8_utils.py
//     `deepgemm_post_process_weight_scale_block` (E8M0 bytes upcast to f32 as `byte << 23`) ->
//     vllm/utils/deep_gemm.py `transform_sf_into_required_layout` (recipe (1, 1, 32), is_sfa False)
//   deepseek-ai/DeepGEMM : csrc/apis/layout.hpp `transform_sf_into_required_layout` (f32, gran_k 32,
//     arch 10 -> `get_mn_major_tma_aligned_packed_ue8m0_tensor`); csrc/jit_kernels/impls/smxx_layout.hpp
//     (the torch fallback and the CUDA launcher); deep_gemm/include/deep_gemm/impls/smxx_layout.cuh
//     `transpose_and_pack_fp32_into_ue8m0`. vLLM e9d1398d9 pins DeepGEMM 8b1392b9
//     (cmake/external_projects/deepgemm.cmake); that commit is not in the stored mirror, the code
//     read is the mirror's head 54e2261 (2026-07-02).
//
// The f32 upcast and `bits >> 23` give back every E8M0 byte unchanged (255 -> +inf -> 255), so the
// transform is a byte permutation. Canonical scale S[MN][SFK] (SFK = K/32). Per expert the kernel
// sees int32 [MN, PK] with strides (1, MNa): PK = ceil(SFK/4), MNa = round_up(MN, 4). Storage:
//
//   word(j, mn) at int32 offset j*MNa + mn  =  S[mn][4j] | S[mn][4j+1] << 8 | S[mn][4j+2] << 16 | S[mn][4j+3] << 24
//   i.e. byte offset of S[mn][c] = 4*((c/4)*MNa + mn) + c%4; bytes with c >= SFK or mn >= MN are 0
//
//   MN=5, SFK=5 (layouts-marlin 4.1, S[r][c] = 127 + r - c):  MNa = 8, PK = 2, words
//     j=0: 7c7d7e7f 7d7e7f80 7e7f8081 7f808182 80818283 0 0 0
//     j=1: 0000007b 0000007c 0000007d 0000007e 0000007f 0 0 0
//   (the CUDA path leaves the padding rows mn >= MN uninitialised; they are written as 0 here.
//    vLLM's MXFP4 sizes are multiples of 128, so no padding occurs in practice.)
//
// Canonical: U8 [MN, K/32] E8M0 bytes of one expert in vLLM's parameter row order (w13 keeps the
// loader's order). Packed: I32 [PK, MNa] — the contiguous buffer under DeepGEMM's MN-major view.
// SM120 (the device vLLM e9d1398d9 picks DEEPGEMM_MXFP4 for) packs the same way: vLLM's pin
// 8b1392b9 is the tip of DeepGEMM's nv_dev branch ("SM120 support", deepgemm.cmake), which no
// stored mirror holds; vllm-project/DeepGEMM's csrc/apis/layout.hpp (92bda0c) sends f32 scales
// with gran_k 32 on `arch_major == 10 or arch_major == 12` to this same packing, where the
// mirror's head (54e2261) has SM100 only. tests/golden/make_deepgemm_mxfp4_golden.py runs vLLM's
// `_pack_deepgemm_mxfp4_scales` over DeepGEMM's compiled kernel for SM100 and SM120
// (golden_deepgemm_scales.safetensors).
#pragma once

#include "packers/index_map.h"

namespace moepack::packers {

// The same packing serves FP8 128x128 block scales on SM100 (recipe (1, 128, 128)): DeepGEMM first
// broadcasts each block row to its 128 rows (`index_select(arange(mn) // 128)`), which
// lib/convert/fp8_deepgemm.h's derivation does, then this packing; registered under that recipe.
enum class DeepGemmRecipe { mxfp4_1x1x32, fp8_1x128x128 };

class DeepGemmMxfp4ScaleLayout final : public IndexMap<DeepGemmMxfp4ScaleLayout> {
 public:
  explicit DeepGemmMxfp4ScaleLayout(DeepGemmRecipe recipe = DeepGemmRecipe::mxfp4_1x1x32) : recipe_(recipe) {}
  std::string name() const override;
  DType packed_dtype(DType) const override { return DType::I32; }
  Accepts accepts() const override { return {}; }

  // Index map: scale (mn, c) -> byte 4*((c/4)*MNa + mn) + c%4 (byte c%4 of int32 word (c/4, mn)).
  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], cols = shape[1], mn_aligned = round_up(rows, 4);
    for (uint64_t mn = 0; mn < rows; ++mn)
      for (uint64_t c = 0; c < cols; ++c) fn(mn * cols + c, 4 * ((c / 4) * mn_aligned + mn) + c % 4);
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override {
    return {round_up(shape[1], 4) / 4, round_up(shape[0], 4)};
  }

 private:
  DeepGemmRecipe recipe_;
};

}  // namespace moepack::packers
