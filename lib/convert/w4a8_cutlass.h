// The FP8 scales of vLLM's CUTLASS W4A8 MoE (compressed-tensors int4 group-128 weights, FP8
// activations, SM90): what convert_to_w4a8_moe_kernel_format does to the bf16 group scales, as
// two ExpertDerivations (lib/convert/derivations.h) of the loaded w13/w2_weight_scale, and the
// value stage the reference applies so `verify` compares like with like. The weights themselves
// are an index map (packers/cutlass_w4a8.h).
//
// Upstream (vllm-project/vllm @ e9d1398d9):
//   fused_moe/oracle/w4a8.py `convert_to_w4a8_moe_kernel_format`: quant_fp8 =
//     QuantFP8(static=False, group_shape=PER_TOKEN); quantization/utils/quant_utils.py
//     `convert_bf16_scales_to_fp8(quant_fp8, scales)` on the [E, N, G] scales viewed [E*N, G]:
//     fp8, chan = quant_fp8(rows); fp8 = (fp8.float() / 8.0).to(float8_e4m3fn); chan *= 8.0
//   QuantFP8 runs its CUDA kernel when the custom op is enabled (compilation mode NONE, see
//     oracle::compilation_mode_none): csrc/libtorch_stable/quantization/w8a8/fp8/common.cu
//     `dynamic_per_token_scaled_fp8_quant_kernel_strided` with csrc/quantization/utils.cuh and
//     w8a8/fp8/common.cuh `scaled_fp8_conversion<false>` (built without --use_fast_math, so `/`
//     is IEEE round-to-nearest), converting with __nv_cvt_float_to_fp8(satfinite, E4M3).
//   compressed_tensors_moe_w4a8_fp8.py: the scale params are allocated in the model dtype
//     (bf16: CutlassExpertsW4A8Fp8 takes no other), so the checkpoint's scales are cast on load.
//
// One row r of an expert's group scales s[g] (bf16 values; w2 rows hold the rank's groups only):
//     amax    = max_g |s[g]|
//     scale   = max(amax / 448, 1 / (448 * 512))                 fp32, IEEE division
//     q[g]    = e4m3(clamp(s[g] / scale, -448, 448))              round to nearest even
//     s8[g]   = e4m3(float(q[g]) / 8)                             torch's cast: RNE, subnormals
//     chan[r] = scale * 8                                         fp32 [N, 1]
//   vllm.w4a8_fp8_group_scales(quant_fp8=cuda_kernel,e9d1398d9) | vllm.cutlass_pack_scale_fp8(...)
//     s8 [N, G] through the lookup-table pack (canonical: s8, F8_E4M3 [N, G])
//   vllm.w4a8_fp8_channel_scales(quant_fp8=cuda_kernel,e9d1398d9) | vllm.unchanged
//     chan, F32 [N, 1] (vLLM replaces w13_weight_chan_scale [E, N] by the [E, N, 1] result)
//   vllm.w4a8_fp8_weight_values(tp=T,e9d1398d9)   the value stage of the reference: the source's
//     bf16 scales become, per row and group, the 16 values the kernel multiplies for the int4
//     codes 0..15 (F32 [N, 16 G]): e4m3(s8 * w) from the lookup table, times chan; w2 rows are
//     cut into T slices of groups first, as T ranks hold them.
// Example: a row (1.0, 0.5, 0.0): amax 1, scale = 1/448 rounded to fp32 = 0.002232143 (0x3B124925);
//   s / scale = (447.99997, 223.99998, 0) -> q = (448, 224, 0) -> s8 = (56, 28, 0) = (0x66, 0x5E,
//   0x00); chan = 0.017857144 (0x3C924925).
// Bad input (exit 4): a scale that is NaN, infinite or negative (also -0.0): vLLM's symmetric
// int4 scales are non-negative, and the lookup table of a negative FP8 scale has no inverse.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lib/convert/derivations.h"
#include "lib/convert/reductions.h"
#include "lib/core/tensor.h"
#include "lib/oracle/oracle.h"

namespace moepack::convert {

// The FP8 scales of one row (above): s8 codes into `fp8` (same length as `bf16_values`), the
// channel scale returned. The values must be finite and non-negative.
float w4a8_fp8_row(std::span<const float> bf16_values, std::span<uint8_t> fp8);

// nullptr when `layout_id` is neither W4A8 scale derivation. `role` is the output role
// (w13_weight_scale, w2_weight_chan_scale, ...).
std::shared_ptr<const ExpertDerivation> make_w4a8_cutlass_derivation(const std::string& role, const std::string& layout_id);

const ValueStage* find_w4a8_value_stage(std::string_view id);

// One expert projection's value table F32 [N, 16 G] (experts::dequantize_int4_table) from the
// artifact's canonical s8 (F8_E4M3 [N, G]) and channel scales (F32 [N, 1]).
OwnedTensor w4a8_fp8_value_table(const OwnedTensor& fp8_scales, const OwnedTensor& channel_scales, const std::string& where);


}  // namespace moepack::convert
