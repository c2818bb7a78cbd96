// The ids of layout_ids.h, spelled out. Each builder fixes the arguments its upstream function
// always takes and the version it follows; what varies comes in as parameters.
#include "lib/core/layout_ids.h"

#include <algorithm>

namespace moepack::layout_id {
namespace {

std::string with_vllm(std::string_view head) { return call(head, {pin::kVllm}); }
std::string rows_arg(std::string_view row_order) { return "rows=" + std::string(row_order); }
std::string vllm_pin_arg() { return "vllm " + std::string(pin::kVllm); }
std::string cutlass_pin_arg() { return "cutlass " + std::string(pin::kCutlass); }
std::string_view packing_name(IntPacking packing) { return packing == IntPacking::gptq ? "gptq" : "awq"; }
std::string bits_arg(int bits) { return "num_bits=" + std::to_string(bits); }

}  // namespace

std::string call(std::string_view head, std::initializer_list<std::string_view> args) {
  std::string id(head);
  id += '(';
  bool first = true;
  for (std::string_view a : args) {
    if (!first) id += ',';
    id += a;
    first = false;
  }
  id += ')';
  return id;
}

std::string pipeline(std::initializer_list<std::string_view> stages) {
  std::string id;
  for (std::string_view s : stages) {
    if (!id.empty()) id += kPipelineSeparator;
    id += s;
  }
  return id;
}

std::string staged(std::string_view value_stage, std::string_view layout) {
  return std::string(value_stage) + std::string(kValueStageSeparator) + std::string(layout);
}

// ---- triton_kernels ----
std::string hopper_mx_value() { return call(head::hopper_mx_value, {"mx_axis=1", pin::kTritonKernels}); }
std::string hopper_mx_scale(int num_warps) {
  return call(head::hopper_mx_scale, {"mx_axis=1", "num_warps=" + std::to_string(num_warps), "k_groups_pad=4", pin::kTritonKernels});
}
std::string blackwell_mx_value() { return call(head::blackwell_mx_value, {pin::kTritonKernels}); }
std::string blackwell_mx_scale() { return call(head::blackwell_mx_scale, {pin::kTritonKernels}); }
std::string cdna4_mx_scale() { return call(head::cdna4_mx_scale, {pin::kTritonKernels}); }
std::string strided(int k_groups_pad) {
  return k_groups_pad == 1 ? call(head::strided, {pin::kTritonKernels})
                           : call(head::strided, {"k_groups_pad=" + std::to_string(k_groups_pad), pin::kTritonKernels});
}

// ---- vLLM ----
std::string mxfp4_triton_shuffle_weight() { return with_vllm(head::mxfp4_triton_shuffle_weight); }
std::string aiter_deinterleave_gate_up_rows() { return with_vllm(head::aiter_deinterleave_gate_up_rows); }
std::string cutlass_swizzle_mxfp4_scales() { return call(head::cutlass_swizzle_mxfp4_scales, {"sf=128x4", pin::kVllm}); }
std::string marlin_fp4_repack(bool fp8_activations) {
  return call(head::gptq_marlin_repack, {bits_arg(4), "fp4_codes", fp8_activations ? "is_a_8bit=1" : "is_a_8bit=0", pin::kVllm});
}
std::string marlin_int_repack(IntPacking packing, int bits) {
  return call(packing == IntPacking::gptq ? head::gptq_marlin_repack : head::awq_marlin_repack, {bits_arg(bits), "is_a_8bit=0", pin::kVllm});
}
std::string mxfp4_marlin_process_scales(bool fp8_activations) {
  return call(head::mxfp4_marlin_process_scales, {"group_size=32", "params_dtype=bf16", fp8_activations ? "act=fp8" : "act=16bit", pin::kVllm});
}
std::string nvfp4_marlin_process_scales() { return call(head::nvfp4_marlin_process_scales, {"group_size=16", pin::kVllm}); }
std::string marlin_permute_bias() { return marlin_permute_bias("bf16"); }
std::string marlin_permute_bias(std::string_view params_dtype) {
  return call(head::marlin_permute_bias, {"params_dtype=" + std::string(params_dtype), pin::kVllm});
}
std::string marlin_moe_permute_scales(bool grouped, std::string_view params_dtype) {
  return call(head::marlin_moe_permute_scales,
              {grouped ? "perm=grouped" : "perm=single", "params_dtype=" + std::string(params_dtype), "is_a_8bit=0", pin::kVllm});
}
std::string marlin_zero_points(IntPacking packing, int bits) {
  return call(packing == IntPacking::gptq ? head::moe_packed_to_marlin_zero_points : head::moe_awq_to_marlin_zero_points,
              {bits_arg(bits), "is_a_8bit=0", pin::kVllm});
}
std::string marlin_act_order_rows() { return call(head::marlin_act_order_rows, {"perm=sort_indices", pin::kVllm}); }
std::string marlin_sort_g_idx(bool sort_indices) {
  return call(head::marlin_sort_g_idx, {sort_indices ? "sort_indices" : "sorted_g_idx", "stable", pin::kVllm});
}
std::string empty_int32_per_expert() { return call(head::empty_int32, {"E", "0", pin::kVllm}); }
std::string empty_int32() { return call(head::empty_int32, {"0", pin::kVllm}); }
std::string pack_fp8_to_int32() { return call(head::pack_fp8_to_int32, {"size_k_first=0", "transposed", pin::kVllm}); }
std::string fp8_marlin_scales(std::string_view kind, std::string_view params_dtype) {
  return call(head::fp8_marlin_scales, {"kind=" + std::string(kind), "params_dtype=" + std::string(params_dtype), pin::kVllm});
}
std::string fp8_marlin_scale_dtype(std::string_view params_dtype) {
  return call(head::fp8_marlin_scale_dtype, {"params_dtype=" + std::string(params_dtype), pin::kVllm});
}
std::string moe_wna16_awq_qweight() { return call(head::moe_wna16_awq_qweight, {"unpack", "awq_order_undone", "transpose", "repack", pin::kVllm}); }
std::string moe_wna16_awq_qzeros() { return call(head::moe_wna16_awq_qzeros, {"unpack", "awq_order_undone", "transpose", "repack", pin::kVllm}); }
std::string moe_wna16_scales() { return call(head::moe_wna16_scales, {"transpose", pin::kVllm}); }
std::string wna16_triton_weight() { return call(head::wna16_triton_weight, {"transpose", "int32_as_u8", pin::kVllm}); }
std::string wna16_triton_zero_points() { return call(head::wna16_triton_zero_points, {"transpose", "int32_as_u8", pin::kVllm}); }
std::string wna16_triton_transpose() { return with_vllm(head::wna16_triton_transpose); }
std::string xpu_transpose() { return with_vllm(head::xpu_transpose); }
std::string xpu_wna16_weight() { return call(head::xpu_wna16_weight, {"transpose", "int32_as_u8", pin::kVllm}); }
std::string cpu_prepack_moe_weight(std::string_view isa) { return call(head::cpu_prepack_moe_weight, {isa, pin::kVllm}); }
std::string cpu_prepack_moe_weight_int8_neon() { return call(head::cpu_prepack_moe_weight_int8, {"neon", pin::kVllm}); }
std::string cutlass_encode_and_reorder_int4b_grouped() {
  return call(head::cutlass_encode_and_reorder_int4b_grouped, {"from=uint4b8", cutlass_pin_arg(), pin::kVllm});
}
std::string cutlass_pack_scale_fp8() {
  return call(head::cutlass_pack_scale_fp8, {"permute=0", "2", "1", "int4b_t", cutlass_pin_arg(), pin::kVllm});
}
std::string w4a8_fp8_group_scales() { return call(head::w4a8_fp8_group_scales, {"quant_fp8=cuda_kernel", pin::kVllm}); }
std::string w4a8_fp8_channel_scales() { return call(head::w4a8_fp8_channel_scales, {"quant_fp8=cuda_kernel", pin::kVllm}); }
std::string w4a8_fp8_weight_values(int tp) { return call(head::w4a8_fp8_weight_values, {"tp=" + std::to_string(tp), pin::kVllm}); }
std::string reorder_w13_rows(std::string_view row_order) { return call(head::reorder_w13_rows, {rows_arg(row_order), pin::kVllm}); }
std::string swap_w13_to_w31() { return with_vllm(head::swap_w13_to_w31); }
std::string swizzle_blockscale(std::string_view row_order) {
  return call(head::swizzle_blockscale, {rows_arg(row_order), "sf=128x4", pin::kVllm});
}
std::string max_over_experts(bool all_experts) {
  return all_experts ? call(head::max_over_experts, {"f32", "all_experts"}) : call(head::max_over_experts, {"f32"});
}
std::string fp8_w13_max_scale() { return with_vllm(head::fp8_w13_max_scale); }
std::string fp8_requant_w13_max_scale() { return with_vllm(head::fp8_requant_w13_max_scale); }
std::string fp8_fi_cutlass_alphas(int gemm, bool all_experts) {
  const std::string which = "gemm" + std::to_string(gemm);
  return all_experts ? call(head::fp8_fi_cutlass_alphas, {which, "all_experts", pin::kVllm}) : call(head::fp8_fi_cutlass_alphas, {which, pin::kVllm});
}
std::string fp8_clamp_block_scales() { return call(head::fp8_clamp_block_scales, {"min=1e-10", pin::kVllm}); }

std::string nvfp4_ones() { return call(head::nvfp4_ones, {"f32"}); }
std::string nvfp4_weight_scale_2(std::string_view proj, std::string_view times) {
  return call(head::nvfp4_weight_scale_2, {proj, "times=" + std::string(times)});
}
std::string nvfp4_input_scale(std::string_view proj, std::string_view reduction) { return call(head::nvfp4_input_scale, {proj, reduction}); }
std::string nvfp4_inverse_input_scale_max(std::string_view proj) { return call(head::nvfp4_inverse_input_scale_max, {proj}); }
std::string nvfp4_marlin_global_scale(std::string_view proj, std::string_view params_dtype) {
  return call(head::nvfp4_marlin_global_scale, {proj, "params_dtype=" + std::string(params_dtype)});
}
std::string nvfp4_bake_weight_scale_2(std::string_view proj) { return call(head::nvfp4_bake_weight_scale_2, {proj}); }
std::string nvfp4_marlin_scale_factor(std::string_view proj, std::string_view params_dtype) {
  return call(head::nvfp4_marlin_scale_factor, {proj, "params_dtype=" + std::string(params_dtype)});
}
std::string trtllm_nvfp4_g1_scale_c(std::string_view input, bool gated) {
  return call(head::trtllm_nvfp4_g1_scale_c, {"input=" + std::string(input), gated ? "gated=1" : "gated=0"});
}
std::string trtllm_nvfp4_gemm1(std::string_view what, std::string_view input) {
  return call(head::trtllm_nvfp4_gemm1, {what, "input=" + std::string(input)});
}

// ---- FlashInfer ----
std::string fi_trtllm_shuffle_matrix_a(std::string_view row_order) {
  return call(head::fi_trtllm_shuffle_matrix_a, {rows_arg(row_order), "epilogue_tile_m=128", pin::kFlashInfer});
}
std::string fi_trtllm_shuffle_matrix_sf_a(std::string_view row_order, bool u8_scales) {
  return u8_scales ? call(head::fi_trtllm_shuffle_matrix_sf_a, {rows_arg(row_order), "epilogue_tile_m=128", "sf=128x4", "u8", pin::kFlashInfer})
                   : call(head::fi_trtllm_shuffle_matrix_sf_a, {rows_arg(row_order), "epilogue_tile_m=128", "sf=128x4", pin::kFlashInfer});
}
std::string fi_trtllm_shuffle_bias(std::string_view row_order) {
  return call(head::fi_trtllm_shuffle_bias, {rows_arg(row_order), "epilogue_tile_m=128", "f32", pin::kFlashInfer});
}
std::string fi_trtllm_bf16_block_major_k(std::string_view row_order) {
  return call(head::fi_trtllm_bf16_block_major_k, {rows_arg(row_order), vllm_pin_arg(), pin::kFlashInfer});
}
std::string fi_trtllm_fp8_block_major_k(std::string_view row_order) {
  return call(head::fi_trtllm_fp8_block_major_k, {rows_arg(row_order), "epilogue_tile_m=64", "block_k=128", vllm_pin_arg(), pin::kFlashInfer});
}
std::string fi_cutlass_mxfp4_weight(std::string_view row_order) { return call(head::fi_cutlass_mxfp4_weight, {rows_arg(row_order), pin::kFlashInfer}); }
std::string fi_block_scale_interleave(std::string_view row_order) {
  return call(head::fi_block_scale_interleave, {rows_arg(row_order), "sf=128x4", pin::kFlashInfer});
}
std::string fi_cutlass_bias(std::string_view row_order) { return call(head::fi_cutlass_bias, {rows_arg(row_order), "bf16", pin::kFlashInfer}); }
std::string fi_interleave_sm90_weights(std::string_view row_order) {
  return call(head::fi_interleave_sm90_weights, {rows_arg(row_order), "fp4", pin::kFlashInfer});
}
std::string fi_interleave_sm90_scales(std::string_view row_order) {
  return call(head::fi_interleave_sm90_scales, {rows_arg(row_order), "group_size=32", pin::kFlashInfer});
}

// ---- AITER ----
std::string aiter_shuffle_weight() { return call(head::aiter_shuffle_weight, {"layout=16x16", pin::kAiter}); }
std::string aiter_shuffle_weight_guinterleave(int gate_up) {
  return call(head::aiter_shuffle_weight, {"layout=16x16", "is_guinterleave=1", "gate_up=" + std::to_string(gate_up), pin::kAiter});
}
std::string aiter_shuffle_scale(int gate_up) {
  return call(head::aiter_shuffle_scale, {"is_guinterleave=1", "gate_up=" + std::to_string(gate_up), pin::kAiter});
}
std::string aiter_e8m0_shuffle(int param_rank) { return call(head::aiter_e8m0_shuffle, {"param=" + std::to_string(param_rank) + "d", pin::kAiter}); }

// ---- DeepGEMM ----
std::string deep_gemm_transform_sf(std::string_view recipe) {
  return call(head::deep_gemm_transform_sf, {"recipe=" + std::string(recipe), "sm100", "packed_ue8m0", "mn_major", pin::kDeepGemm});
}
std::string deep_gemm_requant_ue8m0(std::string_view what) { return call(head::deep_gemm_requant_ue8m0, {what, "block=128x128", vllm_pin_arg()}); }
std::string deep_gemm_fp8_block_scales() { return call(head::deep_gemm_fp8_block_scales, {"requant_ue8m0", "broadcast_rows", vllm_pin_arg()}); }

// ---- sgl-kernel x86 CPU ----
std::string cpu_sgl_s8s8_compensation() { return with_vllm(head::cpu_sgl_s8s8_compensation); }
std::string cpu_sgl_int4_weight_packed(IntPacking packing, int block_k) {
  return call(head::cpu_sgl_int4_weight_packed, {packing_name(packing), "block_k=" + std::to_string(block_k), pin::kVllm});
}
std::string cpu_sgl_int4_blocked_scales() { return call(head::cpu_sgl_int4_blocked_scales, {"f32", pin::kVllm}); }
std::string cpu_sgl_int4_blocked_zero_points() { return call(head::cpu_sgl_int4_blocked_zero_points, {"i8", pin::kVllm}); }
std::string cpu_sgl_int4_zero_points(std::string_view zeros) { return call(head::cpu_sgl_int4_zero_points, {"zeros=" + std::string(zeros), pin::kVllm}); }
std::string cpu_sgl_int4_compensation(std::string_view zeros) { return call(head::cpu_sgl_int4_compensation, {"zeros=" + std::string(zeros), pin::kVllm}); }

// ---- not written ----
std::string refused(std::string_view head, std::string_view why) { return call(head, {why, "refused"}); }
std::string not_reproduced(std::string_view head, std::string_view why) { return call(head, {why, "not_reproduced"}); }
std::string external_package(std::string_view head, std::string_view package) {
  return call(head, {"external " + std::string(package) + " package"});
}
std::string backend_prepared_weights(std::string_view backend) {
  return not_reproduced("vllm." + std::string(backend) + ".prepared_weights", "outside vLLM's process_weights_after_loading");
}

std::string_view head_of(std::string_view id) {
  return id.substr(0, std::min(id.find('('), id.size()));
}

}  // namespace moepack::layout_id
