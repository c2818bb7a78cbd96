#include "lib/oracle/sizes_layouts.h"

#include <cctype>
#include <functional>
#include <numeric>
#include <optional>
#include <tuple>

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
// Padded sizes (see sizes_layouts.h for which vLLM steps count and why)
// ---------------------------------------------------------------------------------------------
namespace {

// marlin_moe_padded_intermediate (quantization/utils/marlin_utils.py): the Marlin MoE thread
// tiles need intermediate % 64 == 0; the pad keeps a whole number of groups.
int marlin_moe_padded_intermediate(int intermediate, int group_size) {
  return round_up(intermediate, std::lcm(64, group_size > 0 ? group_size : 1));
}

// vLLM's FP8 conversion treats a layer as block-quantized when it has a weight_block_size, which
// the FP8 methods set exactly for 2-D scale blocks (128x128 FP8, 1x32 MXFP8); the block's column
// extent is Marlin's group size.
std::optional<int> weight_block_cols(const OptKey& w) {
  if (!w || w->scale.group.row <= 0 || w->scale.group.col <= 1) return std::nullopt;
  return w->scale.group.col;
}

// The text Python prints for NotImplementedError(fmt, arg): the repr of its argument tuple
// (the upstream call passes a %-format and its argument separately, so nothing is formatted).
std::string nvfp4_gated_padding_refusal(const std::string& backend) {
  return "('Intermediate size padding for w1 and w3, for %s NvFp4 backend, but this is not currently supported', '" + backend + "')";
}

std::pair<int, int> nvfp4_conversion_padding(const std::string& b, int hidden, int inter, bool gated, std::vector<std::string>& notes) {
  if (b == "FLASHINFER_TRTLLM") return {round_up(hidden, 256), round_up(inter, gated ? 64 : 128)};
  if (b == "B12X") {
    // Gated weights are padded per gate/up half before the swizzle, so the swizzle adds nothing.
    if (gated) return {hidden, round_up(inter, 64)};
    return {hidden, round_up(inter, 128)};
  }
  if (b == "FLASHINFER_CUTLASS" || b == "VLLM_CUTLASS" || b == "FLASHINFER_CUTEDSL_BATCHED" || b == "FLASHINFER_B12X") {
    // swizzle_blockscale pads the w13 scale rows (2*I gated, I otherwise) to 128; the weights
    // follow only for a single projection.
    const int w13_rows = gated ? 2 * inter : inter;
    if (w13_rows % 128 == 0) return {hidden, inter};
    if (gated) {
      // Selection accepted the backend; vLLM fails later, while preparing the weights.
      notes.push_back(b + " was selected, but its weight preparation cannot pad gated w1/w3 (2 * " + std::to_string(inter) +
                      " rows are not a multiple of 128), so vLLM fails while loading the layer");
      throw OracleRaise("NotImplementedError", nvfp4_gated_padding_refusal(b));
    }
    return {hidden, round_up(inter, 128)};
  }
  if (b == "MARLIN") {
    if (hidden % 128 == 0) return {hidden, round_up(inter, 64)};
    if (hidden % 64 != 0) throw OracleRaise("AssertionError", "hidden_size = " + std::to_string(hidden) + " unsupported by Marlin tiles");
    return {hidden, round_up(inter, 128)};
  }
  return {hidden, inter};  // FLASHINFER_CUTEDSL, HUMMING, EMULATION keep the loaded extents
}

std::pair<int, int> fp8_conversion_padding(const std::string& b, const OptKey& w, int hidden, int inter, bool gated) {
  const std::optional<int> block_cols = weight_block_cols(w);
  if (b == "MARLIN") return {hidden, marlin_moe_padded_intermediate(inter, block_cols.value_or(-1))};
  // Block-scaled layers (FP8 128x128, MXFP8) go through FlashInfer unpadded.
  if ((b == "FLASHINFER_CUTLASS" || b == "FLASHINFER_TRTLLM") && !block_cols) return {hidden, round_up(inter, gated ? 16 : 128)};
  return {hidden, inter};
}

}  // namespace

