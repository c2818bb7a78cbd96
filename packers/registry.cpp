// The layout table. One row per layout string; see registry.h for the invariant.
#include "packers/registry.h"

#include <string>

#include "lib/core/error.h"
#include "packers/aiter_gate_up_rows.h"
#include "packers/aiter_shuffle_scale.h"
#include "packers/aiter_shuffle_weight.h"
#include "packers/cpu_bias_f32.h"
#include "packers/identity.h"
#include "packers/cpu_sgl_int4.h"
#include "packers/cpu_sgl_mxfp4.h"
#include "packers/cutlass_sf_128x4.h"
#include "packers/cutlass_w4a8.h"
#include "packers/deepgemm_mxfp4_scales.h"
#include "packers/flashinfer_cutlass_mxfp4.h"
#include "packers/flashinfer_trtllm_mxfp4.h"
#include "packers/marlin_fp8.h"
#include "packers/marlin_mxfp4.h"
#include "packers/marlin_wna16.h"
#include "packers/moe_wna16_awq.h"
#include "packers/nvfp4_layouts.h"
#include "packers/triton_blackwell_mx.h"
#include "packers/triton_cdna4_mx_scale.h"
#include "packers/triton_hopper_mx_scale.h"
#include "packers/triton_hopper_mx_value.h"
#include "packers/triton_wna16.h"
#include "packers/triton_shuffle_weight.h"
#include "packers/triton_strided.h"
#include "packers/cpu_prepack_moe.h"
#include "packers/flashinfer_trtllm_bf16.h"
#include "packers/unquantized_rows.h"

