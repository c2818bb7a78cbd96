// FP8 weights on Marlin (vLLM's W8A16 fallback where the GPU has no FP8 MMA, e.g. Ampere): the
// weight goes through packers/marlin_fp8.h and the 8-bit Marlin repack; the scales are rebuilt
// per expert from the loaded scale param, which is not an index map of it (a per-tensor scale
// fills a whole row), so they are an ExpertDerivation (lib/convert/derivations.h).
//
// Upstream (vllm-project/vllm @ e9d1398d9): quantization/utils/marlin_utils_fp8.py
// `prepare_fp8_moe_layer_for_marlin` (permute_scales: .to(params dtype), per-tensor and
// per-channel scales broadcast / viewed to channel-wise [1, N], 128x128 blocks to group-wise
// [K/128, N] by repeat_interleave and a crop, the padded intermediate zero-filled, then
// marlin_permute_scales, then `fp8_fused_exponent_bias_into_scales`: times 2^120 for bf16, 2^8
// for fp16, in that dtype).
//
//   vllm.fp8_marlin_scales(kind=tensor|channel|block,params_dtype=BF16|F16,e9d1398d9) | <permute>
//     one expert's [G, N] scales in the params dtype, biased, through
//     vllm.marlin_moe_permute_scales(perm=single|grouped,...). For w13, N = 2P (P the padded
//     intermediate per rank; columns [n, P) of each half are 0), G = 1, or H/128 for blocks;
//     for w2, N = H, G = 1, or P/128 for blocks (groups past n/128 are 0). A per-tensor w13 takes
//     the larger of its two shard scales (vLLM requantized the weight to it).
//   vllm.fp8_marlin_scale_dtype(params_dtype=BF16|F16,e9d1398d9)   the value stage the
//     reference applies to the source scales: each fp32 value rounded to the params dtype.
// Example: per-tensor w13 scales (0.5, 0.75), n = P = 64, bf16: row [0.75 x 128] * 2^120, the
// single permutation of a 128-wide row.
// A scale that overflows once biased (bf16: >= 2^8, fp16: >= 256) is bad input: vLLM would
// write inf.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "formats/checkpoints/checkpoint.h"
#include "lib/convert/reductions.h"
#include "lib/convert/derivations.h"

namespace moepack::convert {

// nullptr when `layout_id` is no FP8 Marlin scale derivation. `role` is the scale param.
std::shared_ptr<const ExpertDerivation> make_fp8_marlin_scales(const std::string& role, const std::string& layout_id);

const ValueStage* find_fp8_marlin_value_stage(std::string_view id);

// The exponent bias Marlin fuses into FP8 scales of this params dtype: 2^120 (BF16), 2^8 (F16).
float fp8_marlin_scale_bias(DType params_dtype);

}  // namespace moepack::convert
