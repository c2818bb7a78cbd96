#include "lib/oracle/sizes_layouts.h"

#include <functional>

namespace moepack::oracle {

namespace {
int round_up(int x, int m) { return (x + m - 1) / m * m; }
int itemsize(FloatType t) { return t == FloatType::float32 ? 4 : 2; }
}  // namespace

int all2all_rounded_hidden(int hidden, FloatType act_dtype, const MoeParallelConfig& p) {
  auto bytes_round = [](int h, int size) {
    const int bytes = h * size;
    // DeepEP copies in units of 32 lanes x 16 bytes.
    return bytes % 512 == 0 ? h : round_up(bytes, 512) / size;
  };
  auto table_round = [](int h) {
    static const int kSupported[] = {2048, 2560, 3072, 4096, 5120, 6144, 7168, 8192};
    for (int s : kSupported)
      if (s >= h) return s;
    raise_value_error("Hidden Size " + std::to_string(h) + " is greater than the maximum supported hidden size 8192");
  };
  if (p.use_deepep_ht_kernels()) hidden = bytes_round(hidden, itemsize(act_dtype));
  if (p.use_deepep_ll_kernels()) hidden = table_round(hidden);
  if (p.use_deepep_v2_kernels()) hidden = bytes_round(hidden, itemsize(act_dtype));
  if (p.use_nixl_ep_kernels()) hidden = table_round(hidden);
  return hidden;
}

std::pair<int, int> mxfp4_round_up(const std::string& b, int hidden, int inter, const Device& device,
                                   std::optional<MoEActivation> activation) {
  if (b == "B12X_MXFP4_MXFP8" || b == "B12X_MXFP4_BF16") return {hidden, inter};  // b12x plans exact sizes
  if (b == "EMULATION") return {round_up(hidden, 32), round_up(inter, 32)};       // OCP MX block alignment
  if (b == "DEEPGEMM_MXFP4") return {round_up(hidden, 128), round_up(inter, 128)};
  if (b == "MARLIN" || b == "BATCHED_MARLIN") return {round_up(hidden, device.is_xpu() ? 128 : 256), round_up(inter, 128)};
  if (b == "FLASHINFER_TRTLLM_MXFP4_BF16" || b == "FLASHINFER_TRTLLM_MXFP4_MXFP8") return {round_up(hidden, 256), round_up(inter, 128)};
  if (b == "FLASHINFER_CUTLASS_MXFP4_BF16" || b == "FLASHINFER_CUTLASS_MXFP4_MXFP8") return {round_up(hidden, 128), round_up(inter, 128)};
  if (device.is_rocm()) {
    // Kimi-K3's A16W4 SiTU/SiLU kernel handles its native sizes; 256 would inflate them.
    if (b == "AITER_MXFP4_BF16" && activation && (*activation == MoEActivation::SITU || *activation == MoEActivation::SILU))
      return {round_up(hidden, 128), round_up(inter, 128)};
    return {round_up(hidden, 256), round_up(inter, 256)};
  }
  if (b == "CPU") return {round_up(hidden, 32), round_up(inter, 32)};  // AMX BLOCK_N = 32
  return {hidden, round_up(inter, 64)};
}

// ---------------------------------------------------------------------------------------------
// Layout table
// ---------------------------------------------------------------------------------------------
namespace {

// What a row matches on besides family and backend.
using Condition = std::function<bool(const SelectionContext&, const Selection&)>;

struct LayoutRow {
  Family family;
  std::string backend;  // "*" matches any backend of the family
  std::string condition_text;
  Condition condition;
  std::vector<std::pair<std::string, std::string>> roles;
};

bool always(const SelectionContext&, const Selection&) { return true; }
bool is_cuda_cap(const SelectionContext& c, int cap) { return c.deployment.device.is_cuda() && c.deployment.device.is_device_capability(cap); }
bool gpt_oss_layout(const SelectionContext& c) {
  return c.query.method_class == "GptOssMxfp4MoEMethod" || c.query.method_class == "QuarkOCP_MX_MoEMethod";
}

const std::vector<LayoutRow>& layout_rows() {
  using F = Family;
  static const std::vector<LayoutRow> rows = {
      // ---- MXFP4 ----
      {F::mxfp4, "MARLIN", "compressed-tensors / AutoRound CUTLASS W4A4",
       [](const SelectionContext&, const Selection& s) { return s.experts_class == "CutlassExpertsMxfp4"; },
       {{"w13_weight", "checkpoint"}, {"w2_weight", "checkpoint"},
        {"w13_weight_scale", "cutlass.swizzle_mxfp4_scales(128x4)"}, {"w2_weight_scale", "cutlass.swizzle_mxfp4_scales(128x4)"}}},
      {F::mxfp4, "MARLIN", "", always,
       {{"w13_weight", "marlin.repack(num_bits=4)"}, {"w2_weight", "marlin.repack(num_bits=4)"},
        {"w13_weight_scale", "marlin.mxfp4_scales(group=32)"}, {"w2_weight_scale", "marlin.mxfp4_scales(group=32)"},
        {"w13_bias", "marlin.permute_bias"}, {"w2_bias", "marlin.permute_bias"}}},
      {F::mxfp4, "BATCHED_MARLIN", "", always,
       {{"w13_weight", "marlin.repack(num_bits=4)"}, {"w2_weight", "marlin.repack(num_bits=4)"},
        {"w13_weight_scale", "marlin.mxfp4_scales(group=32)"}, {"w2_weight_scale", "marlin.mxfp4_scales(group=32)"},
        {"w13_bias", "marlin.permute_bias"}, {"w2_bias", "marlin.permute_bias"}}},
      {F::mxfp4, "FLASHINFER_TRTLLM_MXFP4_BF16", "", always,
       {{"w13_weight", "trtllm_gen.mxfp4.w31_shuffled(epilogue_tile_m=128)"}, {"w2_weight", "trtllm_gen.mxfp4.shuffled(epilogue_tile_m=128)"},
        {"w13_weight_scale", "trtllm_gen.mxfp4.w31_scale_shuffled_interleaved"}, {"w2_weight_scale", "trtllm_gen.mxfp4.scale_shuffled_interleaved"},
        {"w13_bias", "trtllm_gen.mxfp4.w31_bias_shuffled(f32)"}, {"w2_bias", "trtllm_gen.mxfp4.bias_shuffled(f32)"}}},
      {F::mxfp4, "FLASHINFER_TRTLLM_MXFP4_MXFP8", "", always,
       {{"w13_weight", "trtllm_gen.mxfp4.w31_shuffled(epilogue_tile_m=128)"}, {"w2_weight", "trtllm_gen.mxfp4.shuffled(epilogue_tile_m=128)"},
        {"w13_weight_scale", "trtllm_gen.mxfp4.w31_scale_shuffled_interleaved"}, {"w2_weight_scale", "trtllm_gen.mxfp4.scale_shuffled_interleaved"},
        {"w13_bias", "trtllm_gen.mxfp4.w31_bias_shuffled(f32)"}, {"w2_bias", "trtllm_gen.mxfp4.bias_shuffled(f32)"}}},
      {F::mxfp4, "FLASHINFER_CUTLASS_MXFP4_MXFP8", "", always,
       {{"w13_weight", "flashinfer.cutlass.w31"}, {"w2_weight", "checkpoint"},
        {"w13_weight_scale", "flashinfer.block_scale_interleave(w31)"}, {"w2_weight_scale", "flashinfer.block_scale_interleave"},
        {"w13_bias", "flashinfer.cutlass.w31(bf16)"}, {"w2_bias", "bf16"}}},
      {F::mxfp4, "FLASHINFER_CUTLASS_MXFP4_BF16", "SM90 mixed-input GEMM", always,
       {{"w13_weight", "flashinfer.sm90_mixed_gemm.interleave(fp4,w31)"}, {"w2_weight", "flashinfer.sm90_mixed_gemm.interleave(fp4)"},
        {"w13_weight_scale", "flashinfer.sm90_mixed_gemm.interleave_scales(w31)"}, {"w2_weight_scale", "flashinfer.sm90_mixed_gemm.interleave_scales"},
        {"w13_bias", "flashinfer.cutlass.w31(bf16)"}, {"w2_bias", "bf16"}}},
      {F::mxfp4, "TRITON", "CUDA SM90", [](const SelectionContext& c, const Selection&) { return is_cuda_cap(c, 90); },
       {{"w13_weight", "triton_kernels.HopperMXValue(mx_axis=1,v3.5.1)"}, {"w2_weight", "triton_kernels.HopperMXValue(mx_axis=1,v3.5.1)"},
        {"w13_weight_scale", "triton_kernels.HopperMXScale(mx_axis=1,num_warps=8,v3.5.1)"}, {"w2_weight_scale", "triton_kernels.HopperMXScale(mx_axis=1,num_warps=8,v3.5.1)"},
        {"w13_bias", "f32"}, {"w2_bias", "f32"}}},
      {F::mxfp4, "TRITON", "CUDA SM100 family", [](const SelectionContext& c, const Selection&) { return c.deployment.device.is_cuda(); },
       {{"w13_weight", "triton_kernels.BlackwellMXValue(v3.5.1)"}, {"w2_weight", "triton_kernels.BlackwellMXValue(v3.5.1)"},
        {"w13_weight_scale", "triton_kernels.BlackwellMXScale(v3.5.1)"}, {"w2_weight_scale", "triton_kernels.BlackwellMXScale(v3.5.1)"},
        {"w13_bias", "f32"}, {"w2_bias", "f32"}}},
      {F::mxfp4, "TRITON", "ROCm gfx950", [](const SelectionContext& c, const Selection&) { return c.deployment.device.on_gfx950(); },
       {{"w13_weight", "triton_kernels.Strided(v3.5.1)"}, {"w2_weight", "triton_kernels.Strided(v3.5.1)"},
        {"w13_weight_scale", "triton_kernels.GFX950MXScale(v3.5.1)"}, {"w2_weight_scale", "triton_kernels.GFX950MXScale(v3.5.1)"},
        {"w13_bias", "f32"}, {"w2_bias", "f32"}}},
      {F::mxfp4, "TRITON", "other ROCm", always,
       {{"w13_weight", "triton_kernels.Strided(v3.5.1)"}, {"w2_weight", "triton_kernels.Strided(v3.5.1)"},
        {"w13_weight_scale", "triton_kernels.Strided(v3.5.1)"}, {"w2_weight_scale", "triton_kernels.Strided(v3.5.1)"},
        {"w13_bias", "f32"}, {"w2_bias", "f32"}}},
      {F::mxfp4, "TRITON_UNFUSED", "", always,
       {{"w13_weight", "triton_kernels.swizzled_mxfp4(v3.5.1)"}, {"w2_weight", "triton_kernels.swizzled_mxfp4(v3.5.1)"},
        {"w13_weight_scale", "triton_kernels.swizzled_mx_scale(v3.5.1)"}, {"w2_weight_scale", "triton_kernels.swizzled_mx_scale(v3.5.1)"},
        {"w13_bias", "f32"}, {"w2_bias", "f32"}}},
      {F::mxfp4, "AITER_MXFP4_BF16", "gpt-oss interleaved checkpoint", [](const SelectionContext& c, const Selection&) { return gpt_oss_layout(c); },
       {{"w13_weight", "aiter.a16w4_shuffle(gate_up)"}, {"w2_weight", "aiter.a16w4_shuffle"},
        {"w13_weight_scale", "aiter.a16w4_scale_shuffle(gate_up)"}, {"w2_weight_scale", "aiter.a16w4_scale_shuffle"},
        {"w13_bias", "aiter.deinterleaved(f32)"}, {"w2_bias", "f32"}}},
      {F::mxfp4, "AITER_MXFP4_BF16", "contiguous [w1; w3] checkpoint", always,
       {{"w13_weight", "aiter.shuffle_weight(gate_up_interleave)"}, {"w2_weight", "aiter.shuffle_weight"},
        {"w13_weight_scale", "aiter.shuffle_scale(gate_up_interleave)"}, {"w2_weight_scale", "aiter.shuffle_scale"},
        {"w13_bias", "f32"}, {"w2_bias", "f32"}}},
      {F::mxfp4, "AITER_MXFP4_FP8", "", always,
       {{"w13_weight", "triton_kernels.Strided(v3.5.1)"}, {"w2_weight", "triton_kernels.Strided(v3.5.1)"},
        {"w13_weight_scale", "triton_kernels.GFX950MXScale(v3.5.1)"}, {"w2_weight_scale", "triton_kernels.GFX950MXScale(v3.5.1)"},
        {"w13_input_scale", "max_over_experts(f32)"}, {"w2_input_scale", "max_over_experts(f32)"},
        {"w13_bias", "f32"}, {"w2_bias", "f32"}}},
      {F::mxfp4, "AITER_MXFP4_MXFP4", "", always,
       {{"w13_weight", "aiter.shuffle_weights"}, {"w2_weight", "aiter.shuffle_weights"},
        {"w13_weight_scale", "aiter.e8m0_shuffle"}, {"w2_weight_scale", "aiter.e8m0_shuffle"}, {"w13_bias", "f32"}, {"w2_bias", "f32"}}},
      {F::mxfp4, "DEEPGEMM_MXFP4", "", always,
       {{"w13_weight", "checkpoint"}, {"w2_weight", "checkpoint"},
        {"w13_weight_scale", "deep_gemm.sf_layout(recipe=1x1x32)"}, {"w2_weight_scale", "deep_gemm.sf_layout(recipe=1x1x32)"}}},
      {F::mxfp4, "CPU", "", always,
       {{"w13_weight", "cpu.amx_packed(block_n=32)"}, {"w2_weight", "cpu.amx_packed(block_n=32)"},
        {"w13_weight_scale", "cpu.scale_packed(block_n=32)"}, {"w2_weight_scale", "cpu.scale_packed(block_n=32)"},
        {"w13_bias", "f32"}, {"w2_bias", "f32"}}},
      {F::mxfp4, "HUMMING", "", always,
       {{"w13_weight", "humming"}, {"w2_weight", "humming"}, {"w13_weight_scale", "humming"}, {"w2_weight_scale", "humming"}}},
      {F::mxfp4, "*", "XPU, EMULATION, B12X: checkpoint bytes", always,
       {{"w13_weight", "checkpoint"}, {"w2_weight", "checkpoint"}, {"w13_weight_scale", "checkpoint"}, {"w2_weight_scale", "checkpoint"},
        {"w13_bias", "checkpoint"}, {"w2_bias", "checkpoint"}}},

      // ---- NVFP4 ----
      {F::nvfp4, "FLASHINFER_TRTLLM", "", always,
       {{"w13_weight", "trtllm_gen.nvfp4.w31_shuffled(epilogue_tile_m=128)"}, {"w2_weight", "trtllm_gen.nvfp4.shuffled(epilogue_tile_m=128)"},
        {"w13_weight_scale", "trtllm_gen.nvfp4.scale_shuffled_interleaved(w31)"}, {"w2_weight_scale", "trtllm_gen.nvfp4.scale_shuffled_interleaved"},
        {"w13_weight_scale_2", "per_expert(f32)"}, {"w2_weight_scale_2", "per_expert(f32)"},
        {"w13_input_scale", "global_max(f32)"}, {"w2_input_scale", "global_max(f32)"}}},
      {F::nvfp4, "FLASHINFER_CUTEDSL", "", always,
       {{"w13_weight", "cutedsl.w31_interleave_linear_gate(64)"}, {"w2_weight", "checkpoint"},
        {"w13_weight_scale", "swizzle_128x4(w31)"}, {"w2_weight_scale", "swizzle_128x4"},
        {"w13_weight_scale_2", "per_expert(f32)"}, {"w2_weight_scale_2", "per_expert(f32)"},
        {"w13_input_scale", "global_max(f32)"}, {"w2_input_scale", "global_max(f32)"}}},
      {F::nvfp4, "MARLIN", "", always,
       {{"w13_weight", "marlin.repack(num_bits=4)"}, {"w2_weight", "marlin.repack(num_bits=4)"},
        {"w13_weight_scale", "marlin.nvfp4_scales(group=16)"}, {"w2_weight_scale", "marlin.nvfp4_scales(group=16)"},
        {"w13_weight_scale_2", "marlin.nvfp4_global_scale"}, {"w2_weight_scale_2", "marlin.nvfp4_global_scale"}}},
      {F::nvfp4, "EMULATION", "", always,
       {{"w13_weight", "checkpoint"}, {"w2_weight", "checkpoint"}, {"w13_weight_scale", "checkpoint"}, {"w2_weight_scale", "checkpoint"},
        {"w13_weight_scale_2", "checkpoint"}, {"w2_weight_scale_2", "checkpoint"},
        {"w13_input_scale", "inverse_global_max(f32)"}, {"w2_input_scale", "inverse_global_max(f32)"}}},
      {F::nvfp4, "HUMMING", "", always,
       {{"w13_weight", "humming"}, {"w2_weight", "humming"}, {"w13_weight_scale", "humming"}, {"w2_weight_scale", "humming"}}},
      {F::nvfp4, "B12X", "", always,
       {{"w13_weight", "b12x.prepared"}, {"w2_weight", "b12x.prepared"}, {"w13_weight_scale", "b12x.prepared"}, {"w2_weight_scale", "b12x.prepared"}}},
      {F::nvfp4, "FLASHINFER_B12X", "", always,
       {{"w13_weight", "flashinfer.w31"}, {"w2_weight", "checkpoint"},
        {"w13_weight_scale", "swizzle_128x4(w31,global_scale_baked)"}, {"w2_weight_scale", "swizzle_128x4(global_scale_baked)"},
        {"w13_weight_scale_2", "ones(f32)"}, {"w2_weight_scale_2", "ones(f32)"}, {"w13_fc2_input_scale", "ones(num_local_experts,f32)"}}},
      {F::nvfp4, "*", "FLASHINFER_CUTLASS, VLLM_CUTLASS, FLASHINFER_CUTEDSL_BATCHED", always,
       {{"w13_weight", "flashinfer.w31_if_gated"}, {"w2_weight", "checkpoint"},
        {"w13_weight_scale", "swizzle_128x4(w31_if_gated)"}, {"w2_weight_scale", "swizzle_128x4"},
        {"w13_weight_scale_2", "per_expert(f32)"}, {"w2_weight_scale_2", "per_expert(f32)"},
        {"w13_input_scale", "global_or_per_expert_max(f32)"}, {"w2_input_scale", "global_or_per_expert_max(f32)"}}},

      // ---- FP8 / MXFP8 ----
      {F::fp8, "DEEPGEMM", "", always,
       {{"w13_weight", "deep_gemm.requant_ue8m0"}, {"w2_weight", "deep_gemm.requant_ue8m0"},
        {"w13_weight_scale", "deep_gemm.sf_layout(ue8m0)"}, {"w2_weight_scale", "deep_gemm.sf_layout(ue8m0)"}}},
      {F::fp8, "BATCHED_DEEPGEMM", "", always,
       {{"w13_weight", "deep_gemm.requant_ue8m0"}, {"w2_weight", "deep_gemm.requant_ue8m0"},
        {"w13_weight_scale", "deep_gemm.sf_layout(ue8m0)"}, {"w2_weight_scale", "deep_gemm.sf_layout(ue8m0)"}}},
      {F::fp8, "MARLIN", "", always,
       {{"w13_weight", "marlin.fp8_repack"}, {"w2_weight", "marlin.fp8_repack"},
        {"w13_weight_scale", "marlin.fp8_scales"}, {"w2_weight_scale", "marlin.fp8_scales"}}},
      {F::fp8, "FLASHINFER_TRTLLM", "", always,
       {{"w13_weight", "trtllm_gen.fp8.w31_shuffled"}, {"w2_weight", "trtllm_gen.fp8.shuffled"},
        {"w13_weight_scale", "trtllm_gen.fp8.w31_scales"}, {"w2_weight_scale", "trtllm_gen.fp8.scales"},
        {"w13_input_scale", "f32"}, {"w2_input_scale", "f32"}}},
      {F::fp8, "FLASHINFER_CUTLASS", "", always,
       {{"w13_weight", "flashinfer.w31"}, {"w2_weight", "checkpoint"}, {"w13_weight_scale", "flashinfer.w31_scales"}, {"w2_weight_scale", "checkpoint"},
        {"w13_input_scale", "f32"}, {"w2_input_scale", "f32"}}},
      {F::fp8, "AITER", "", always,
       {{"w13_weight", "aiter.shuffle_weights"}, {"w2_weight", "aiter.shuffle_weights"}, {"w13_weight_scale", "checkpoint"}, {"w2_weight_scale", "checkpoint"}}},
      {F::fp8, "CPU", "", always,
       {{"w13_weight", "cpu.vnni2_packed"}, {"w2_weight", "cpu.vnni2_packed"}, {"w13_weight_scale", "checkpoint"}, {"w2_weight_scale", "checkpoint"}}},
      {F::fp8, "XPU", "", always,
       {{"w13_weight", "xpu.prepared"}, {"w2_weight", "xpu.prepared"}, {"w13_weight_scale", "xpu.prepared"}, {"w2_weight_scale", "xpu.prepared"}}},
      {F::fp8, "HUMMING", "", always,
       {{"w13_weight", "humming"}, {"w2_weight", "humming"}, {"w13_weight_scale", "humming"}, {"w2_weight_scale", "humming"}}},
      {F::fp8, "*", "TRITON, VLLM_CUTLASS, HPC and their batched twins: checkpoint bytes", always,
       {{"w13_weight", "checkpoint"}, {"w2_weight", "checkpoint"}, {"w13_weight_scale", "checkpoint"}, {"w2_weight_scale", "checkpoint"},
        {"w13_input_scale", "checkpoint"}, {"w2_input_scale", "checkpoint"}}},
      {F::mxfp8, "FLASHINFER_TRTLLM", "", always,
       {{"w13_weight", "trtllm_gen.mxfp8.w31_shuffled"}, {"w2_weight", "trtllm_gen.mxfp8.shuffled"},
        {"w13_weight_scale", "trtllm_gen.mxfp8.w31_scales"}, {"w2_weight_scale", "trtllm_gen.mxfp8.scales"}}},
      {F::mxfp8, "DEEPGEMM", "", always,
       {{"w13_weight", "checkpoint"}, {"w2_weight", "checkpoint"}, {"w13_weight_scale", "deep_gemm.sf_layout(e8m0_as_f32)"}, {"w2_weight_scale", "deep_gemm.sf_layout(e8m0_as_f32)"}}},
      {F::mxfp8, "MARLIN", "", always,
       {{"w13_weight", "marlin.fp8_repack"}, {"w2_weight", "marlin.fp8_repack"}, {"w13_weight_scale", "marlin.mxfp8_scales(group=32)"}, {"w2_weight_scale", "marlin.mxfp8_scales(group=32)"}}},
      {F::mxfp8, "AITER_MXFP8", "", always,
       {{"w13_weight", "aiter.shuffle_mxfp8_moe_weights"}, {"w2_weight", "aiter.shuffle_mxfp8_moe_weights"}, {"w13_weight_scale", "aiter.shuffle_mxfp8_moe_weights"}, {"w2_weight_scale", "aiter.shuffle_mxfp8_moe_weights"}}},
      {F::mxfp8, "*", "XPU, HUMMING, TRITON_MXFP8, EMULATION: checkpoint bytes", always,
       {{"w13_weight", "checkpoint"}, {"w2_weight", "checkpoint"}, {"w13_weight_scale", "checkpoint"}, {"w2_weight_scale", "checkpoint"}}},

      // ---- WNA16 ----
      {F::wna16, "MARLIN", "AWQ checkpoint", [](const SelectionContext& c, const Selection&) { return c.query.quant_method.find("awq") != std::string::npos; },
       {{"w13_weight", "marlin.awq_repack"}, {"w2_weight", "marlin.awq_repack"}, {"w13_weight_scale", "marlin.permute_scales"}, {"w2_weight_scale", "marlin.permute_scales"},
        {"w13_qzeros", "marlin.awq_zero_points"}, {"w2_qzeros", "marlin.awq_zero_points"}, {"w13_bias", "marlin.permute_bias"}, {"w2_bias", "marlin.permute_bias"}}},
      {F::wna16, "*MARLIN", "GPTQ / compressed-tensors checkpoint", always,
       {{"w13_weight", "marlin.gptq_repack(perm=g_idx_sort)"}, {"w2_weight", "marlin.gptq_repack(perm=g_idx_sort)"},
        {"w13_weight_scale", "marlin.permute_scales"}, {"w2_weight_scale", "marlin.permute_scales"},
        {"w13_qzeros", "marlin.zero_points"}, {"w2_qzeros", "marlin.zero_points"},
        {"w13_g_idx", "sorted_g_idx"}, {"w2_g_idx", "sorted_g_idx"}, {"w13_g_idx_sort_indices", "argsort(g_idx)"}, {"w2_g_idx_sort_indices", "argsort(g_idx)"},
        {"w13_bias", "marlin.permute_bias"}, {"w2_bias", "marlin.permute_bias"}}},
      {F::wna16, "FLASHINFER_TRTLLM", "", always,
       {{"w13_weight", "trtllm_gen.mxint4.prepared"}, {"w2_weight", "trtllm_gen.mxint4.prepared"}, {"w13_weight_scale", "trtllm_gen.mxint4.prepared"}, {"w2_weight_scale", "trtllm_gen.mxint4.prepared"}}},
      {F::wna16, "TRITON", "", always,
       {{"w13_weight", "transpose_n_k(int32_as_u8)"}, {"w2_weight", "transpose_n_k(int32_as_u8)"}, {"w13_weight_scale", "checkpoint"}, {"w2_weight_scale", "checkpoint"},
        {"w13_qzeros", "transpose_n_k(int32_as_u8)"}, {"w2_qzeros", "transpose_n_k(int32_as_u8)"}}},
      {F::wna16, "CPU", "", always,
       {{"w13_weight", "cpu.int4_packed_scale_zp"}, {"w2_weight", "cpu.int4_packed_scale_zp"}, {"w13_weight_scale", "cpu.int4_packed_scale_zp"}, {"w2_weight_scale", "cpu.int4_packed_scale_zp"},
        {"w13_bias", "f32"}, {"w2_bias", "f32"}}},
      {F::wna16, "XPU", "", always,
       {{"w13_weight", "transpose_1_2(int32_as_u8)"}, {"w2_weight", "transpose_1_2(int32_as_u8)"}, {"w13_weight_scale", "checkpoint"}, {"w2_weight_scale", "checkpoint"}}},
      {F::wna16, "*", "HUMMING, EMULATION", always,
       {{"w13_weight", "backend_prepared"}, {"w2_weight", "backend_prepared"}, {"w13_weight_scale", "backend_prepared"}, {"w2_weight_scale", "backend_prepared"}}},

      // ---- INT8 / W4A8 ----
      {F::int8, "CPU", "", always,
       {{"w13_weight", "cpu.vnni4_packed_with_compensation"}, {"w2_weight", "cpu.vnni4_packed_with_compensation"}, {"w13_weight_scale", "checkpoint"}, {"w2_weight_scale", "checkpoint"}}},
      {F::int8, "*", "TRITON, HUMMING", always,
       {{"w13_weight", "checkpoint"}, {"w2_weight", "checkpoint"}, {"w13_weight_scale", "checkpoint"}, {"w2_weight_scale", "checkpoint"}}},
      {F::w4a8, "CUTLASS", "", always,
       {{"w13_weight", "cutlass.encode_reorder_int4b"}, {"w2_weight", "cutlass.encode_reorder_int4b"},
        {"w13_weight_scale", "cutlass.pack_scale_fp8"}, {"w2_weight_scale", "cutlass.pack_scale_fp8"}}},
      {F::w4a8_int8, "CPU_INT4", "", always,
       {{"w13_weight", "torch.dyn_quant_pack_4bit"}, {"w2_weight", "torch.dyn_quant_pack_4bit"}}},

      // ---- Unquantized ----
      {F::unquantized, "FLASHINFER_TRTLLM", "", always,
       {{"w13_weight", "trtllm_gen.bf16.block_major_k(w31_gated)"}, {"w2_weight", "trtllm_gen.bf16.block_major_k"}}},
      {F::unquantized, "FLASHINFER_CUTLASS", "", always, {{"w13_weight", "flashinfer.w31_if_gated"}, {"w2_weight", "checkpoint"}}},
      {F::unquantized, "AITER", "", always, {{"w13_weight", "aiter.shuffle_weights"}, {"w2_weight", "aiter.shuffle_weights"}}},
      {F::unquantized, "*", "TRITON, BATCHED_TRITON, CPU, XPU", always, {{"w13_weight", "checkpoint"}, {"w2_weight", "checkpoint"}}},
  };
  return rows;
}

bool backend_matches(const std::string& pattern, const std::string& backend) {
  if (pattern == "*") return true;
  if (!pattern.empty() && pattern[0] == '*') return backend.size() >= pattern.size() - 1 && backend.compare(backend.size() - (pattern.size() - 1), pattern.size() - 1, pattern.substr(1)) == 0;
  return pattern == backend;
}

// Roles that exist for this layer: biases only with expert biases, input scales only with
// static activation scales, zero points only when the checkpoint carries them, act-order
// tensors only with act-order.
bool role_present(const std::string& role, const SelectionContext& c, const Selection& s) {
  const MoeLayerQuery& q = c.query;
  if (role.find("_bias") != std::string::npos) return q.has_bias;
  if (role.find("_input_scale") != std::string::npos) {
    if (s.backend == "AITER_MXFP4_FP8") return true;
    if (c.query.family == Family::nvfp4) return s.activation_key.has_value();
    return s.activation_key && s.activation_key->scale.is_static;
  }
  if (role.find("qzeros") != std::string::npos) return !q.symmetric || q.has_zero_points;
  if (role.find("g_idx") != std::string::npos) return q.desc_act || q.actorder == "group" || q.actorder == "dynamic";
  if (role.find("fc2_input_scale") != std::string::npos) return true;
  return true;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> tensor_layouts(Family family, const Selection& s, const SelectionContext& ctx) {
  for (const auto& row : layout_rows()) {
    if (row.family != family || !backend_matches(row.backend, s.backend) || !row.condition(ctx, s)) continue;
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& role : row.roles)
      if (role_present(role.first, ctx, s)) out.push_back(role);
    return out;
  }
  return {};
}

std::vector<LayoutListing> layout_catalog() {
  std::vector<LayoutListing> out;
  for (const auto& row : layout_rows()) {
    if (row.roles.empty()) continue;
    out.push_back({family_name(row.family), row.backend, row.condition_text, row.roles});
  }
  return out;
}

}  // namespace moepack::oracle