std::pair<int, int> padded_sizes(Family family, const Selection& s, const SelectionContext& ctx) {
  const Deployment& dep = ctx.deployment;
  // 1. Allocation: maybe_roundup_sizes.
  int hidden = all2all_rounded_hidden(ctx.moe.hidden_dim, dep.model_dtype, ctx.moe.parallel);
  int inter = ctx.moe.intermediate_size_per_partition;
  if (s.round_up != Selection::RoundUp::none) {
    std::optional<MoEActivation> act;
    if (s.round_up == Selection::RoundUp::mxfp4_with_activation) act = ctx.moe.activation;
    std::tie(hidden, inter) = mxfp4_round_up(s.backend, hidden, inter, dep.device, act);
  }
  if (ctx.query.method_class == "Fp8PerBlockOnlineMoEMethod") {
    // Online block quantization allocates whole 128x128 blocks.
    hidden = round_up(hidden, 128);
    inter = round_up(inter, 128);
  }

  // 2. Weight conversion.
  const bool gated = is_gated(ctx.moe.activation);
  switch (family) {
    case Family::nvfp4: return nvfp4_conversion_padding(s.backend, hidden, inter, gated, ctx.notes);
    case Family::fp8:
    case Family::mxfp8: return fp8_conversion_padding(s.backend, s.weight_key, hidden, inter, gated);
    case Family::wna16:
      if (s.backend == "MARLIN" || s.backend == "BATCHED_MARLIN") return {hidden, marlin_moe_padded_intermediate(inter, ctx.query.group_size)};
      return {hidden, inter};
    case Family::unquantized:
      if (s.backend == "FLASHINFER_TRTLLM" && !gated) return {hidden, round_up(inter, 128)};
      return {hidden, inter};
    case Family::mxfp4:
    case Family::int8:
    case Family::w4a8:
    case Family::w4a8_int8: return {hidden, inter};
  }
  return {hidden, inter};
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
bool gpt_oss_layout(const SelectionContext& c) {
  return c.query.method_class == "GptOssMxfp4MoEMethod" || c.query.method_class == "QuarkOCP_MX_MoEMethod";
}

// ---- MXFP4 layout ids (packers/registry.cpp) and the conditions that pick them ----
const char* const kUnchanged = "vllm.unchanged";
const char* const kBiasF32 = "vllm.bias_f32";
const char* const kScalarF32 = "vllm.scalar_f32";
const char* const kMaxOverExperts = "vllm.max_over_experts(f32)";  // a per-layer reduction (lib/convert/reductions)
const char* const kCutlassW4A4Scales = "vllm.cutlass_moe.swizzle_mxfp4_scales(sf=128x4,e9d1398d9)";
const char* const kDeepGemmScales = "deep_gemm.transform_sf_into_required_layout(recipe=1x1x32,sm100,packed_ue8m0,mn_major,8b1392b9)";
const char* const kHopperValue = "triton_kernels.HopperMXValue(mx_axis=1,v3.5.1)";
const char* const kHopperScale = "triton_kernels.HopperMXScale(mx_axis=1,num_warps=8,k_groups_pad=4,v3.5.1)";
const char* const kBlackwellValue = "triton_kernels.BlackwellMXValue(v3.5.1)";
const char* const kBlackwellScale = "triton_kernels.BlackwellMXScale(v3.5.1)";
const char* const kCdna4Scale = "triton_kernels.CDNA4MXScale(v3.5.1)";
const char* const kStrided = "triton_kernels.Strided(v3.5.1)";
const char* const kShuffleWeight = "vllm.mxfp4_triton_shuffle_weight(e9d1398d9)";

using Roles = std::vector<std::pair<std::string, std::string>>;

bool gpt_oss_converter(const SelectionContext& c, const Selection&) { return gpt_oss_layout(c); }
// _swizzle_mxfp4 (quantization/utils/mxfp4_utils.py) with triton_kernels v3.5.1's default
// layouts: capability >= 10 (SM100, SM110, SM12x) Blackwell, exactly 9 Hopper (with its scale
// groups padded to 4), below that strided; ROCm strided values, CDNA4 scales when
// should_use_cdna4_mx_scale_swizzle() (gfx950 and TP <= 2).
bool is_hopper(const SelectionContext& c) { return c.deployment.device.is_cuda() && c.deployment.device.is_device_capability(90); }
bool is_blackwell_or_newer(const SelectionContext& c) { return c.deployment.device.is_cuda() && c.deployment.device.has_device_capability(100); }
bool uses_cdna4_scales(const SelectionContext& c) { return c.deployment.device.on_gfx950() && c.deployment.parallel.tp <= 2; }
bool hopper(const SelectionContext& c, const Selection&) { return is_hopper(c); }
bool hopper_gpt_oss(const SelectionContext& c, const Selection&) { return is_hopper(c) && gpt_oss_layout(c); }
bool blackwell(const SelectionContext& c, const Selection&) { return is_blackwell_or_newer(c); }
bool blackwell_gpt_oss(const SelectionContext& c, const Selection&) { return is_blackwell_or_newer(c) && gpt_oss_layout(c); }
bool cdna4(const SelectionContext& c, const Selection&) { return uses_cdna4_scales(c); }
bool cdna4_gpt_oss(const SelectionContext& c, const Selection&) { return uses_cdna4_scales(c) && gpt_oss_layout(c); }
// get_marlin_input_dtype (quantization/utils/marlin_utils.py): FP8 activations repack with
// is_a_8bit and shift the E8M0 scales.
bool marlin_fp8_input(const SelectionContext& c, const Selection&) {
  auto v = c.deployment.env.get("VLLM_MARLIN_INPUT_DTYPE");
  if (!v) return false;
  std::string lower;
  for (char ch : *v) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return lower == "fp8";
}

// AITER v0.1.19 shuffles (vllm/_aiter_ops.py, aiter/ops/shuffle.py), ids of packers/aiter_*.
const char* const kAiterDeinterleave = "vllm.aiter_deinterleave_gate_up_rows(e9d1398d9)";
const char* const kAiterShuffleWeights = "aiter.shuffle_weight(layout=16x16,v0.1.19)";
const char* const kAiterE8m0Shuffle3d = "aiter.e8m0_shuffle(param=3d,v0.1.19)";
const char* const kAiterE8m0Shuffle2d = "aiter.e8m0_shuffle(param=2d,v0.1.19)";
const char* const kViewE8m0 = "torch.view(float8_e8m0fnu)";
std::string aiter_weight(int gate_up) {
  return "aiter.shuffle_weight(layout=16x16,is_guinterleave=1,gate_up=" + std::to_string(gate_up) + ",v0.1.19)";
}
std::string aiter_scale(int gate_up) { return "aiter.shuffle_scale(is_guinterleave=1,gate_up=" + std::to_string(gate_up) + ",v0.1.19)"; }
bool situ_activation(const SelectionContext& c, const Selection&) { return !gpt_oss_layout(c) && c.query.activation == "situ"; }
// The SiTU kernel's w13 layout: gate/up interleaved only with the A8W4 SiTU-v2 kernel enabled.
bool situ_v2_enabled(const SelectionContext& c) {
  return c.deployment.env.is_set("VLLM_ROCM_USE_AITER_MOE_SITUV2_A8W4") && c.deployment.env.true_flag("VLLM_ROCM_USE_AITER_MOE_SITUV2_A8W4", false);
}
Roles aiter_situ_roles(int gate_up) {
  return {{"w13_weight", aiter_weight(gate_up)}, {"w2_weight", aiter_weight(0)},
          {"w13_weight_scale", std::string(kViewE8m0) + " | " + aiter_scale(gate_up)},
          {"w2_weight_scale", std::string(kViewE8m0) + " | " + kAiterE8m0Shuffle2d}, {"w13_bias", kBiasF32}, {"w2_bias", kBiasF32}};
}

Roles marlin_roles(bool fp8_input) {
  std::string weights = std::string("vllm.gptq_marlin_repack(num_bits=4,fp4_codes,is_a_8bit=") + (fp8_input ? "1" : "0") + ",e9d1398d9)";
  std::string scales = std::string("vllm.mxfp4_marlin_process_scales(group_size=32,params_dtype=bf16,act=") + (fp8_input ? "fp8" : "16bit") + ",e9d1398d9)";
  std::string bias = "vllm.marlin_permute_bias(params_dtype=bf16,e9d1398d9)";
  return {{"w13_weight", weights}, {"w2_weight", weights}, {"w13_weight_scale", scales}, {"w2_weight_scale", scales},
          {"w13_bias", bias}, {"w2_bias", bias}};
}

Roles trtllm_roles(const std::string& w13_rows) {
  auto id = [](const std::string& fn, const std::string& rows, const std::string& extra) {
    return "flashinfer." + fn + "(rows=" + rows + ",epilogue_tile_m=128" + extra + ",v0.6.17)";
  };
  return {{"w13_weight", id("trtllm_shuffle_matrix_a", w13_rows, "")}, {"w2_weight", id("trtllm_shuffle_matrix_a", "identity", "")},
          {"w13_weight_scale", id("trtllm_shuffle_matrix_sf_a", w13_rows, ",sf=128x4")},
          {"w2_weight_scale", id("trtllm_shuffle_matrix_sf_a", "identity", ",sf=128x4")},
          {"w13_bias", id("trtllm_shuffle_bias", w13_rows, ",f32")}, {"w2_bias", id("trtllm_shuffle_bias", "identity", ",f32")}};
}

// FlashInfer CUTLASS: w13 rows become [w3; w1]; the gpt-oss converter leaves the w2 bias as is,
// the generic one casts it to bf16.
Roles cutlass_bias_roles(const std::string& w13_rows, bool gpt_oss) {
  return {{"w13_bias", "flashinfer.cutlass_bias(rows=" + w13_rows + ",bf16,v0.6.17)"},
          {"w2_bias", gpt_oss ? std::string(kUnchanged) : std::string("flashinfer.cutlass_bias(rows=identity,bf16,v0.6.17)")}};
}
Roles cutlass_sm100_roles(const std::string& w13_rows, bool gpt_oss) {
  Roles r = {{"w13_weight", "flashinfer.cutlass_mxfp4_weight(rows=" + w13_rows + ",v0.6.17)"},
             {"w2_weight", "flashinfer.cutlass_mxfp4_weight(rows=identity,v0.6.17)"},
             {"w13_weight_scale", "flashinfer.block_scale_interleave(rows=" + w13_rows + ",sf=128x4,v0.6.17)"},
             {"w2_weight_scale", "flashinfer.block_scale_interleave(rows=identity,sf=128x4,v0.6.17)"}};
  for (auto& b : cutlass_bias_roles(w13_rows, gpt_oss)) r.push_back(b);
  return r;
}
Roles cutlass_sm90_roles(const std::string& w13_rows, bool gpt_oss) {
  Roles r = {{"w13_weight", "flashinfer.interleave_moe_weights_for_sm90_mixed_gemm(rows=" + w13_rows + ",fp4,v0.6.17)"},
             {"w2_weight", "flashinfer.interleave_moe_weights_for_sm90_mixed_gemm(rows=identity,fp4,v0.6.17)"},
             {"w13_weight_scale", "flashinfer.interleave_moe_scales_for_sm90_mixed_gemm(rows=" + w13_rows + ",group_size=32,v0.6.17)"},
             {"w2_weight_scale", "flashinfer.interleave_moe_scales_for_sm90_mixed_gemm(rows=identity,group_size=32,v0.6.17)"}};
  for (auto& b : cutlass_bias_roles(w13_rows, gpt_oss)) r.push_back(b);
  return r;
}

// The generic converter runs shuffle_weight on the w13 weight, scale and bias before the swizzle
// (TRITON only); the gpt-oss converter does not.
Roles triton_roles(const std::string& value, const std::string& scale, bool generic_converter) {
  const std::string shuffle = std::string(kShuffleWeight) + " | ";
  return {{"w13_weight", (generic_converter ? shuffle : "") + value}, {"w2_weight", value},
          {"w13_weight_scale", (generic_converter ? shuffle : "") + scale}, {"w2_weight_scale", scale},
          {"w13_bias", generic_converter ? std::string(kBiasF32) + " | " + kShuffleWeight : std::string(kBiasF32)}, {"w2_bias", kBiasF32}};
}

const std::vector<LayoutRow>& layout_rows() {
  using F = Family;
  static const std::vector<LayoutRow> rows = {
      // ---- MXFP4 ----
      // Ids are those of packers/registry.cpp; " | " chains transforms applied in order. Which
      // converter runs decides the w13 row handling: the gpt-oss one (GptOssMxfp4MoEMethod,
      // QuarkOCP_MX_MoEMethod) keeps interleaved rows, the generic one (Mxfp4MoEMethod) has
      // [w1; w3] (fused_moe/oracle/mxfp4.py).
      {F::mxfp4, "MARLIN", "compressed-tensors / AutoRound CUTLASS W4A4",
       [](const SelectionContext&, const Selection& s) { return s.experts_class == "CutlassExpertsMxfp4"; },
       {{"w13_weight", kUnchanged}, {"w2_weight", kUnchanged}, {"w13_weight_scale", kCutlassW4A4Scales}, {"w2_weight_scale", kCutlassW4A4Scales}}},
      {F::mxfp4, "MARLIN", "FP8 activations (VLLM_MARLIN_INPUT_DTYPE=fp8)", marlin_fp8_input, marlin_roles(true)},
      {F::mxfp4, "MARLIN", "16-bit activations", always, marlin_roles(false)},
      {F::mxfp4, "BATCHED_MARLIN", "FP8 activations (VLLM_MARLIN_INPUT_DTYPE=fp8)", marlin_fp8_input, marlin_roles(true)},
      {F::mxfp4, "BATCHED_MARLIN", "16-bit activations", always, marlin_roles(false)},
      {F::mxfp4, "FLASHINFER_TRTLLM_MXFP4_*", "gpt-oss interleaved w13 (adjacent row pairs swapped)", gpt_oss_converter, trtllm_roles("swap_pairs")},
      {F::mxfp4, "FLASHINFER_TRTLLM_MXFP4_*", "[w1; w3] w13 (rebuilt as w3/w1 row pairs)", always, trtllm_roles("w3w1_interleave")},
      {F::mxfp4, "FLASHINFER_CUTLASS_MXFP4_MXFP8", "gpt-oss interleaved w13", gpt_oss_converter, cutlass_sm100_roles("deinterleave_up_first", true)},
      {F::mxfp4, "FLASHINFER_CUTLASS_MXFP4_MXFP8", "[w1; w3] w13", always, cutlass_sm100_roles("swap_halves", false)},
      {F::mxfp4, "FLASHINFER_CUTLASS_MXFP4_BF16", "gpt-oss interleaved w13, SM90 mixed-input GEMM", gpt_oss_converter, cutlass_sm90_roles("deinterleave_up_first", true)},
      {F::mxfp4, "FLASHINFER_CUTLASS_MXFP4_BF16", "[w1; w3] w13, SM90 mixed-input GEMM", always, cutlass_sm90_roles("swap_halves", false)},
      {F::mxfp4, "TRITON*", "CUDA SM90, gpt-oss converter", hopper_gpt_oss, triton_roles(kHopperValue, kHopperScale, false)},
      {F::mxfp4, "TRITON*", "CUDA SM100 and newer, gpt-oss converter", blackwell_gpt_oss, triton_roles(kBlackwellValue, kBlackwellScale, false)},
      {F::mxfp4, "TRITON*", "ROCm gfx950 with TP <= 2, gpt-oss converter", cdna4_gpt_oss, triton_roles(kStrided, kCdna4Scale, false)},
      {F::mxfp4, "TRITON*", "CUDA before SM90 and other ROCm, gpt-oss converter", gpt_oss_converter, triton_roles(kStrided, kStrided, false)},
      // The generic converter shuffles w13's last axis for TRITON only, not for TRITON_UNFUSED.
      {F::mxfp4, "TRITON", "CUDA SM90, generic converter", hopper, triton_roles(kHopperValue, kHopperScale, true)},
      {F::mxfp4, "TRITON", "CUDA SM100 and newer, generic converter", blackwell, triton_roles(kBlackwellValue, kBlackwellScale, true)},
      {F::mxfp4, "TRITON", "ROCm gfx950 with TP <= 2, generic converter", cdna4, triton_roles(kStrided, kCdna4Scale, true)},
      {F::mxfp4, "TRITON", "CUDA before SM90 and other ROCm, generic converter", always, triton_roles(kStrided, kStrided, true)},
      {F::mxfp4, "TRITON_UNFUSED", "CUDA SM90, generic converter", hopper, triton_roles(kHopperValue, kHopperScale, false)},
      {F::mxfp4, "TRITON_UNFUSED", "CUDA SM100 and newer, generic converter", blackwell, triton_roles(kBlackwellValue, kBlackwellScale, false)},
      {F::mxfp4, "TRITON_UNFUSED", "ROCm gfx950 with TP <= 2, generic converter", cdna4, triton_roles(kStrided, kCdna4Scale, false)},
      {F::mxfp4, "TRITON_UNFUSED", "CUDA before SM90 and other ROCm, generic converter", always, triton_roles(kStrided, kStrided, false)},
      // gfx1250: the generic converter sends AITER_MXFP4_BF16 down the Triton path (no shuffle).
      {F::mxfp4, "AITER_MXFP4_BF16", "gfx1250, generic converter",
       [](const SelectionContext& c, const Selection&) { return c.deployment.device.on_gfx1250() && !gpt_oss_layout(c); },
       triton_roles(kStrided, kStrided, false)},
      {F::mxfp4, "AITER_MXFP4_BF16", "gpt-oss converter (rows de-interleaved, a16w4 shuffles)", gpt_oss_converter,
       {{"w13_weight", std::string(kAiterDeinterleave) + " | " + aiter_weight(1)}, {"w2_weight", aiter_weight(0)},
        {"w13_weight_scale", std::string(kAiterDeinterleave) + " | " + aiter_scale(1)}, {"w2_weight_scale", aiter_scale(0)},
        {"w13_bias", std::string(kBiasF32) + " | " + kAiterDeinterleave}, {"w2_bias", kBiasF32}}},
      {F::mxfp4, "AITER_MXFP4_BF16", "generic converter, SiTU activation, VLLM_ROCM_USE_AITER_MOE_SITUV2_A8W4 on",
       [](const SelectionContext& c, const Selection& s) { return situ_activation(c, s) && situ_v2_enabled(c); }, aiter_situ_roles(1)},
      {F::mxfp4, "AITER_MXFP4_BF16", "generic converter, SiTU activation", situ_activation, aiter_situ_roles(0)},
      {F::mxfp4, "AITER_MXFP4_BF16", "generic converter", always,
       {{"w13_weight", aiter_weight(1)}, {"w2_weight", aiter_weight(0)}, {"w13_weight_scale", aiter_scale(1)},
        {"w2_weight_scale", aiter_scale(0)}, {"w13_bias", kBiasF32}, {"w2_bias", kBiasF32}}},
      // W4A8: the triton_kernels swizzle on ROCm. The kernel's activation scale is the maximum
      // of the static input scales over the experts, held in its precision config; the layer
      // itself keeps the per-expert fp32 [E] parameters, which is what is written.
      {F::mxfp4, "AITER_MXFP4_FP8", "gfx950 with TP <= 2", cdna4,
       {{"w13_weight", kStrided}, {"w2_weight", kStrided}, {"w13_weight_scale", kCdna4Scale}, {"w2_weight_scale", kCdna4Scale},
        {"w13_input_scale", kScalarF32}, {"w2_input_scale", kScalarF32}, {"w13_bias", kBiasF32}, {"w2_bias", kBiasF32}}},
      {F::mxfp4, "AITER_MXFP4_FP8", "other ROCm", always,
       {{"w13_weight", kStrided}, {"w2_weight", kStrided}, {"w13_weight_scale", kStrided}, {"w2_weight_scale", kStrided},
        {"w13_input_scale", kScalarF32}, {"w2_input_scale", kScalarF32}, {"w13_bias", kBiasF32}, {"w2_bias", kBiasF32}}},
      {F::mxfp4, "AITER_MXFP4_MXFP4", "", always,
       {{"w13_weight", kAiterShuffleWeights}, {"w2_weight", kAiterShuffleWeights},
        {"w13_weight_scale", kAiterE8m0Shuffle3d}, {"w2_weight_scale", kAiterE8m0Shuffle3d}, {"w13_bias", kBiasF32}, {"w2_bias", kBiasF32}}},
      {F::mxfp4, "DEEPGEMM_MXFP4", "", always,
       {{"w13_weight", kUnchanged}, {"w2_weight", kUnchanged}, {"w13_weight_scale", kDeepGemmScales}, {"w2_weight_scale", kDeepGemmScales}}},
      // Only the gpt-oss converter has a CPU branch; the generic one raises ValueError (no row).
      // That branch leaves Quark's static input scales as loaded (fp32, one per expert).
      {F::mxfp4, "CPU", "gpt-oss converter", gpt_oss_converter,
       {{"w13_weight", "cpu.sgl_convert_weight_packed(mxfp4)"}, {"w2_weight", "cpu.sgl_convert_weight_packed(mxfp4)"},
        {"w13_weight_scale", "cpu.sgl_convert_scale_packed(e8m0)"}, {"w2_weight_scale", "cpu.sgl_convert_scale_packed(e8m0)"},
        {"w13_input_scale", kScalarF32}, {"w2_input_scale", kScalarF32}, {"w13_bias", kBiasF32}, {"w2_bias", kBiasF32}}},
      {F::mxfp4, "HUMMING", "", always,
       {{"w13_weight", "humming"}, {"w2_weight", "humming"}, {"w13_weight_scale", "humming"}, {"w2_weight_scale", "humming"}}},
      // EMULATION replaces static input scales by their maximum over the experts (0-dim fp32).
      {F::mxfp4, "EMULATION", "kept as loaded; static input scales reduced to their maximum", always,
       {{"w13_weight", kUnchanged}, {"w2_weight", kUnchanged}, {"w13_weight_scale", kUnchanged}, {"w2_weight_scale", kUnchanged},
        {"w13_bias", kUnchanged}, {"w2_bias", kUnchanged}, {"w13_input_scale", kMaxOverExperts}, {"w2_input_scale", kMaxOverExperts}}},
      {F::mxfp4, "*", "XPU, B12X: kept as loaded", always,
       {{"w13_weight", kUnchanged}, {"w2_weight", kUnchanged}, {"w13_weight_scale", kUnchanged}, {"w2_weight_scale", kUnchanged},
        {"w13_bias", kUnchanged}, {"w2_bias", kUnchanged}}},

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
      {F::wna16, "*", "HUMMING, EMULATION, FLYDSL (CompressedTensorsW4A16FlydslMoEMethod)", always,
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
  if (!pattern.empty() && pattern.back() == '*') return backend.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0;
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
    // QuarkOCP_MX_MoEMethod registers them whenever the checkpoint's scales are static,
    // whichever backend then runs (the CPU one leaves them as loaded).
    if (q.quant_method == "quark") return q.static_input_scales;
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
    if (row.roles.empty()) continue;  // rows that keep nothing (none today)
    out.push_back({family_name(row.family), row.backend, row.condition_text, row.roles});
  }
  return out;
}

}  // namespace moepack::oracle
