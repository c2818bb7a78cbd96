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
// vllm/model_executor/layers/fused_moe/oracle/mxfp4.py @ e9d1398d9). Abbreviations, each
// standing for the full registered id:
//   DI      = vllm.aiter_deinterleave_gate_up_rows(e9d1398d9)
//   SW(x)   = aiter.shuffle_weight(layout=16x16,x,v0.1.19)   SW() = ...(layout=16x16,v0.1.19)
//   SS(x)   = aiter.shuffle_scale(x,v0.1.19)
//   E8(p)   = aiter.e8m0_shuffle(param=p,v0.1.19)
//   VIEW    = torch.view(float8_e8m0fnu)            F32 = vllm.bias_f32
//   gu=g    = is_guinterleave=1,gate_up=g
// Stages of one tensor are joined by " | " in application order (registry.h pipelines).
//
//   backend, converter                 tensor      layout id
//   AITER_MXFP4_BF16, gpt-oss          w13_weight  DI | SW(gu=1)
//   (GptOssMxfp4MoEMethod,             w2_weight   SW(gu=0)
//    QuarkOCP_MX_MoEMethod W4A16)      w13 scale   DI | SS(gu=1)
//                                      w2 scale    SS(gu=0)
//                                      w13_bias    F32 | DI
//                                      w2_bias     F32
//   AITER_MXFP4_BF16, generic          w13_weight  SW(gu=1)
//   (Mxfp4MoEMethod, not gfx1250,      w2_weight   SW(gu=0)
//    activation other than SITU)       w13 scale   SS(gu=1)
//                                      w2 scale    SS(gu=0)
//                                      biases      F32
//   AITER_MXFP4_BF16, generic, SITU    w13_weight  SW(gu=G)    G = 1 iff VLLM_ROCM_USE_AITER_MOE_SITUV2_A8W4
//                                      w2_weight   SW(gu=0)        (and AITER fused MoE enabled)
//                                      w13 scale   VIEW | SS(gu=G)
//                                      w2 scale    VIEW | E8(2d)
//                                      biases      F32
//   AITER_MXFP4_MXFP4 (W4A4; the       w13, w2     SW()        (`shuffle_weights`; rows as loaded)
//   generic converter delegates to     scales      E8(3d)
//   the gpt-oss one)                   biases      F32
//   AITER_MXFP4_FP8 (W4A8)             all         triton_kernels layouts (`_swizzle_mxfp4`), nothing AITER's
//
// AITER_MXFP4_BF16 on gfx1250 takes the triton_kernels path of the generic converter.
#pragma once

#include <string_view>

namespace moepack::packers::aiter_detail {

inline constexpr std::string_view kAiterVersion = "v0.1.19";
inline constexpr std::string_view kVllmCommit = "e9d1398d9";

}  // namespace moepack::packers::aiter_detail
