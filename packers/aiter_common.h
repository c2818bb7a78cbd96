// Shared pieces of the AITER (ROCm) MXFP4 packers: the reference versions, and which packer
// serves which vLLM path.
//
// vLLM e9d1398d9 builds its ROCm image with AITER at tag v0.1.19 (docker/Dockerfile.rocm_base,
// AITER_BRANCH); the shuffles it calls there (aiter/ops/shuffle.py `shuffle_weight`,
// `shuffle_weight_a16w4`, `shuffle_scale`, `shuffle_scale_a16w4`; aiter/utility/fp4_utils.py
// `e8m0_shuffle`) are pure reshape/permute programs, reproduced here as index maps. All of them
// keep the expert axis outermost, so a packed [E, ...] parameter is the per-expert slabs
// concatenated, except for e8m0_shuffle's row padding of the flattened [E*N, G] tensor to 256
// rows, which the packer refuses rather than emulate (aiter_shuffle_scale.h).
//
// Which vLLM path uses which layout id (vllm-project/vllm :
// vllm/model_executor/layers/fused_moe/oracle/mxfp4.py @ e9d1398d9; "SW" =
// "aiter.shuffle_weight(layout=16x16,", "SS" = "aiter.shuffle_scale(", all ending ",v0.1.19)"):
//
//   backend / converter               tensor        layout id (pipeline stages joined by " | ")
//   AITER_MXFP4_BF16, gpt-oss         w13_weight    vllm.aiter_deinterleave_gate_up_rows(e9d1398d9) | SW is_guinterleave=1,gate_up=1
//   (GptOssMxfp4MoEMethod,            w2_weight     SW is_guinterleave=1,gate_up=0
//    QuarkOCP_MX W4A16)               w13 scale     vllm.aiter_deinterleave_gate_up_rows(e9d1398d9) | SS is_guinterleave=1,gate_up=1
//                                     w2 scale      SS is_guinterleave=1,gate_up=0
//                                     w13_bias      vllm.bias_f32 | vllm.aiter_deinterleave_gate_up_rows(e9d1398d9)
//                                     w2_bias       vllm.bias_f32
//   AITER_MXFP4_BF16, generic         w13_weight    SW is_guinterleave=1,gate_up=1
//   (Mxfp4MoEMethod, not gfx1250,     w2_weight     SW is_guinterleave=1,gate_up=0
//    activation not SITU)             w13 scale     SS is_guinterleave=1,gate_up=1
//                                     w2 scale      SS is_guinterleave=1,gate_up=0
//                                     biases        vllm.bias_f32
//   AITER_MXFP4_BF16, generic, SITU   w13_weight    SW is_guinterleave=1,gate_up=G       G = VLLM_ROCM_USE_AITER_MOE_SITUV2_A8W4
//                                     w2_weight     SW is_guinterleave=1,gate_up=0
//                                     w13 scale     torch.view(float8_e8m0fnu) | SS is_guinterleave=1,gate_up=G
//                                     w2 scale      torch.view(float8_e8m0fnu) | aiter.e8m0_shuffle(param=2d,v0.1.19)
//                                     biases        vllm.bias_f32
//   AITER_MXFP4_MXFP4 (W4A4, both     w13/w2        aiter.shuffle_weight(layout=16x16,v0.1.19)   (`shuffle_weights`, rows as loaded)
//   converters: the generic one       scales        aiter.e8m0_shuffle(param=3d,v0.1.19)
//   delegates to the gpt-oss one)     biases        vllm.bias_f32
//   AITER_MXFP4_FP8 (W4A8)            all           triton_kernels layouts (`_swizzle_mxfp4`), nothing AITER-specific
//
// AITER_MXFP4_BF16 on gfx1250 takes the triton_kernels path of the generic converter.
#pragma once

#include <string_view>

namespace moepack::packers::aiter_detail {

inline constexpr std::string_view kAiterVersion = "v0.1.19";
inline constexpr std::string_view kVllmCommit = "e9d1398d9";

}  // namespace moepack::packers::aiter_detail
