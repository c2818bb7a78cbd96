// The vocabulary of layout ids: every name a manifest's `layout` or `value_stage` can hold,
// written once.
//
// A layout id names the upstream transform a tensor went through, with its parameters and the
// version of the code it follows, e.g.
//
//   triton_kernels.HopperMXValue(mx_axis=1,v3.5.1)
//   └─── head ────────────────┘ └─ args ───────┘ (the last arg: the pinned upstream version)
//
//   vllm.mxfp4_triton_shuffle_weight(e9d1398d9) | triton_kernels.HopperMXValue(mx_axis=1,v3.5.1)
//   └─ stage 1 ───────────────────────────────┘   └─ stage 2, applied after stage 1 ─────────┘
//
// Three rooms spell the same ids and must agree byte for byte: the packers report them as
// name(), the oracle assigns them to tensors, and the convert pipeline and the runtime look them
// up (packers/registry, lib/convert/derivation_registry) and read them back. Each id is built
// here and only here, by a constant or a builder taking the parameters that vary, so a misspelt
// head or a forgotten version does not compile. The string literals themselves are pinned by
// tests/core/layout_ids_test.cpp and by the goldens (tests/convert/golden/every_target.txt, the
// CLI goldens); tests/cli/layout_id_literals_test.cpp fails when a room spells an id outside
// this file.
//
// This header depends on the standard library only: lib/core, below every room that uses it.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

