// NVFP4 MoE: the values vLLM computes from a layer's two-level scales in
// process_weights_after_loading, as per-layer reductions (one F32 tensor each) and value stages
// (per-element changes of the block scales before their layout). The index maps are packers
// (packers/nvfp4_layouts.h, flashinfer_trtllm_mxfp4.h, marlin_mxfp4.h); these are the values.
//
// Upstream (vllm-project/vllm @ e9d1398d9):
//   quantization/modelopt.py `ModelOptNvFp4FusedMoE.process_weights_after_loading` and
//   compressed_tensors/compressed_tensors_moe/compressed_tensors_moe_w4a4_nvfp4.py (same, from
//   reciprocals: w13_scale_2 = 1 / weight_global_scale[:, 0], a13 = 1 / input_global_scale, ...);
//   fused_moe/oracle/nvfp4.py `convert_to_nvfp4_moe_kernel_format`;
//   quantization/utils/flashinfer_fp4_moe.py `prepare_nvfp4_moe_layer_for_fi_or_cutlass`,
//   `prepare_nvfp4_moe_layer_for_flashinfer_cutedsl`; quant_utils.py `amax_for_moe_activation_quant`;
//   the experts' own process_weights_after_loading: experts/{trtllm_nvfp4_moe,flashinfer_cutlass_moe,
//   cutlass_moe,flashinfer_cutedsl_moe,flashinfer_cutedsl_batched_moe,flashinfer_b12x_moe}.py;
//   quantization/utils/marlin_utils_fp4.py `prepare_nvfp4_moe_layer_for_marlin`.
//
// Notation, per expert e, all in the ModelOpt convention (multipliers; compressed-tensors'
// divisors are inverted in fp32 first, as vLLM does):
//   s13[e] = w13 weight_scale_2 of the GATE half ([:, 0]; ERRATA 2: the up half's is ignored, its
//            block scales untouched; vLLM only warns when they differ)
//   s2[e]  = w2 weight_scale_2;   a13[e, h] = w13 input scale (h = gate, up);   a2[e] = w2 input scale
//   A13    = max over a13 (all experts of the layer for ModelOpt, whose FlashInfer backends
//            allocate the input scales for every expert; the rank's experts for compressed-tensors
//            unless EPLB all-reduces them); A2 likewise. NaN propagates, as torch.max.
// Every product and quotient below is one fp32 operation, rounded as torch rounds it.
//
//   id                                                        value                       backends
//   vllm.nvfp4_weight_scale_2(w13,times=none)                 s13[e]                      EMULATION
//   vllm.nvfp4_weight_scale_2(w13,times=input_global_max_all) s13[e] * A13                TRTLLM, FI CUTLASS, CuteDSL(+batched)
//   vllm.nvfp4_weight_scale_2(w13,times=input_expert_max)     s13[e] * max(a13[e,0], a13[e,1])   VLLM_CUTLASS
//   vllm.nvfp4_input_scale(w13,global_max_all)                A13 for every expert        FlashInfer backends
//   vllm.nvfp4_input_scale(w13,expert_max)                    max(a13[e,0], a13[e,1])     VLLM_CUTLASS
//   vllm.nvfp4_inverse_input_scale_max(w13)                   1 / max over the rank (0-dim)   EMULATION
//   vllm.nvfp4_ones(f32)                                      1.0 per expert              b12x weight_scale_2, fc2 input scale
//   vllm.nvfp4_marlin_global_scale(w13,params_dtype=bf16)     s13[e] * 2^119 / F13        MARLIN (fp16: 2^7, F = 1)
//   vllm.trtllm_nvfp4_g1_scale_c(input=...,gated=1)           (s13[e] * A13) * (1 / A2)   TRTLLM (gated=0: 1 / A2)
//   vllm.trtllm_nvfp4_gemm1(clamp_limit,input=...)            V / (s13[e] * A13)          TRTLLM, V = swiglu_limit (beta alike)
// (w2 variants read s2, a2; `_rank` in place of `_all` restricts the maxima to the rank.)
//
// Value stages (the block scales, before their layout):
//   vllm.nvfp4_bake_weight_scale_2(w13)   e4m3(float(b) * s13[e])   FLASHINFER_B12X; a result that
//        would overflow E4M3 (> 464, NaN in torch's cast) is refused, not written as NaN
//   vllm.nvfp4_marlin_scale_factor(w13,params_dtype=bf16)   e4m3(b * F13), then 0 below 2^-6
//        F13 = 2^floor(log2(448*128 / (128 * largest positive block scale of the rank's w13)))
//        (`_nvfp4_compute_scale_factor`, shared by all experts; 1 for fp16 models); Marlin's
//        S0E5M3 keeps no scale below 2^-6 (2 after its 2^7), negatives included.
// Example (a sample expert): s13 = 2^-10, A13 = 2^-4, A2 = 2^-3: TRTLLM w13 weight_scale_2 = 2^-14,
//   input_scale = 2^-4, g1_scale_c = 2^-14 * 2^3 = 2^-11.
#pragma once

#include <string_view>

#include "lib/convert/reductions.h"

namespace moepack::convert {

const LayerReduction* find_nvfp4_reduction(std::string_view id);
const ValueStage* find_nvfp4_value_stage(std::string_view id);

// The shared Marlin NVFP4 factor of one rank's block scales (exposed for tests): the largest
// positive E4M3 value m over `scales` gives 2^floor(log2(448 / m)), or 1 when there is none or
// m is 448.
float marlin_nvfp4_scale_factor(const std::vector<OwnedTensor>& scales);

}  // namespace moepack::convert
