// FP8 128x128 block weights for DeepGEMM: vLLM's UE8M0 requantization of each expert's w13 and
// w2 (the values), as two value stages that compute the same thing from the same block.
//
// Upstream (vllm-project/vllm @ e9d1398d9):
//   fused_moe/oracle/fp8.py `convert_to_fp8_moe_kernel_format` (DEEPGEMM, BATCHED_DEEPGEMM) ->
//   quantization/utils/fp8_utils.py `prepare_fp8_moe_layer_for_deepgemm` ->
//   `deepgemm_post_process_fp8_weight_block(use_e8m0=is_deep_gemm_e8m0_used())`: fp32 scales and
//   E8M0 on -> `requant_weight_ue8m0_inplace(w, s, block_size=(128, 128))` per expert matrix ->
//   vllm/utils/deep_gemm.py `per_block_cast_to_fp8(w_dq, [128, 128], use_ue8m0=True)` and
//   `_ceil_to_ue8m0`; quant_utils.py `get_fp8_min_max` (448 for E4M3FN).
//
// One expert's weight W (E4M3 [M, K]) with fp32 block scales S ([ceil(M/128), ceil(K/128)]),
// per 128 x 128 block b (partial blocks at the edges hold only their real elements; vLLM pads
// with zeros, which change no maximum):
//
//     d[i][j] = fp32(W[i][j]) * S[b]                       fp32 multiply (eager torch)
//     amax    = max(max_b |d|, 1e-4f)                      amax(...).clamp(1e-4)
//     s'[b]   = 2^ceil(log2(amax * fp32(1/448)))           _ceil_to_ue8m0 on amax / 448.0, which
//                                                          Inductor compiles into a multiply by the
//                                                          fp32 constant; log2 rounded to fp32
//     W'[i][j]= e4m3(d[i][j] * (1.0f / s'[b]))             torch's RNE cast (float_to_e4m3)
//
//   deep_gemm.requant_ue8m0(weight,block=128x128,vllm e9d1398d9)   value stage of w13/w2_weight: W'
//   deep_gemm.requant_ue8m0(scale,block=128x128,vllm e9d1398d9)    value stage of the fp32 block
//     scale (weight_scale_inv / weight_scale): s', computed from the same expert's weight
//
// Example (one partial block, W = [[0x38, 0xC0], [0x00, 0x7E]] = [[1, -2], [0, 448]], S = 0.3f):
//   d = [[0.3f, -0.6f], [0, 134.40000915...]] (448 * 0.3f rounds up in fp32), amax * fp32(1/448)
//   rounds to 0.3f, log2 = -1.74 -> ceil -1 -> s' = 0.5, 1/s' = 2;
//   W' = e4m3([[0.6, -1.2], [0, 268.8]]) = [[0x32 (0.625), 0xBA (-1.25)], [0x00, 0x78 (256)]].
// The ceil at a power of two: 2^-9 * (1 + 2^-23) has log2 -9 + 1.7e-7, which rounds to -9 in
// fp32 (the ulp there is 9.5e-7), so s' = 2^-9 as vLLM gives on the CPU, where DeepGEMM's own
// ceil_to_ue8m0 (exponent + 1 for any mantissa) gives 2^-8; 0.125 * (1 + 2^-23) gives 0.25.
//
// vLLM runs this in a torch.compile'd kernel (Inductor, Triton) on the GPU. Measured on an H100
// (torch 2.11, Triton 3.6, the same ops compiled the same way): the generated kernel multiplies
// by fp32(1/448) and takes libdevice log2, ceil and exp2; with that multiply this formula gave the
// same scales and codes for 320 random blocks and 738 blocks whose amax / 448 (or amax / 448
// before rounding) lies within 4 ulps of 2^k for k in [-30, 10]; with a true division 19 of the
// adversarial blocks differed (layouts-marlin-vnni-e8m0.md 6.5 left this open).
//
// Bad input (exit 4, naming tensor and expert): a block scale that is NaN, infinite or not
// positive, a NaN weight code, or a block whose dequantized maximum overflows fp32 (vLLM would
// write a NaN block).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lib/convert/reductions.h"
#include "lib/convert/derivations.h"
#include "lib/core/tensor.h"

namespace moepack::convert {

inline constexpr uint64_t kDeepGemmBlock = 128;

struct Ue8m0Requant {
  std::vector<uint8_t> codes;  // W' [M, K]
  std::vector<float> scales;   // s' [ceil(M/128), ceil(K/128)], powers of two
};

// The requantization of one expert's weight `w` (F8_E4M3 [M, K]) with its fp32 block scales `s`.
// `weight_where` / `scale_where` name the params in bad-input errors.
Ue8m0Requant requant_ue8m0(const OwnedTensor& w, const OwnedTensor& s, const std::string& weight_where, const std::string& scale_where);

// _ceil_to_ue8m0 of a positive finite fp32: 2^ceil(log2(x)).
float ceil_to_ue8m0(float x);

// A block's new scale from its dequantized maximum (before the 1e-4 clamp).
float ue8m0_block_scale(float amax);

const ValueStage* find_fp8_deepgemm_stage(std::string_view id);

// SM100's packed UE8M0 scales (DeepGEMM `transform_sf_into_required_layout`, recipe (1, 128,
// 128), arch 10: index_select of the rows (arange(mn) // 128) then
// get_mn_major_tma_aligned_packed_ue8m0_tensor), one expert at a time from its weight and
// scale: the requantized scales s' broadcast to every row, as UE8M0 bytes (the fp32 bits >> 23),
// then packers/deepgemm_mxfp4_scales.h with recipe 1x128x128. An ExpertDerivation
// (lib/convert/derivations.h) reading both params; it unpacks to the [M, K/128] byte grid.
//   deep_gemm.fp8_block_scales(requant_ue8m0,broadcast_rows,vllm e9d1398d9) | <that packer>
// nullptr when `layout_id` is something else. `role` is the scale param.
std::shared_ptr<const ExpertDerivation> make_deepgemm_sm100_scales(const std::string& role, const std::string& layout_id);

}  // namespace moepack::convert
