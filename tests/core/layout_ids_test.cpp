// The layout-id vocabulary spelled out: every builder's string as a manifest records it. These
// strings are a contract (docs/ARTIFACT.md: artifacts written by earlier versions name them),
// so a change here is a change of the artifact format, not a refactoring.
#include "lib/core/layout_ids.h"

#include <gtest/gtest.h>

namespace moepack::layout_id {
namespace {

TEST(LayoutIds, CompositionJoinsStagesInApplicationOrder) {
  EXPECT_EQ(call("a.f", {"x=1", "y"}), "a.f(x=1,y)");
  EXPECT_EQ(call("a.f", {}), "a.f()");
  EXPECT_EQ(pipeline({"a.f(1)", "b.g(2)", "c.h"}), "a.f(1) | b.g(2) | c.h");
  EXPECT_EQ(staged("v.s(1)", "l.t(2)"), "v.s(1) => l.t(2)");
}

TEST(LayoutIds, HeadOfAnIdIsTheNameBeforeItsArgumentsOrItsFirstStage) {
  EXPECT_EQ(head_of("vllm.fp8_marlin_scales(kind=block,e9d1398d9) | vllm.marlin_moe_permute_scales(perm=single)"), head::fp8_marlin_scales);
  EXPECT_EQ(head_of("vllm.unchanged"), head::unchanged);
  EXPECT_EQ(head_of("vllm.w4a8_fp8_group_scales | vllm.cutlass_pack_scale_fp8 (prose)"), "vllm.w4a8_fp8_group_scales | vllm.cutlass_pack_scale_fp8 ");
  EXPECT_EQ(head_of(nvfp4_bake_weight_scale_2("w13") + " => x"), head::nvfp4_bake_weight_scale_2);
}

TEST(LayoutIds, TritonKernelsIds) {
  EXPECT_EQ(hopper_mx_value(), "triton_kernels.HopperMXValue(mx_axis=1,v3.5.1)");
  EXPECT_EQ(hopper_mx_scale(8), "triton_kernels.HopperMXScale(mx_axis=1,num_warps=8,k_groups_pad=4,v3.5.1)");
  EXPECT_EQ(blackwell_mx_value(), "triton_kernels.BlackwellMXValue(v3.5.1)");
  EXPECT_EQ(blackwell_mx_scale(), "triton_kernels.BlackwellMXScale(v3.5.1)");
  EXPECT_EQ(cdna4_mx_scale(), "triton_kernels.CDNA4MXScale(v3.5.1)");
  EXPECT_EQ(strided(1), "triton_kernels.Strided(v3.5.1)");
  EXPECT_EQ(strided(4), "triton_kernels.Strided(k_groups_pad=4,v3.5.1)");
}

TEST(LayoutIds, VllmLoaderIds) {
  EXPECT_EQ(unchanged, "vllm.unchanged");
  EXPECT_EQ(bias_f32, "vllm.bias_f32");
  EXPECT_EQ(scalar_f32, "vllm.scalar_f32");
  EXPECT_EQ(mxfp4_triton_shuffle_weight(), "vllm.mxfp4_triton_shuffle_weight(e9d1398d9)");
  EXPECT_EQ(aiter_deinterleave_gate_up_rows(), "vllm.aiter_deinterleave_gate_up_rows(e9d1398d9)");
  EXPECT_EQ(cutlass_swizzle_mxfp4_scales(), "vllm.cutlass_moe.swizzle_mxfp4_scales(sf=128x4,e9d1398d9)");
  EXPECT_EQ(marlin_fp4_repack(false), "vllm.gptq_marlin_repack(num_bits=4,fp4_codes,is_a_8bit=0,e9d1398d9)");
  EXPECT_EQ(marlin_fp4_repack(true), "vllm.gptq_marlin_repack(num_bits=4,fp4_codes,is_a_8bit=1,e9d1398d9)");
  EXPECT_EQ(marlin_int_repack(IntPacking::gptq, 8), "vllm.gptq_marlin_repack(num_bits=8,is_a_8bit=0,e9d1398d9)");
  EXPECT_EQ(marlin_int_repack(IntPacking::awq, 4), "vllm.awq_marlin_repack(num_bits=4,is_a_8bit=0,e9d1398d9)");
  EXPECT_EQ(mxfp4_marlin_process_scales(false), "vllm.mxfp4_marlin_process_scales(group_size=32,params_dtype=bf16,act=16bit,e9d1398d9)");
  EXPECT_EQ(mxfp4_marlin_process_scales(true), "vllm.mxfp4_marlin_process_scales(group_size=32,params_dtype=bf16,act=fp8,e9d1398d9)");
  EXPECT_EQ(nvfp4_marlin_process_scales(), "vllm.nvfp4_marlin_process_scales(group_size=16,e9d1398d9)");
  EXPECT_EQ(marlin_permute_bias(), "vllm.marlin_permute_bias(params_dtype=bf16,e9d1398d9)");
  EXPECT_EQ(marlin_permute_bias("F16"), "vllm.marlin_permute_bias(params_dtype=F16,e9d1398d9)");
  EXPECT_EQ(marlin_moe_permute_scales(true, "BF16"), "vllm.marlin_moe_permute_scales(perm=grouped,params_dtype=BF16,is_a_8bit=0,e9d1398d9)");
  EXPECT_EQ(marlin_moe_permute_scales(false, "F16"), "vllm.marlin_moe_permute_scales(perm=single,params_dtype=F16,is_a_8bit=0,e9d1398d9)");
  EXPECT_EQ(marlin_zero_points(IntPacking::gptq, 4), "vllm.moe_packed_to_marlin_zero_points(num_bits=4,is_a_8bit=0,e9d1398d9)");
  EXPECT_EQ(marlin_zero_points(IntPacking::awq, 8), "vllm.moe_awq_to_marlin_zero_points(num_bits=8,is_a_8bit=0,e9d1398d9)");
  EXPECT_EQ(marlin_act_order_rows(), "vllm.marlin_act_order_rows(perm=sort_indices,e9d1398d9)");
  EXPECT_EQ(marlin_sort_g_idx(true), "vllm.marlin_sort_g_idx(sort_indices,stable,e9d1398d9)");
  EXPECT_EQ(marlin_sort_g_idx(false), "vllm.marlin_sort_g_idx(sorted_g_idx,stable,e9d1398d9)");
  EXPECT_EQ(empty_int32_per_expert(), "vllm.empty_int32(E,0,e9d1398d9)");
  EXPECT_EQ(empty_int32(), "vllm.empty_int32(0,e9d1398d9)");
  EXPECT_EQ(pack_fp8_to_int32(), "vllm.pack_fp8_to_int32(size_k_first=0,transposed,e9d1398d9)");
  EXPECT_EQ(fp8_marlin_scales("block", "BF16"), "vllm.fp8_marlin_scales(kind=block,params_dtype=BF16,e9d1398d9)");
  EXPECT_EQ(fp8_marlin_scale_dtype("F16"), "vllm.fp8_marlin_scale_dtype(params_dtype=F16,e9d1398d9)");
  EXPECT_EQ(moe_wna16_awq_qweight(), "vllm.moe_wna16_awq_qweight(unpack,awq_order_undone,transpose,repack,e9d1398d9)");
  EXPECT_EQ(moe_wna16_awq_qzeros(), "vllm.moe_wna16_awq_qzeros(unpack,awq_order_undone,transpose,repack,e9d1398d9)");
  EXPECT_EQ(moe_wna16_scales(), "vllm.moe_wna16_scales(transpose,e9d1398d9)");
  EXPECT_EQ(wna16_triton_weight(), "vllm.wna16_triton_weight(transpose,int32_as_u8,e9d1398d9)");
  EXPECT_EQ(wna16_triton_zero_points(), "vllm.wna16_triton_zero_points(transpose,int32_as_u8,e9d1398d9)");
  EXPECT_EQ(wna16_triton_transpose(), "vllm.wna16_triton_transpose(e9d1398d9)");
  EXPECT_EQ(xpu_transpose(), "vllm.xpu_transpose(e9d1398d9)");
  EXPECT_EQ(xpu_wna16_weight(), "vllm.xpu_wna16_weight(transpose,int32_as_u8,e9d1398d9)");
  EXPECT_EQ(cpu_prepack_moe_weight("amx"), "vllm.cpu_prepack_moe_weight(amx,e9d1398d9)");
  EXPECT_EQ(cpu_prepack_moe_weight_int8_neon(), "vllm.cpu_prepack_moe_weight_int8(neon,e9d1398d9)");
  EXPECT_EQ(cutlass_encode_and_reorder_int4b_grouped(), "vllm.cutlass_encode_and_reorder_int4b_grouped(from=uint4b8,cutlass v4.4.2,e9d1398d9)");
  EXPECT_EQ(cutlass_pack_scale_fp8(), "vllm.cutlass_pack_scale_fp8(permute=0,2,1,int4b_t,cutlass v4.4.2,e9d1398d9)");
  EXPECT_EQ(w4a8_fp8_group_scales(), "vllm.w4a8_fp8_group_scales(quant_fp8=cuda_kernel,e9d1398d9)");
  EXPECT_EQ(w4a8_fp8_channel_scales(), "vllm.w4a8_fp8_channel_scales(quant_fp8=cuda_kernel,e9d1398d9)");
  EXPECT_EQ(w4a8_fp8_weight_values(2), "vllm.w4a8_fp8_weight_values(tp=2,e9d1398d9)");
  EXPECT_EQ(reorder_w13_rows(rows::swap_halves), "vllm.reorder_w13_rows(rows=swap_halves,e9d1398d9)");
  EXPECT_EQ(swap_w13_to_w31(), "vllm.swap_w13_to_w31(e9d1398d9)");
  EXPECT_EQ(swizzle_blockscale(rows::identity), "vllm.swizzle_blockscale(rows=identity,sf=128x4,e9d1398d9)");
  EXPECT_EQ(max_over_experts(false), "vllm.max_over_experts(f32)");
  EXPECT_EQ(max_over_experts(true), "vllm.max_over_experts(f32,all_experts)");
  EXPECT_EQ(fp8_w13_max_scale(), "vllm.fp8_w13_max_scale(e9d1398d9)");
  EXPECT_EQ(fp8_requant_w13_max_scale(), "vllm.fp8_requant_w13_max_scale(e9d1398d9)");
  EXPECT_EQ(fp8_fi_cutlass_alphas(1, true), "vllm.fp8_fi_cutlass_alphas(gemm1,all_experts,e9d1398d9)");
  EXPECT_EQ(fp8_fi_cutlass_alphas(2, false), "vllm.fp8_fi_cutlass_alphas(gemm2,e9d1398d9)");
  EXPECT_EQ(fp8_clamp_block_scales(), "vllm.fp8_clamp_block_scales(min=1e-10,e9d1398d9)");
}

TEST(LayoutIds, Nvfp4ReductionAndStageIds) {
  EXPECT_EQ(nvfp4_ones(), "vllm.nvfp4_ones(f32)");
  EXPECT_EQ(nvfp4_weight_scale_2("w13", "input_global_max_all"), "vllm.nvfp4_weight_scale_2(w13,times=input_global_max_all)");
  EXPECT_EQ(nvfp4_input_scale("w2", "global_max_all"), "vllm.nvfp4_input_scale(w2,global_max_all)");
  EXPECT_EQ(nvfp4_inverse_input_scale_max("w13"), "vllm.nvfp4_inverse_input_scale_max(w13)");
  EXPECT_EQ(nvfp4_marlin_global_scale("w2", "bf16"), "vllm.nvfp4_marlin_global_scale(w2,params_dtype=bf16)");
  EXPECT_EQ(nvfp4_bake_weight_scale_2("w13"), "vllm.nvfp4_bake_weight_scale_2(w13)");
  EXPECT_EQ(nvfp4_marlin_scale_factor("w13", "f16"), "vllm.nvfp4_marlin_scale_factor(w13,params_dtype=f16)");
  EXPECT_EQ(trtllm_nvfp4_g1_scale_c("global_max_all", true), "vllm.trtllm_nvfp4_g1_scale_c(input=global_max_all,gated=1)");
  EXPECT_EQ(trtllm_nvfp4_gemm1("clamp_limit", "global_max_all"), "vllm.trtllm_nvfp4_gemm1(clamp_limit,input=global_max_all)");
}

TEST(LayoutIds, FlashInferIds) {
  EXPECT_EQ(fi_trtllm_shuffle_matrix_a(rows::swap_pairs), "flashinfer.trtllm_shuffle_matrix_a(rows=swap_pairs,epilogue_tile_m=128,v0.6.17)");
  EXPECT_EQ(fi_trtllm_shuffle_matrix_sf_a(rows::identity, false),
            "flashinfer.trtllm_shuffle_matrix_sf_a(rows=identity,epilogue_tile_m=128,sf=128x4,v0.6.17)");
  EXPECT_EQ(fi_trtllm_shuffle_matrix_sf_a(rows::w3w1_interleave, true),
            "flashinfer.trtllm_shuffle_matrix_sf_a(rows=w3w1_interleave,epilogue_tile_m=128,sf=128x4,u8,v0.6.17)");
  EXPECT_EQ(fi_trtllm_shuffle_bias(rows::identity), "flashinfer.trtllm_shuffle_bias(rows=identity,epilogue_tile_m=128,f32,v0.6.17)");
  EXPECT_EQ(fi_trtllm_bf16_block_major_k(rows::w3w1_interleave), "flashinfer.trtllm_bf16_block_major_k(rows=w3w1_interleave,vllm e9d1398d9,v0.6.17)");
  EXPECT_EQ(fi_trtllm_fp8_block_major_k(rows::swap_halves),
            "flashinfer.trtllm_fp8_block_major_k(rows=swap_halves,epilogue_tile_m=64,block_k=128,vllm e9d1398d9,v0.6.17)");
  EXPECT_EQ(fi_cutlass_mxfp4_weight(rows::deinterleave_up_first), "flashinfer.cutlass_mxfp4_weight(rows=deinterleave_up_first,v0.6.17)");
  EXPECT_EQ(fi_block_scale_interleave(rows::identity), "flashinfer.block_scale_interleave(rows=identity,sf=128x4,v0.6.17)");
  EXPECT_EQ(fi_cutlass_bias(rows::swap_halves), "flashinfer.cutlass_bias(rows=swap_halves,bf16,v0.6.17)");
  EXPECT_EQ(fi_interleave_sm90_weights(rows::identity), "flashinfer.interleave_moe_weights_for_sm90_mixed_gemm(rows=identity,fp4,v0.6.17)");
  EXPECT_EQ(fi_interleave_sm90_scales(rows::identity),
            "flashinfer.interleave_moe_scales_for_sm90_mixed_gemm(rows=identity,group_size=32,v0.6.17)");
}

TEST(LayoutIds, AiterDeepGemmCpuAndRefusalIds) {
  EXPECT_EQ(aiter_shuffle_weight(), "aiter.shuffle_weight(layout=16x16,v0.1.19)");
  EXPECT_EQ(aiter_shuffle_weight_guinterleave(1), "aiter.shuffle_weight(layout=16x16,is_guinterleave=1,gate_up=1,v0.1.19)");
  EXPECT_EQ(aiter_shuffle_scale(0), "aiter.shuffle_scale(is_guinterleave=1,gate_up=0,v0.1.19)");
  EXPECT_EQ(aiter_e8m0_shuffle(3), "aiter.e8m0_shuffle(param=3d,v0.1.19)");
  EXPECT_EQ(view_e8m0, "torch.view(float8_e8m0fnu)");
  EXPECT_EQ(deep_gemm_transform_sf("1x1x32"), "deep_gemm.transform_sf_into_required_layout(recipe=1x1x32,sm100,packed_ue8m0,mn_major,8b1392b9)");
  EXPECT_EQ(deep_gemm_requant_ue8m0("scale"), "deep_gemm.requant_ue8m0(scale,block=128x128,vllm e9d1398d9)");
  EXPECT_EQ(deep_gemm_fp8_block_scales(), "deep_gemm.fp8_block_scales(requant_ue8m0,broadcast_rows,vllm e9d1398d9)");
  EXPECT_EQ(deep_gemm_sf_e8m0_as_f32, "deep_gemm.sf_layout(e8m0_as_f32)");
  EXPECT_EQ(cpu_sgl_mxfp4_weight, "cpu.sgl_convert_weight_packed(mxfp4)");
  EXPECT_EQ(cpu_sgl_e8m0_scale, "cpu.sgl_convert_scale_packed(e8m0)");
  EXPECT_EQ(cpu_sgl_fp8_weight, "cpu.sgl_convert_weight_packed(fp8)");
  EXPECT_EQ(cpu_sgl_int8_weight, "cpu.sgl_convert_weight_packed(int8,vnni4)");
  EXPECT_EQ(cpu_sgl_s8s8_compensation(), "cpu.sgl_s8s8_compensation(e9d1398d9)");
  EXPECT_EQ(cpu_sgl_int4_weight_packed(IntPacking::awq, 64), "cpu.sgl_int4_weight_packed(awq,block_k=64,e9d1398d9)");
  EXPECT_EQ(cpu_sgl_int4_blocked_scales(), "cpu.sgl_int4_blocked_scales(f32,e9d1398d9)");
  EXPECT_EQ(cpu_sgl_int4_blocked_zero_points(), "cpu.sgl_int4_blocked_zero_points(i8,e9d1398d9)");
  EXPECT_EQ(cpu_sgl_int4_zero_points("awq_qzeros"), "cpu.sgl_int4_zero_points(zeros=awq_qzeros,e9d1398d9)");
  EXPECT_EQ(cpu_sgl_int4_compensation("awq_qzeros"), "cpu.sgl_int4_compensation(zeros=awq_qzeros,e9d1398d9)");
  EXPECT_EQ(refused(head::prepare_fp8_moe_layer_for_deepgemm, "asserts block_quant"),
            "vllm.prepare_fp8_moe_layer_for_deepgemm(asserts block_quant,refused)");
  EXPECT_EQ(not_reproduced(head::moe_wna16, "GPTQ zero points plus one"), "vllm.moe_wna16(GPTQ zero points plus one,not_reproduced)");
  EXPECT_EQ(external_package(head::b12x_prepare_weights, "b12x"), "b12x.prepare_weights(external b12x package)");
  EXPECT_EQ(backend_prepared_weights("HUMMING"), "vllm.HUMMING.prepared_weights(outside vLLM's process_weights_after_loading,not_reproduced)");
}

}  // namespace
}  // namespace moepack::layout_id