namespace moepack::layout_id {

// ---- upstream pins: the version each id ends with --------------------------------------------
namespace pin {
// vllm-project/vllm, the reference point of the whole project (README).
inline constexpr std::string_view kVllm = "e9d1398d9";
// The triton_kernels release vLLM e9d1398d9 pins for CUDA (cmake/external_projects/triton_kernels.cmake).
inline constexpr std::string_view kTritonKernels = "v3.5.1";
// flashinfer-ai/flashinfer, the release of the reference point (README).
inline constexpr std::string_view kFlashInfer = "v0.6.17";
// ROCm/aiter, the tag vLLM e9d1398d9 builds its ROCm image with (docker/Dockerfile.rocm_base, AITER_BRANCH).
inline constexpr std::string_view kAiter = "v0.1.19";
// deepseek-ai/DeepGEMM, the commit vLLM e9d1398d9 pins (cmake/external_projects/deepgemm.cmake).
inline constexpr std::string_view kDeepGemm = "8b1392b9";
// NVIDIA/cutlass, the tag vLLM e9d1398d9 fetches (CMakeLists.txt CUTLASS_REVISION).
inline constexpr std::string_view kCutlass = "v4.4.2";
}  // namespace pin

// ---- composition -------------------------------------------------------------------------------
// Stages applied one after the other to one tensor, in application order (packers/registry.h).
inline constexpr std::string_view kPipelineSeparator = " | ";
// A change of values before a layout: "value stage => layout" (lib/convert/reductions.h).
inline constexpr std::string_view kValueStageSeparator = " => ";

// "head(arg,arg,...)".
std::string call(std::string_view head, std::initializer_list<std::string_view> args);
// "first | second | ...".
std::string pipeline(std::initializer_list<std::string_view> stages);
// "stage => layout".
std::string staged(std::string_view value_stage, std::string_view layout);

// ---- heads: the part of an id before its arguments --------------------------------------------
// One per upstream function or class. Lookups by head (registries, the runtime's read-back)
// use these; whole ids come from the builders below.
namespace head {
// vLLM loaders and process_weights_after_loading steps
inline constexpr std::string_view unchanged = "vllm.unchanged";
inline constexpr std::string_view bias_f32 = "vllm.bias_f32";
inline constexpr std::string_view scalar_f32 = "vllm.scalar_f32";
inline constexpr std::string_view mxfp4_triton_shuffle_weight = "vllm.mxfp4_triton_shuffle_weight";
inline constexpr std::string_view aiter_deinterleave_gate_up_rows = "vllm.aiter_deinterleave_gate_up_rows";
inline constexpr std::string_view cutlass_swizzle_mxfp4_scales = "vllm.cutlass_moe.swizzle_mxfp4_scales";
inline constexpr std::string_view gptq_marlin_repack = "vllm.gptq_marlin_repack";
inline constexpr std::string_view awq_marlin_repack = "vllm.awq_marlin_repack";
inline constexpr std::string_view mxfp4_marlin_process_scales = "vllm.mxfp4_marlin_process_scales";
inline constexpr std::string_view nvfp4_marlin_process_scales = "vllm.nvfp4_marlin_process_scales";
inline constexpr std::string_view marlin_permute_bias = "vllm.marlin_permute_bias";
inline constexpr std::string_view marlin_moe_permute_scales = "vllm.marlin_moe_permute_scales";
inline constexpr std::string_view moe_packed_to_marlin_zero_points = "vllm.moe_packed_to_marlin_zero_points";
inline constexpr std::string_view moe_awq_to_marlin_zero_points = "vllm.moe_awq_to_marlin_zero_points";
inline constexpr std::string_view marlin_act_order_rows = "vllm.marlin_act_order_rows";
inline constexpr std::string_view marlin_sort_g_idx = "vllm.marlin_sort_g_idx";
inline constexpr std::string_view empty_int32 = "vllm.empty_int32";
inline constexpr std::string_view pack_fp8_to_int32 = "vllm.pack_fp8_to_int32";
inline constexpr std::string_view fp8_marlin_scales = "vllm.fp8_marlin_scales";
inline constexpr std::string_view fp8_marlin_scale_dtype = "vllm.fp8_marlin_scale_dtype";
inline constexpr std::string_view moe_wna16_awq_qweight = "vllm.moe_wna16_awq_qweight";
inline constexpr std::string_view moe_wna16_awq_qzeros = "vllm.moe_wna16_awq_qzeros";
inline constexpr std::string_view moe_wna16_scales = "vllm.moe_wna16_scales";
inline constexpr std::string_view wna16_triton_weight = "vllm.wna16_triton_weight";
inline constexpr std::string_view wna16_triton_zero_points = "vllm.wna16_triton_zero_points";
inline constexpr std::string_view wna16_triton_transpose = "vllm.wna16_triton_transpose";
inline constexpr std::string_view xpu_transpose = "vllm.xpu_transpose";
inline constexpr std::string_view xpu_wna16_weight = "vllm.xpu_wna16_weight";
inline constexpr std::string_view cpu_prepack_moe_weight = "vllm.cpu_prepack_moe_weight";
inline constexpr std::string_view cpu_prepack_moe_weight_int8 = "vllm.cpu_prepack_moe_weight_int8";
inline constexpr std::string_view cutlass_encode_and_reorder_int4b_grouped = "vllm.cutlass_encode_and_reorder_int4b_grouped";
inline constexpr std::string_view cutlass_pack_scale_fp8 = "vllm.cutlass_pack_scale_fp8";
inline constexpr std::string_view w4a8_fp8_group_scales = "vllm.w4a8_fp8_group_scales";
inline constexpr std::string_view w4a8_fp8_channel_scales = "vllm.w4a8_fp8_channel_scales";
inline constexpr std::string_view w4a8_fp8_weight_values = "vllm.w4a8_fp8_weight_values";
inline constexpr std::string_view reorder_w13_rows = "vllm.reorder_w13_rows";
inline constexpr std::string_view swap_w13_to_w31 = "vllm.swap_w13_to_w31";
inline constexpr std::string_view swizzle_blockscale = "vllm.swizzle_blockscale";
inline constexpr std::string_view max_over_experts = "vllm.max_over_experts";
inline constexpr std::string_view fp8_w13_max_scale = "vllm.fp8_w13_max_scale";
inline constexpr std::string_view fp8_requant_w13_max_scale = "vllm.fp8_requant_w13_max_scale";
inline constexpr std::string_view fp8_fi_cutlass_alphas = "vllm.fp8_fi_cutlass_alphas";
inline constexpr std::string_view fp8_clamp_block_scales = "vllm.fp8_clamp_block_scales";
inline constexpr std::string_view nvfp4_ones = "vllm.nvfp4_ones";
inline constexpr std::string_view nvfp4_weight_scale_2 = "vllm.nvfp4_weight_scale_2";
inline constexpr std::string_view nvfp4_input_scale = "vllm.nvfp4_input_scale";
inline constexpr std::string_view nvfp4_inverse_input_scale_max = "vllm.nvfp4_inverse_input_scale_max";
inline constexpr std::string_view nvfp4_marlin_global_scale = "vllm.nvfp4_marlin_global_scale";
inline constexpr std::string_view nvfp4_bake_weight_scale_2 = "vllm.nvfp4_bake_weight_scale_2";
inline constexpr std::string_view nvfp4_marlin_scale_factor = "vllm.nvfp4_marlin_scale_factor";
inline constexpr std::string_view trtllm_nvfp4_g1_scale_c = "vllm.trtllm_nvfp4_g1_scale_c";
inline constexpr std::string_view trtllm_nvfp4_gemm1 = "vllm.trtllm_nvfp4_gemm1";
// vLLM steps moepack names only to refuse them or to say it does not reproduce them
inline constexpr std::string_view moe_wna16 = "vllm.moe_wna16";
inline constexpr std::string_view wna16_triton_awq_uint8_view = "vllm.wna16_triton_awq_uint8_view";
inline constexpr std::string_view xpu_wna16 = "vllm.xpu_wna16";
inline constexpr std::string_view marlin_int4_fp8_preprocess_or_act_int8 = "vllm.marlin_int4_fp8_preprocess_or_act_int8";
inline constexpr std::string_view fp8_fused_exponent_bias_into_scales = "vllm.fp8_fused_exponent_bias_into_scales";
inline constexpr std::string_view prepare_fp8_moe_layer_for_fi = "vllm.prepare_fp8_moe_layer_for_fi";
inline constexpr std::string_view prepare_fp8_moe_layer_for_marlin = "vllm.prepare_fp8_moe_layer_for_marlin";
inline constexpr std::string_view prepare_fp8_moe_layer_for_deepgemm = "vllm.prepare_fp8_moe_layer_for_deepgemm";
inline constexpr std::string_view prepare_mxfp8_moe_layer_for_marlin = "vllm.prepare_mxfp8_moe_layer_for_marlin";
inline constexpr std::string_view align_moe_weights_for_fi = "vllm.align_moe_weights_for_fi";
inline constexpr std::string_view rotate_weights_for_fi_trtllm_fp8_per_tensor_moe = "vllm.rotate_weights_for_fi_trtllm_fp8_per_tensor_moe";
inline constexpr std::string_view modelopt_fp8_moe_method = "vllm.ModelOptFp8MoEMethod";
// triton_kernels layouts
inline constexpr std::string_view hopper_mx_value = "triton_kernels.HopperMXValue";
inline constexpr std::string_view hopper_mx_scale = "triton_kernels.HopperMXScale";
inline constexpr std::string_view blackwell_mx_value = "triton_kernels.BlackwellMXValue";
inline constexpr std::string_view blackwell_mx_scale = "triton_kernels.BlackwellMXScale";
inline constexpr std::string_view cdna4_mx_scale = "triton_kernels.CDNA4MXScale";
inline constexpr std::string_view strided = "triton_kernels.Strided";
// FlashInfer
inline constexpr std::string_view fi_trtllm_shuffle_matrix_a = "flashinfer.trtllm_shuffle_matrix_a";
inline constexpr std::string_view fi_trtllm_shuffle_matrix_sf_a = "flashinfer.trtllm_shuffle_matrix_sf_a";
inline constexpr std::string_view fi_trtllm_shuffle_bias = "flashinfer.trtllm_shuffle_bias";
inline constexpr std::string_view fi_trtllm_bf16_block_major_k = "flashinfer.trtllm_bf16_block_major_k";
inline constexpr std::string_view fi_trtllm_fp8_block_major_k = "flashinfer.trtllm_fp8_block_major_k";
inline constexpr std::string_view fi_cutlass_mxfp4_weight = "flashinfer.cutlass_mxfp4_weight";
inline constexpr std::string_view fi_block_scale_interleave = "flashinfer.block_scale_interleave";
inline constexpr std::string_view fi_cutlass_bias = "flashinfer.cutlass_bias";
inline constexpr std::string_view fi_interleave_sm90_weights = "flashinfer.interleave_moe_weights_for_sm90_mixed_gemm";
inline constexpr std::string_view fi_interleave_sm90_scales = "flashinfer.interleave_moe_scales_for_sm90_mixed_gemm";
// AITER
inline constexpr std::string_view aiter_shuffle_weight = "aiter.shuffle_weight";
inline constexpr std::string_view aiter_shuffle_scale = "aiter.shuffle_scale";
inline constexpr std::string_view aiter_e8m0_shuffle = "aiter.e8m0_shuffle";
inline constexpr std::string_view aiter_shuffle_mxfp8_moe_weights = "aiter.shuffle_mxfp8_moe_weights";
// DeepGEMM
inline constexpr std::string_view deep_gemm_transform_sf = "deep_gemm.transform_sf_into_required_layout";
inline constexpr std::string_view deep_gemm_requant_ue8m0 = "deep_gemm.requant_ue8m0";
inline constexpr std::string_view deep_gemm_fp8_block_scales = "deep_gemm.fp8_block_scales";
inline constexpr std::string_view deep_gemm_sf_layout = "deep_gemm.sf_layout";
// sgl-kernel's x86 CPU packs (vLLM's CPU experts)
inline constexpr std::string_view cpu_sgl_convert_weight_packed = "cpu.sgl_convert_weight_packed";
inline constexpr std::string_view cpu_sgl_convert_scale_packed = "cpu.sgl_convert_scale_packed";
inline constexpr std::string_view cpu_sgl_s8s8_compensation = "cpu.sgl_s8s8_compensation";
inline constexpr std::string_view cpu_sgl_int4_weight_packed = "cpu.sgl_int4_weight_packed";
inline constexpr std::string_view cpu_sgl_int4_blocked_scales = "cpu.sgl_int4_blocked_scales";
inline constexpr std::string_view cpu_sgl_int4_blocked_zero_points = "cpu.sgl_int4_blocked_zero_points";
inline constexpr std::string_view cpu_sgl_int4_zero_points = "cpu.sgl_int4_zero_points";
inline constexpr std::string_view cpu_sgl_int4_compensation = "cpu.sgl_int4_compensation";
// torch and external packages
inline constexpr std::string_view torch_view = "torch.view";
inline constexpr std::string_view torch_dyn_quant_pack_4bit_weight = "torch.dyn_quant_pack_4bit_weight";
inline constexpr std::string_view humming_kernel_format = "humming.convert_to_humming_moe_kernel_format";
inline constexpr std::string_view b12x_prepare_weights = "b12x.prepare_weights";
inline constexpr std::string_view trtllm_gen_mxint4_prepared = "trtllm_gen.mxint4.prepared";
}  // namespace head

// ---- row orders of the fused w13 (gate/up) tensor, as ids spell them ---------------------------
namespace rows {
inline constexpr std::string_view identity = "identity";
inline constexpr std::string_view swap_pairs = "swap_pairs";
inline constexpr std::string_view w3w1_interleave = "w3w1_interleave";
inline constexpr std::string_view deinterleave_up_first = "deinterleave_up_first";
inline constexpr std::string_view swap_halves = "swap_halves";
inline constexpr std::string_view cutedsl_w31_interleave64 = "cutedsl_w31_interleave64";
inline constexpr std::string_view cutedsl_deinterleave_interleave64 = "cutedsl_deinterleave_interleave64";
}  // namespace rows

// ---- whole ids without parameters -------------------------------------------------------------
inline constexpr std::string_view unchanged = head::unchanged;
inline constexpr std::string_view bias_f32 = head::bias_f32;
inline constexpr std::string_view scalar_f32 = head::scalar_f32;
inline constexpr std::string_view view_e8m0 = "torch.view(float8_e8m0fnu)";
inline constexpr std::string_view cpu_sgl_mxfp4_weight = "cpu.sgl_convert_weight_packed(mxfp4)";
inline constexpr std::string_view cpu_sgl_e8m0_scale = "cpu.sgl_convert_scale_packed(e8m0)";
inline constexpr std::string_view cpu_sgl_fp8_weight = "cpu.sgl_convert_weight_packed(fp8)";
inline constexpr std::string_view cpu_sgl_int8_weight = "cpu.sgl_convert_weight_packed(int8,vnni4)";
// The block scales of MXFP8 on DEEPGEMM (lib/oracle/family_fp8.cpp).
inline constexpr std::string_view deep_gemm_sf_e8m0_as_f32 = "deep_gemm.sf_layout(e8m0_as_f32)";

// ---- builders: ids whose parameters vary -------------------------------------------------------
// The integer-weight source packing a Marlin or CPU INT4 id names.
enum class IntPacking { gptq, awq };

// triton_kernels (v3.5.1)
std::string hopper_mx_value();
std::string hopper_mx_scale(int num_warps);
std::string blackwell_mx_value();
std::string blackwell_mx_scale();
std::string cdna4_mx_scale();
std::string strided(int k_groups_pad);  // 1: no padding

// vLLM loader and process_weights_after_loading steps
std::string mxfp4_triton_shuffle_weight();
std::string aiter_deinterleave_gate_up_rows();
std::string cutlass_swizzle_mxfp4_scales();
std::string marlin_fp4_repack(bool fp8_activations);
std::string marlin_int_repack(IntPacking packing, int bits);
std::string mxfp4_marlin_process_scales(bool fp8_activations);
std::string nvfp4_marlin_process_scales();
std::string marlin_permute_bias();                               // params_dtype=bf16
std::string marlin_permute_bias(std::string_view params_dtype);  // WNA16 Marlin: bf16, F16, F32
std::string marlin_moe_permute_scales(bool grouped, std::string_view params_dtype);
std::string marlin_zero_points(IntPacking packing, int bits);
std::string marlin_act_order_rows();
std::string marlin_sort_g_idx(bool sort_indices);  // the stable argsort, or the sorted g_idx
std::string empty_int32_per_expert();              // [E, 0]
std::string empty_int32();                         // (0,)
std::string pack_fp8_to_int32();
std::string fp8_marlin_scales(std::string_view kind, std::string_view params_dtype);
std::string fp8_marlin_scale_dtype(std::string_view params_dtype);
std::string moe_wna16_awq_qweight();
std::string moe_wna16_awq_qzeros();
std::string moe_wna16_scales();
std::string wna16_triton_weight();
std::string wna16_triton_zero_points();
std::string wna16_triton_transpose();
std::string xpu_transpose();
std::string xpu_wna16_weight();
std::string cpu_prepack_moe_weight(std::string_view isa);  // amx, vec, neon, vsx
std::string cpu_prepack_moe_weight_int8_neon();
std::string cutlass_encode_and_reorder_int4b_grouped();
std::string cutlass_pack_scale_fp8();
std::string w4a8_fp8_group_scales();
std::string w4a8_fp8_channel_scales();
std::string w4a8_fp8_weight_values(int tp);
std::string reorder_w13_rows(std::string_view row_order);
std::string swap_w13_to_w31();
std::string swizzle_blockscale(std::string_view row_order);
std::string max_over_experts(bool all_experts);
std::string fp8_w13_max_scale();
std::string fp8_requant_w13_max_scale();
std::string fp8_fi_cutlass_alphas(int gemm, bool all_experts);
std::string fp8_clamp_block_scales();
// NVFP4 reductions and value stages (lib/convert/nvfp4_prepare); `proj` is w13 or w2.
std::string nvfp4_ones();
std::string nvfp4_weight_scale_2(std::string_view proj, std::string_view times);
std::string nvfp4_input_scale(std::string_view proj, std::string_view reduction);
std::string nvfp4_inverse_input_scale_max(std::string_view proj);
std::string nvfp4_marlin_global_scale(std::string_view proj, std::string_view params_dtype);
std::string nvfp4_bake_weight_scale_2(std::string_view proj);
std::string nvfp4_marlin_scale_factor(std::string_view proj, std::string_view params_dtype);
std::string trtllm_nvfp4_g1_scale_c(std::string_view input, bool gated);
std::string trtllm_nvfp4_gemm1(std::string_view what, std::string_view input);  // clamp_limit, beta

// FlashInfer (v0.6.17)
std::string fi_trtllm_shuffle_matrix_a(std::string_view row_order);
std::string fi_trtllm_shuffle_matrix_sf_a(std::string_view row_order, bool u8_scales);
std::string fi_trtllm_shuffle_bias(std::string_view row_order);
std::string fi_trtllm_bf16_block_major_k(std::string_view row_order);
std::string fi_trtllm_fp8_block_major_k(std::string_view row_order);
std::string fi_cutlass_mxfp4_weight(std::string_view row_order);
std::string fi_block_scale_interleave(std::string_view row_order);
std::string fi_cutlass_bias(std::string_view row_order);
std::string fi_interleave_sm90_weights(std::string_view row_order);
std::string fi_interleave_sm90_scales(std::string_view row_order);

// AITER (v0.1.19)
std::string aiter_shuffle_weight();                         // plain 16x16 tiles
std::string aiter_shuffle_weight_guinterleave(int gate_up);  // is_guinterleave=1
std::string aiter_shuffle_scale(int gate_up);                // is_guinterleave=1
std::string aiter_e8m0_shuffle(int param_rank);              // 2 or 3

// DeepGEMM (8b1392b9)
std::string deep_gemm_transform_sf(std::string_view recipe);  // 1x1x32, 1x128x128
std::string deep_gemm_requant_ue8m0(std::string_view what);   // weight, scale
std::string deep_gemm_fp8_block_scales();

// sgl-kernel x86 CPU packs
std::string cpu_sgl_s8s8_compensation();
std::string cpu_sgl_int4_weight_packed(IntPacking packing, int block_k);
std::string cpu_sgl_int4_blocked_scales();
std::string cpu_sgl_int4_blocked_zero_points();
std::string cpu_sgl_int4_zero_points(std::string_view zeros);
std::string cpu_sgl_int4_compensation(std::string_view zeros);

// What the oracle names where no layout is written: the upstream step, why, and the verdict,
// e.g. "vllm.prepare_fp8_moe_layer_for_deepgemm(asserts block_quant,refused)".
std::string refused(std::string_view head, std::string_view why);
std::string not_reproduced(std::string_view head, std::string_view why);
// "humming.convert_to_humming_moe_kernel_format(external humming package)".
std::string external_package(std::string_view head, std::string_view package);
// "vllm.<backend>.prepared_weights(outside vLLM's process_weights_after_loading,not_reproduced)":
// weights a backend's own kernel code prepares (WNA16 HUMMING, EMULATION, FLYDSL).
std::string backend_prepared_weights(std::string_view backend);

// The head of an id: what comes before its first "(": "head(args) | ..." -> "head"; the whole
// id when it has no arguments. Text that only mentions an id ("head | other (prose)") has no
// head a registry knows, so it is never taken for the id.
std::string_view head_of(std::string_view id);

}  // namespace moepack::layout_id
