// FP8 MoE: what vLLM's FP8 methods do to a layer's params in process_weights_after_loading
// before (or instead of) a kernel layout: load the scales as fp32 parameters, fold a per-tensor
// layer's two w13 scales into one by requantizing, and keep the largest static input scale.
//
// Upstream (vllm-project/vllm @ e9d1398d9):
//   quantization/fp8.py Fp8MoEMethod, compressed_tensors/compressed_tensors_moe/
//   compressed_tensors_moe_w8a8_fp8.py, modelopt.py ModelOptFp8MoEMethod: create_weights (fp32
//   scale parameters: [E, 2] per-tensor w13, [E] w2, [E, 2I, 1] / [E, H, 1] per-channel, [E,
//   2*ceil(I/bn), ceil(H/bk)] / [E, ceil(H/bn), ceil(I/bk)] block) and process_weights_after_loading;
//   fused_moe/routed_experts.py (per-tensor scales are copied whole, per-channel w2 scales whole,
//   block scales narrowed in blocks); quantization/utils/fp8_utils.py
//   `process_fp8_weight_tensor_strategy_moe`; w8a8_utils.py `per_tensor_dequantize`;
//   csrc/quantization/w8a8/fp8/common.cuh `scaled_fp8_conversion` (ops.scaled_fp8_quant with a
//   static scale multiplies by 1.0f / scale, clamps to ±448 and rounds to nearest even).
//
//   vllm.fp8_w13_max_scale(e9d1398d9)           F32 [E_local]: m[e] = max(s1[e], s3[e])
//   vllm.fp8_requant_w13_max_scale(e9d1398d9)   value stage of w13_weight (gated per-tensor
//     layers): every element q of shard h (rows [0, P) gate, [P, 2P) up) becomes
//         d  = fp16(float(q) * fp16(s_h))     per_tensor_dequantize: an fp16 weight times a 0-dim
//                                              fp32 tensor is computed in fp16's type, so torch
//                                              rounds the scale to fp16 first
//         q' = e4m3(clamp(float(d) * (1.0f / m), -448, 448))   (m itself stays fp32)
//     so even the shard whose scale is m can change where fp16 rounds (or flushes) q * s_h.
//   Example: s1 = 0.5, s3 = 2 (m = 2). A gate 1.0 (0x38): d = 0.5, 0.5 * 0.5 = 0.25 -> 0x28;
//   an up 1.0 stays 0x38. With s1 = 0.3f (fp16 0.300048828125), m = 1: 1.375 (0x3B) -> fp16
//   0.41259765625 -> 0x2D (0.40625).
//   vllm.fp8_fi_cutlass_alphas(gemm1,e9d1398d9), (gemm2,...)   F32 [E_local]: FlashInfer CUTLASS
//     with per-tensor weights (oracle/fp8.py `make_fp8_moe_quant_config`) registers
//     g1_alphas = w13_weight_scale * w13_input_scale and g2_alphas = w2_weight_scale *
//     w2_input_scale as layer parameters: the expert's one weight scale (m[e] above for w13) times
//     the layer's input scale (the maximum over the rank's experts, over all of them with EPLB:
//     the `,all_experts` ids), one fp32 multiply. Example: s1 = 0.5, s3 = 2, input scales {0.25,
//     0.75} -> g1_alphas[e] = 2 * 0.75 = 1.5.
//   vllm.fp8_clamp_block_scales(min=1e-10,e9d1398d9)   value stage of FlashInfer's block scales
//     (prepare_fp8_moe_layer_for_fi: clamp_(min=1e-10) against NaN outputs of dead experts on
//     Hopper): every fp32 scale below 1e-10f becomes 1e-10f; NaN stays.
// On E4M3FNUZ devices (MI300; RankGeometry::fp8_fnuz) the loaded scales are already doubled
// (normalize_e4m3fn_to_e4m3fnuz) and w13 holds FNUZ codes: the requantization decodes FNUZ,
// clamps to ±224 (csrc/quantization/utils.cuh: vLLM's FNUZ bound is 0x7E, not torch's 240) and
// encodes with HIP's saturating conversion (amd/quant_utils.cuh cvt_c10; lib/core/codecs.h).
// A scale that is NaN, infinite or not positive is bad input (vLLM would write garbage codes).
#pragma once

#include <string>
#include <string_view>

#include "lib/convert/param_loader.h"
#include "lib/convert/reductions.h"

namespace moepack::convert {

const LayerReduction* find_fp8_reduction(std::string_view id);
const ValueStage* find_fp8_value_stage(std::string_view id);

// Whether `role` is an FP8 scale parameter (weight_scale, weight_scale_inv, input_scale).
bool is_fp8_scale_role(const std::string& role);

// load_expert_param for an FP8 scale (RankGeometry::fp8_scales): one expert's canonical scale
// sliced as vLLM's loader slices it for the rank and widened to fp32.
OwnedTensor load_fp8_scale(const std::string& role, const OwnedTensor& canonical, const RankGeometry& g);

}  // namespace moepack::convert