namespace moepack::packers {
namespace {

template <class L, auto... Args>
std::unique_ptr<Layout> make() {
  return std::make_unique<L>(Args...);
}

// One row per layout: the factory and a line for `moepack plan` / docs. The id is not written
// here: it is the packer's own name(), so the manifest string has one source.
struct RowSpec {
  LayoutFactory make;
  std::string_view summary;
};

// The AITER rows by vLLM path: which path uses which layout id (vllm-project/vllm :
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

// clang-format off
constexpr RowSpec kRows[] = {
  // ---- triton_kernels v3.5.1 (vLLM OAI Triton MoE, MXFP4) ----
  {&make<TritonStridedLayout>,
   "identity: values on sm<90 / SM90+torch<2.8.1 / ROCm, scales on sm<90 and ROCm other than gfx950"},
  {&make<TritonStridedLayout, uint64_t{4}>,
   "SM90 scales with torch<2.8.1: identity after vLLM's zero pad of K/32 to a multiple of 4"},
  {&make<TritonHopperMXValueLayout>,
   "SM90 MXFP4 weights: 16x32-byte tile swizzle plus 4-nibble bit twiddle"},
  {&make<TritonHopperMXScaleLayout, uint64_t{8}>, "SM90 MXFP4 scales, 8 warps (vLLM default)"},
  {&make<TritonHopperMXScaleLayout, uint64_t{4}>, "SM90 MXFP4 scales, 4 warps (older batched-MoE choice)"},
  {&make<TritonBlackwellMXValueLayout>,
   "SM100 MXFP4 weights: K bytes zero-padded to 128"},
  {&make<TritonBlackwellMXScaleLayout>,
   "SM100 MXFP4 scales: CUTLASS 128x4 tiles, N to 128, K/32 to 8"},
  {&make<TritonCdna4MXScaleLayout>,
   "gfx950 MXFP4 scales (TP<=2): 32-row x 8-group preshuffle"},
  {&make<TritonShuffleWeightLayout>,
   "generic MXFP4 converter, TRITON only: interleave the two halves of the last axis (w13 weight/scale/bias)"},
  // ---- CPU (sgl-kernel via vLLM csrc/cpu/sgl-kernels) ----
  {&make<CpuSglWeightPackedMxfp4Layout>,
   "CPU AMX MXFP4 weights: per 32-row block, [32, K/2] -> [K/2, 32] with the 32-way nibble split"},
  {&make<CpuSglScalePackedLayout>,
   "CPU AMX E8M0 scales: per 32-row block, [32, G] -> [G, 32]"},
  {&make<BiasToF32Layout>, "MoE bias widened to fp32 (CPU, Triton, AITER MXFP4 paths)"},
  {&make<ScalarToF32Layout>, "per-expert scalar widened to fp32 (static input scales kept as [E] fp32)"},
  {&make<UnchangedLayout>, "kept as loaded: DeepGEMM/CUTLASS W4A4 weights, XPU, EMULATION, b12x"},
  // ---- FlashInfer / Marlin / other layouts (append rows below) ----
  {&make<FlashinferTrtllmMxfp4Layout, TrtllmTensor::weight, RowOrder::identity>,
   "TRT-LLM-gen MXFP4 weight rows (w2): shuffle_matrix_a, 32-row blocks"},
  {&make<FlashinferTrtllmMxfp4Layout, TrtllmTensor::scale, RowOrder::identity>,
   "TRT-LLM-gen MXFP4 E8M0 scales (w2): row shuffle then 128x4 swizzle, viewed as e4m3"},
  {&make<FlashinferTrtllmMxfp4Layout, TrtllmTensor::bias, RowOrder::identity>,
   "TRT-LLM-gen MXFP4 bias (w2): f32, row shuffle"},
  {&make<FlashinferTrtllmMxfp4Layout, TrtllmTensor::weight, RowOrder::swap_pairs>,
   "TRT-LLM-gen MXFP4 weight rows (gpt-oss interleaved w13): shuffle_matrix_a, 32-row blocks"},
  {&make<FlashinferTrtllmMxfp4Layout, TrtllmTensor::scale, RowOrder::swap_pairs>,
   "TRT-LLM-gen MXFP4 E8M0 scales (gpt-oss interleaved w13): row shuffle then 128x4 swizzle, viewed as e4m3"},
  {&make<FlashinferTrtllmMxfp4Layout, TrtllmTensor::bias, RowOrder::swap_pairs>,
   "TRT-LLM-gen MXFP4 bias (gpt-oss interleaved w13): f32, row shuffle"},
  {&make<FlashinferTrtllmMxfp4Layout, TrtllmTensor::weight, RowOrder::w3w1_interleave>,
   "TRT-LLM-gen MXFP4 weight rows (stacked [w1;w3] w13): shuffle_matrix_a, 32-row blocks"},
  {&make<FlashinferTrtllmMxfp4Layout, TrtllmTensor::scale, RowOrder::w3w1_interleave>,
   "TRT-LLM-gen MXFP4 E8M0 scales (stacked [w1;w3] w13): row shuffle then 128x4 swizzle, viewed as e4m3"},
  {&make<FlashinferTrtllmMxfp4Layout, TrtllmTensor::bias, RowOrder::w3w1_interleave>,
   "TRT-LLM-gen MXFP4 bias (stacked [w1;w3] w13): f32, row shuffle"},
  {&make<FlashinferTrtllmMxfp4Layout, TrtllmTensor::scale, RowOrder::identity, TrtllmScaleDtype::u8>,
   "TRT-LLM-gen MXFP8 E8M0 scales (w2): row shuffle then 128x4 swizzle, kept as uint8"},
  {&make<FlashinferTrtllmMxfp4Layout, TrtllmTensor::scale, RowOrder::w3w1_interleave, TrtllmScaleDtype::u8>,
   "TRT-LLM-gen MXFP8 E8M0 scales (stacked [w1;w3] w13): row shuffle then 128x4 swizzle, kept as uint8"},
  {&make<FlashinferCutlassMxfp4Layout, FiCutlassTensor::weight, RowOrder::identity>,
   "FlashInfer CUTLASS MXFP4xMXFP8 (SM100) weight (w2)"},
  {&make<FlashinferCutlassMxfp4Layout, FiCutlassTensor::weight_sm90, RowOrder::identity>,
   "FlashInfer CUTLASS MXFP4 W4A16 (SM90) weight (w2): FP4 mixed-GEMM interleave"},
  {&make<FlashinferCutlassMxfp4Layout, FiCutlassTensor::scale_128x4, RowOrder::identity>,
   "FlashInfer CUTLASS MXFP4xMXFP8 (SM100) scales (w2): 128x4 swizzle"},
  {&make<FlashinferCutlassMxfp4Layout, FiCutlassTensor::scale_sm90, RowOrder::identity>,
   "FlashInfer CUTLASS MXFP4 W4A16 (SM90) scales (w2): [K/128, 4N]"},
  {&make<FlashinferCutlassMxfp4Layout, FiCutlassTensor::bias_bf16, RowOrder::identity>,
   "FlashInfer CUTLASS MXFP4 bias (w2): bf16"},
  {&make<FlashinferCutlassMxfp4Layout, FiCutlassTensor::weight, RowOrder::deinterleave_up_first>,
   "FlashInfer CUTLASS MXFP4xMXFP8 (SM100) weight (gpt-oss w13 -> [up; gate])"},
  {&make<FlashinferCutlassMxfp4Layout, FiCutlassTensor::weight_sm90, RowOrder::deinterleave_up_first>,
   "FlashInfer CUTLASS MXFP4 W4A16 (SM90) weight (gpt-oss w13 -> [up; gate]): FP4 mixed-GEMM interleave"},
  {&make<FlashinferCutlassMxfp4Layout, FiCutlassTensor::scale_128x4, RowOrder::deinterleave_up_first>,
   "FlashInfer CUTLASS MXFP4xMXFP8 (SM100) scales (gpt-oss w13 -> [up; gate]): 128x4 swizzle"},
  {&make<FlashinferCutlassMxfp4Layout, FiCutlassTensor::scale_sm90, RowOrder::deinterleave_up_first>,
   "FlashInfer CUTLASS MXFP4 W4A16 (SM90) scales (gpt-oss w13 -> [up; gate]): [K/128, 4N]"},
  {&make<FlashinferCutlassMxfp4Layout, FiCutlassTensor::bias_bf16, RowOrder::deinterleave_up_first>,
   "FlashInfer CUTLASS MXFP4 bias (gpt-oss w13 -> [up; gate]): bf16"},
  {&make<FlashinferCutlassMxfp4Layout, FiCutlassTensor::weight, RowOrder::swap_halves>,
   "FlashInfer CUTLASS MXFP4xMXFP8 (SM100) weight ([w1;w3] w13 -> [w3;w1])"},
  {&make<FlashinferCutlassMxfp4Layout, FiCutlassTensor::weight_sm90, RowOrder::swap_halves>,
   "FlashInfer CUTLASS MXFP4 W4A16 (SM90) weight ([w1;w3] w13 -> [w3;w1]): FP4 mixed-GEMM interleave"},
  {&make<FlashinferCutlassMxfp4Layout, FiCutlassTensor::scale_128x4, RowOrder::swap_halves>,
   "FlashInfer CUTLASS MXFP4xMXFP8 (SM100) scales ([w1;w3] w13 -> [w3;w1]): 128x4 swizzle"},
  {&make<FlashinferCutlassMxfp4Layout, FiCutlassTensor::scale_sm90, RowOrder::swap_halves>,
   "FlashInfer CUTLASS MXFP4 W4A16 (SM90) scales ([w1;w3] w13 -> [w3;w1]): [K/128, 4N]"},
  {&make<FlashinferCutlassMxfp4Layout, FiCutlassTensor::bias_bf16, RowOrder::swap_halves>,
   "FlashInfer CUTLASS MXFP4 bias ([w1;w3] w13 -> [w3;w1]): bf16"},
  {&make<CutlassMxfp4ScaleSwizzleLayout>,
   "vLLM CUTLASS W4A4 MXFP4 (compressed-tensors/AutoRound, SM100-SM110) scales: 128x4 per expert"},
  {&make<MarlinMxfp4WeightLayout, MarlinActivation::bits16>,
   "Marlin MXFP4 weights, 16-bit activations: 4-bit Marlin repack to I32 [K/16, 2N]"},
  {&make<MarlinMxfp4WeightLayout, MarlinActivation::fp8>,
   "Marlin MXFP4 weights, FP8 activations (VLLM_MARLIN_INPUT_DTYPE=fp8): 4-bit Marlin repack to I32 [K/16, 2N]"},
  {&make<MarlinMxfp4ScaleLayout, MarlinActivation::bits16>,
   "Marlin MXFP4 E8M0 scales, 16-bit activations: [G, N] permuted"},
  {&make<MarlinMxfp4ScaleLayout, MarlinActivation::fp8>,
   "Marlin MXFP4 E8M0 scales, FP8 activations, +6 exponent bias: [G, N] permuted"},
  {&make<MarlinBiasLayout>,
   "Marlin MoE bias: single scale permutation, bf16"},
  {&make<DeepGemmMxfp4ScaleLayout>,
   "DeepGEMM MXFP4 scales (SM100): 4 E8M0 per int32, MN-major, MN padded to 4"},
  {&make<DeepGemmMxfp4ScaleLayout, DeepGemmRecipe::fp8_1x128x128>,
   "DeepGEMM SM100 FP8 block scales: UE8M0 bytes of the row-broadcast [MN, K/128] grid, four per int32, MN-major, MN padded to 4"},
  // ---- AITER v0.1.19 (ROCm AITER_MXFP4_BF16 / AITER_MXFP4_MXFP4; the path table above) ----
  {&make<AiterShuffleWeightLayout, AiterWeightShuffle::plain>,
   "AITER W4A4 MXFP4 weights (`shuffle_weights`, w13 and w2): 16-row x 16-byte tiles"},
  {&make<AiterShuffleWeightLayout, AiterWeightShuffle::guinterleave>,
   "AITER A16W4 MXFP4 w2 weight (shuffle_weight_a16w4 / is_guinterleave, gate_up=False): 16x16-byte tiles"},
  {&make<AiterShuffleWeightLayout, AiterWeightShuffle::guinterleave_gate_up>,
   "AITER A16W4 MXFP4 w13 weight ([gate; up] rows): 16x16-byte tiles, gate and up 16-row blocks alternating"},
  {&make<AiterShuffleScaleLayout, AiterScaleShuffle::guinterleave>,
   "AITER A16W4 MXFP4 w2 E8M0 scales (shuffle_scale_a16w4, gate_up=False): G to 8 with 0x7F, [E*N, G8]"},
  {&make<AiterShuffleScaleLayout, AiterScaleShuffle::guinterleave_gate_up>,
   "AITER A16W4 MXFP4 w13 E8M0 scales ([gate; up] rows): gate/up row pairs per lane, G to 8 with 0x7F, [E*N, G8]"},
  {&make<AiterShuffleScaleLayout, AiterScaleShuffle::e8m0_param2d>,
   "AITER e8m0_shuffle kept 2-D [E*N, G8] (generic AITER_MXFP4_BF16 SiTU w2 scale); E*N % 256 == 0"},
  {&make<AiterShuffleScaleLayout, AiterScaleShuffle::e8m0_param3d>,
   "AITER e8m0_shuffle viewed back to [E, N, G8] (W4A4 AITER_MXFP4_MXFP4 w13 and w2 scales); E*N % 256 == 0"},
  {&make<AiterDeinterleaveGateUpRowsLayout>,
   "gpt-oss AITER_MXFP4_BF16 w13 weight/scale/f32 bias: rows [g0,u0,g1,u1,...] -> [gate; up]"},
  {&make<E8m0ViewLayout>,
   "bytes unchanged, dtype F8_E8M0 (generic AITER_MXFP4_BF16 SiTU scales, viewed before their shuffle)"},
  // ---- Marlin WNA16 (GPTQ / AWQ / compressed-tensors int4 and int8, 16-bit activations) ----
  {&make<MarlinIntWeightLayout, 4u, IntSource::gptq>, "Marlin int4 weights from GPTQ/compressed-tensors I32 [K/8, N]: 16x64 tiles, I32 [K/16, 2N]"},
  {&make<MarlinIntWeightLayout, 8u, IntSource::gptq>, "Marlin int8 weights from GPTQ/compressed-tensors I32 [K/4, N]: 16x64 tiles, I32 [K/16, 4N]"},
  {&make<MarlinIntWeightLayout, 4u, IntSource::awq>, "Marlin int4 weights from AWQ I32 [K, N/8] (interleaved): 16x64 tiles, I32 [K/16, 2N]"},
  {&make<MarlinIntWeightLayout, 8u, IntSource::awq>, "Marlin int8 weights from AWQ I32 [K, N/4] (interleaved): 16x64 tiles, I32 [K/16, 4N]"},
  {&make<MarlinIntScaleLayout, true, DType::BF16>, "Marlin group scales [G, N], 64-wide 8x8 transpose, bf16"},
  {&make<MarlinIntScaleLayout, false, DType::BF16>, "Marlin channel-wise (or size_k <= group_size) scales [G, N], 32-wide single permutation, bf16"},
  {&make<MarlinIntScaleLayout, true, DType::F16>, "Marlin group scales [G, N], 64-wide 8x8 transpose, fp16"},
  {&make<MarlinIntScaleLayout, false, DType::F16>, "Marlin channel-wise (or size_k <= group_size) scales [G, N], 32-wide single permutation, fp16"},
  {&make<MarlinIntZeroPointLayout, 4u, IntSource::gptq>, "Marlin int4 zero points from sequential packing (GPTQ qzeros, compressed-tensors)"},
  {&make<MarlinIntZeroPointLayout, 8u, IntSource::gptq>, "Marlin int8 zero points from sequential packing (GPTQ qzeros, compressed-tensors)"},
  {&make<MarlinIntZeroPointLayout, 4u, IntSource::awq>, "Marlin int4 zero points from AWQ interleaved qzeros"},
  {&make<MarlinIntZeroPointLayout, 8u, IntSource::awq>, "Marlin int8 zero points from AWQ interleaved qzeros"},
  // ---- NVFP4 (vLLM fused_moe/oracle/nvfp4.py; nvfp4_layouts.h) ----
  {&make<ReorderW13RowsLayout, RowOrder::swap_halves>,
   "NVFP4 w13 weight on FlashInfer CUTLASS / b12x: [w1; w3] -> [w3; w1] (reorder_w1w3_to_w3w1)"},
  {&make<ReorderW13RowsLayout, RowOrder::cutedsl_w31_interleave64>,
   "NVFP4 w13 weight on FlashInfer CuteDSL: [w3; w1] in alternating 64-row groups (from [w1; w3])"},
  {&make<ReorderW13RowsLayout, RowOrder::cutedsl_deinterleave_interleave64>,
   "NVFP4 w13 weight on FlashInfer CuteDSL: [w3; w1] in alternating 64-row groups (from interleaved gate/up rows)"},
  {&make<SwizzleBlockscaleLayout, RowOrder::identity>,
   "NVFP4 block scales, vLLM swizzle_blockscale: 128x4 atoms, rows padded to 128 and columns to 4 ([Mp, Cp] per expert)"},
  {&make<SwizzleBlockscaleLayout, RowOrder::swap_halves>,
   "NVFP4 w13 block scales on FlashInfer CUTLASS / b12x: [w3; w1] then swizzle_blockscale"},
  {&make<SwizzleBlockscaleLayout, RowOrder::cutedsl_w31_interleave64>,
   "NVFP4 w13 block scales on FlashInfer CuteDSL: 64-row [w3; w1] interleave then swizzle_blockscale (from [w1; w3])"},
  {&make<SwizzleBlockscaleLayout, RowOrder::cutedsl_deinterleave_interleave64>,
   "NVFP4 w13 block scales on FlashInfer CuteDSL: 64-row [w3; w1] interleave then swizzle_blockscale (from interleaved rows)"},
  {&make<MarlinNvfp4ScaleLayout>,
   "Marlin NVFP4 E4M3 scales: [K/16, N] permuted, re-encoded S0E5M3 (after the layer's power-of-two factor)"},
  // ---- unquantized (BF16/FP16) MoE: family_unquantized.cpp's layout rows ----
  {&make<CpuPrepackMoeWeightLayout, CpuMoeIsa::amx>,
   "CPU unquantized, AMX (X86CPUUnquantizedExperts): 16-row groups of bf16-pair words [O/16][K/2][16][2]"},
  {&make<CpuPrepackMoeWeightLayout, CpuMoeIsa::vec>,
   "CPU unquantized, portable vec (CPUUnquantizedExperts): 16-row groups [O/16][K][16]"},
  {&make<CpuPrepackMoeWeightLayout, CpuMoeIsa::neon>,
   "CPU unquantized, Arm NEON BFMMLA (ArmCPUUnquantizedExperts): 8-row groups of 4-element runs [O/8][K/4][8][4], bf16 only"},
  {&make<CpuPrepackMoeWeightLayout, CpuMoeIsa::vsx>,
   "CPU unquantized, POWER VSX (PowerCPUUnquantizedExperts): 16-row groups of element pairs [O/16][K/2][16][2]"},
  {&make<SwapW13ToW31Layout>, "FlashInfer CUTLASS unquantized gated w13: [w1; w3] rows -> [w3; w1]"},
  {&make<XpuTransposeLayout>, "XPU: each expert's 2-D weight (16-bit, FP8, MXFP8) or 3-D-stacked scale [N, K] stored transposed [K, N]"},
  {&make<XpuTransposeLayout, TransposeUse::wna16_triton_scales>, "Triton WNA16 scales (GPTQ / compressed-tensors): [G, N] stored transposed [N, G]"},
  {&make<TritonWna16WeightLayout>, "Triton WNA16 weights (GPTQ / compressed-tensors): K-first I32 [K/pf, N] -> N-first bytes [N, 4K/pf]"},
  {&make<TritonWna16WeightLayout, Wna16WeightUse::xpu>, "XPU WNA16 int4 weights (GPTQ / compressed-tensors): the Triton WNA16 bytes, [K/8, N] I32 -> [N, K/2] U8"},
  {&make<TritonWna16ZeroPointLayout>, "Triton WNA16 zero points: I32 [G, N/pf] -> bytes [4N/pf, G] (two int4 zero points per byte)"},
  {&make<XpuTransposeLayout, TransposeUse::moe_wna16_scales>, "MoeWNA16 scales (GPTQ / AutoAWQ, --quantization moe_wna16): [G, N] stored transposed [N, G]"},
  {&make<MoeWna16AwqLayout, MoeWna16AwqTensor::qweight>,
   "MoeWNA16 AutoAWQ int4 qweight: [K, N/8] I32, AWQ nibble order undone, -> N-first bytes [N, K/2] (low nibble: even k)"},
  {&make<MoeWna16AwqLayout, MoeWna16AwqTensor::qzeros>,
   "MoeWNA16 AutoAWQ int4 qzeros: [G, N/8] I32, AWQ nibble order undone, -> bytes [N/2, G] (low nibble: even n)"},
  {&make<FlashinferTrtllmBf16Layout, RowOrder::w3w1_interleave>,
   "TRT-LLM-gen BF16 gated w13: [w3_0, w1_0, ...] rows, 32-row shuffle, BlockMajorK [K/64, 2I, 64]"},
  {&make<FlashinferTrtllmBf16Layout, RowOrder::identity>,
   "TRT-LLM-gen BF16 w2 and non-gated w13: 32-row shuffle, BlockMajorK [K/64, N, 64]"},
  {&make<Fp8AsGptqInt32Layout>, "FP8 Marlin weight input: [N, K] bytes as GPTQ-packed int32 [K/4, N] (pack_fp8_to_int32(size_k_first=False).T)"},
  {&make<CpuPrepackMoeWeightInt8Layout>,
   "CPU INT8 W8A8 on Arm (ArmCPUExpertsInt8): prepack_moe_weight_int8(neon), 8-row groups of 8-byte smmla runs [O/8][K/8][8][8]"},
  {&make<CpuSglVnni4Int8Layout>, "CPU INT8 W8A8 (CPUExpertsInt8): sgl convert_weight_packed VNNI-4 [K/4, 32, 4] per 32-row block, s8s8 sums after each block (written by the derivation)"},
  {&make<CpuSglWeightPackedFp8Layout>, "CPU FP8 W8A16 block (CPUExpertsFp8): sgl convert_weight_packed, VNNI-2 pairs in 32-row blocks [K/2, 32, 2]"},
  // ---- CPU INT4 W4A16 (CPUExpertsInt4: sgl convert_weight_packed_scale_zp; cpu_sgl_int4.h) ----
  // block_k = min(group size, 128); the compensation sums are written by lib/convert/cpu_int4.h.
  {&make<CpuSglInt4WeightLayout, CpuInt4Source::gptq, uint64_t{16}>,
   "CPU INT4 weights from GPTQ/compressed-tensors I32 [K/8, N], block_k 16: U8 [N/32, K/16, 384]"},
  {&make<CpuSglInt4WeightLayout, CpuInt4Source::gptq, uint64_t{32}>,
   "CPU INT4 weights from GPTQ/compressed-tensors I32 [K/8, N], block_k 32: U8 [N/32, K/32, 640]"},
  {&make<CpuSglInt4WeightLayout, CpuInt4Source::gptq, uint64_t{64}>,
   "CPU INT4 weights from GPTQ/compressed-tensors I32 [K/8, N], block_k 64: U8 [N/32, K/64, 1152]"},
  {&make<CpuSglInt4WeightLayout, CpuInt4Source::gptq, uint64_t{128}>,
   "CPU INT4 weights from GPTQ/compressed-tensors I32 [K/8, N], block_k 128: U8 [N/32, K/128, 2176]"},
  {&make<CpuSglInt4WeightLayout, CpuInt4Source::awq, uint64_t{16}>,
   "CPU INT4 weights from AWQ I32 [K, N/8] (interleaved), block_k 16: U8 [N/32, K/16, 384]"},
  {&make<CpuSglInt4WeightLayout, CpuInt4Source::awq, uint64_t{32}>,
   "CPU INT4 weights from AWQ I32 [K, N/8] (interleaved), block_k 32: U8 [N/32, K/32, 640]"},
  {&make<CpuSglInt4WeightLayout, CpuInt4Source::awq, uint64_t{64}>,
   "CPU INT4 weights from AWQ I32 [K, N/8] (interleaved), block_k 64: U8 [N/32, K/64, 1152]"},
  {&make<CpuSglInt4WeightLayout, CpuInt4Source::awq, uint64_t{128}>,
   "CPU INT4 weights from AWQ I32 [K, N/8] (interleaved), block_k 128: U8 [N/32, K/128, 2176]"},
  {&make<CpuSglInt4GroupRowsLayout, CpuInt4GroupRows::scales_f32>, "CPU INT4 group scales [G, N] -> fp32 [N/32, G, 32]"},
  {&make<CpuSglInt4GroupRowsLayout, CpuInt4GroupRows::zero_points_i8>,
   "CPU INT4 unpacked zero points I8 [G, N] -> [N/32, G, 32] (values from lib/convert/cpu_int4.h)"},
  {&make<FlashinferTrtllmFp8BlockLayout, RowOrder::swap_halves>,
   "TRT-LLM-gen DeepSeek FP8 block w13: [w3; w1] rows, 16-row shuffle, BlockMajorK [K/128, 2I, 128]"},
  {&make<FlashinferTrtllmFp8BlockLayout, RowOrder::identity>,
   "TRT-LLM-gen DeepSeek FP8 block w2 and non-gated w13: 16-row shuffle, BlockMajorK [K/128, N, 128]"},
  // ---- CUTLASS W4A8 (int4 weights, FP8 activations, SM90; vLLM oracle/w4a8.py) ----
  {&make<CutlassW4a8WeightLayout>,
   "CUTLASS W4A8 int4 weights: uint4b8 -> unified signed int4 codes, reordered in 16x32 GMMA fragment tiles, I32 [N, K/8]"},
  {&make<CutlassW4a8ScaleLayout>,
   "CUTLASS W4A8 FP8 group scales: [N, G] -> [G, N], each an 8-byte e4m3 lookup table s*-8..s*-1 (pack_scale_fp8), 1-D"},
};
// clang-format on

const std::vector<LayoutRow>& rows() {
  static const std::vector<LayoutRow> table = [] {
    std::vector<LayoutRow> built;
    for (const RowSpec& spec : kRows) built.push_back({spec.make()->name(), spec.make, spec.summary});
    return built;
  }();
  return table;
}

}  // namespace

std::span<const LayoutRow> layout_table() { return rows(); }

const LayoutRow* find_layout(std::string_view id) {
  for (const LayoutRow& row : layout_table())
    if (row.id == id) return &row;
  return nullptr;
}

std::unique_ptr<Layout> make_layout(std::string_view id) {
  if (id.find(kPipelineSeparator) != std::string_view::npos) {
    std::vector<std::unique_ptr<Layout>> stages;
    size_t start = 0;
    while (true) {
      const size_t sep = id.find(kPipelineSeparator, start);
      stages.push_back(make_layout(id.substr(start, sep == std::string_view::npos ? std::string_view::npos : sep - start)));
      if (sep == std::string_view::npos) break;
      start = sep + kPipelineSeparator.size();
    }
    return std::make_unique<PipelineLayout>(std::move(stages));
  }
  const LayoutRow* row = find_layout(id);
  if (row == nullptr) {
    std::string known;
    for (const LayoutRow& r : layout_table()) known += "\n  " + std::string(r.id);
    throw Error(ErrorKind::internal, "unknown packer layout `" + std::string(id) + "`; registered:" + known);
  }
  return row->make();
}

std::vector<std::string> layout_ids() {
  std::vector<std::string> ids;
  for (const LayoutRow& row : layout_table()) ids.emplace_back(row.id);
  return ids;
}

// ---- PipelineLayout ----

PipelineLayout::PipelineLayout(std::vector<std::unique_ptr<Layout>> stages) : stages_(std::move(stages)) {
  if (stages_.empty()) throw_internal("PipelineLayout needs at least one stage");
}

std::string PipelineLayout::name() const {
  std::string out;
  for (size_t i = 0; i < stages_.size(); ++i) out += (i ? std::string(kPipelineSeparator) : "") + stages_[i]->name();
  return out;
}

DType PipelineLayout::packed_dtype(DType canonical) const {
  for (const auto& stage : stages_) canonical = stage->packed_dtype(canonical);
  return canonical;
}

std::vector<uint64_t> PipelineLayout::packed_shape(std::span<const uint64_t> canonical_shape) const {
  std::vector<uint64_t> shape(canonical_shape.begin(), canonical_shape.end());
  for (const auto& stage : stages_) shape = stage->packed_shape(shape);
  return shape;
}

std::vector<uint64_t> PipelineLayout::parameter_shape(uint64_t num_experts, std::span<const uint64_t> canonical_shape) const {
  std::vector<uint64_t> shape(canonical_shape.begin(), canonical_shape.end());
  for (size_t i = 0; i + 1 < stages_.size(); ++i) shape = stages_[i]->packed_shape(shape);
  return stages_.back()->parameter_shape(num_experts, shape);
}

void PipelineLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  OwnedTensor current;
  TensorView input = canonical;
  for (size_t i = 0; i + 1 < stages_.size(); ++i) {
    OwnedTensor next(stages_[i]->packed_dtype(input.dtype), stages_[i]->packed_shape(input.shape));
    stages_[i]->pack(input, next.bytes);
    current = std::move(next);
    input = current.view();
  }
  stages_.back()->pack(input, packed);
}

void PipelineLayout::unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const {
  // The intermediate tensors' dtypes and shapes, forward from the canonical one.
  std::vector<OwnedTensor> inputs;
  inputs.reserve(stages_.size());
  DType dtype = canonical.dtype;
  std::vector<uint64_t> shape = canonical.shape;
  for (size_t i = 0; i + 1 < stages_.size(); ++i) {
    dtype = stages_[i]->packed_dtype(dtype);
    shape = stages_[i]->packed_shape(shape);
    inputs.emplace_back(dtype, shape);  // input of stage i + 1
  }
  std::span<const uint8_t> stage_packed = packed;
  for (size_t i = stages_.size(); i-- > 0;) {
    OwnedTensor& target = i == 0 ? canonical : inputs[i - 1];
    stages_[i]->unpack(stage_packed, target);
    stage_packed = target.bytes;
  }
}

}  // namespace moepack::packers
