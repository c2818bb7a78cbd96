// FP8 and MXFP8 MoE selection (vllm/model_executor/layers/fused_moe/oracle/fp8.py and mxfp8.py
// @ e9d1398d9).
//
// FP8 base priority: AITER, FLASHINFER_TRTLLM, FLASHINFER_CUTLASS, DEEPGEMM, VLLM_CUTLASS, TRITON,
// MARLIN, HUMMING, BATCHED_DEEPGEMM, BATCHED_VLLM_CUTLASS, BATCHED_TRITON, XPU, CPU, HPC; then
//   * SM100 family + DeepEP-v2 + 128-block scheme -> FLASHINFER_TRTLLM first
//   * SM90 exactly + 128-block scheme -> FLASHINFER_CUTLASS first under EP, else TRITON first
//   * XPU -> XPU first; CPU -> CPU first.
// After an explicit --moe-backend (never falls back), exporting VLLM_USE_DEEP_GEMM /
// VLLM_MOE_USE_DEEP_GEMM forces (both truthy) or removes DeepGEMM, exporting VLLM_ROCM_USE_AITER /
// VLLM_ROCM_USE_AITER_MOE forces or removes AITER, and VLLM_CUTLASS is dropped unless the method
// allows it (compressed-tensors W8A8 only).
//
// MXFP8 (fixed keys kMxfp8Static x kMxfp8Dynamic): FLASHINFER_TRTLLM, DEEPGEMM (plain
// DeepGemmExperts), MARLIN, XPU, AITER_MXFP8, HUMMING, TRITON_MXFP8, EMULATION.
#include "lib/core/layout_ids.h"
#include "lib/oracle/family.h"

namespace moepack::oracle {

namespace {

using namespace keys;

// Both FP8 families: vLLM's FP8 conversion treats a layer as block-quantized when it has a
// weight_block_size, which the FP8 methods set exactly for 2-D scale blocks (128x128 FP8, 1x32
// MXFP8); the block's column extent is Marlin's group size.
std::optional<int> weight_block_cols(const OptKey& w) {
  if (!w || w->scale.group.row <= 0 || w->scale.group.col <= 1) return std::nullopt;
  return w->scale.group.col;
}

// The conversion padding of sizes_layouts.h, step 2.
std::pair<int, int> conversion_padding(const SelectionContext& ctx, const Selection& s, int hidden, int inter) {
  const std::optional<int> block_cols = weight_block_cols(s.weight_key);
  if (s.backend == "MARLIN") return {hidden, marlin_moe_padded_intermediate(inter, block_cols.value_or(-1))};
  // Block-scaled layers (FP8 128x128, MXFP8) go through FlashInfer unpadded.
  if ((s.backend == "FLASHINFER_CUTLASS" || s.backend == "FLASHINFER_TRTLLM") && !block_cols)
    return {hidden, round_up_to(inter, is_gated(ctx.moe.activation) ? 16 : 128)};
  return {hidden, inter};
}

// ---- FP8 ----

std::span<const BackendRow> fp8_backends() {
  static const BackendRow rows[] = {
      {.name = "FLASHINFER_TRTLLM", .classes = {"TrtLlmFp8ExpertsMonolithic", "TrtLlmFp8ExpertsModular"}},
      {.name = "FLASHINFER_CUTLASS", .classes = {"FlashInferExperts"}},
      {.name = "DEEPGEMM", .classes = {"TritonOrDeepGemmExperts"}, .batched = "BATCHED_DEEPGEMM"},
      {.name = "BATCHED_DEEPGEMM", .classes = {"BatchedDeepGemmExperts"}},
      {.name = "HUMMING", .classes = {"BatchedHummingGroupedExperts", "HummingGroupedExperts", "HummingIndexedExperts"}},
      {.name = "MARLIN", .classes = {"MarlinExperts"}},
      {.name = "TRITON", .classes = {"TritonExperts"}, .batched = "BATCHED_TRITON"},
      {.name = "BATCHED_TRITON", .classes = {"BatchedTritonExperts"}},
      {.name = "AITER", .classes = {"AiterExperts"}},
      {.name = "VLLM_CUTLASS", .classes = {"TritonOrCutlassExperts"}, .batched = "BATCHED_VLLM_CUTLASS"},
      {.name = "BATCHED_VLLM_CUTLASS", .classes = {"CutlassBatchedExpertsFp8"}},
      {.name = "XPU", .classes = {"XPUExpertsFp8", "XPUExpertsMxFp8", "XPUExpertsBlockFp8"}},
      {.name = "CPU", .classes = {"CPUExpertsFp8"}},
      {.name = "HPC", .classes = {"HPCExperts"}},
  };
  return rows;
}

std::span<const MoeBackendName> fp8_moe_backend_map() {
  static const MoeBackendName rows[] = {
      {"triton", {"TRITON"}},   {"deep_gemm", {"DEEPGEMM"}}, {"cutlass", {"VLLM_CUTLASS"}}, {"flashinfer_trtllm", {"FLASHINFER_TRTLLM"}},
      {"flashinfer_cutlass", {"FLASHINFER_CUTLASS"}}, {"marlin", {"MARLIN"}}, {"humming", {"HUMMING"}}, {"aiter", {"AITER"}},
      {"hpc", {"HPC"}},
  };
  return rows;
}

bool block_scheme(const Request& r) { return r.weight_key == kFp8Static128BlockSym && r.activation_key == kFp8Dynamic128Sym; }
bool hopper_block(const SelectionContext& ctx, const Request& r) {
  return ctx.deployment.device.is_cuda() && ctx.deployment.device.is_device_capability(90) && block_scheme(r);
}

// Only compressed-tensors W8A8 (and the per-channel online method) pass allow_vllm_cutlass=True.
bool allows_vllm_cutlass(const MoeLayerQuery& q) { return q.allow_vllm_cutlass.value_or(q.quant_method == "compressed-tensors"); }

std::optional<std::string> vllm_cutlass_disallowed(const SelectionContext& ctx, const std::string& backend) {
  if ((backend == "VLLM_CUTLASS" || backend == "BATCHED_VLLM_CUTLASS") && !allows_vllm_cutlass(ctx.query))
    return "vLLM CUTLASS is not allowed for this method";
  return std::nullopt;
}

const Selector& fp8_selector() {
  static const Selector s{
      .backends = fp8_backends(),
      .moe_backend_map = fp8_moe_backend_map(),
      .map_name = "FP8",
      .priority = {{nullptr,
                    {"AITER", "FLASHINFER_TRTLLM", "FLASHINFER_CUTLASS", "DEEPGEMM", "VLLM_CUTLASS", "TRITON", "MARLIN", "HUMMING",
                     "BATCHED_DEEPGEMM", "BATCHED_VLLM_CUTLASS", "BATCHED_TRITON", "XPU", "CPU", "HPC"}}},
      .moves =
          {
              // TRT-LLM skips the padding rows DeepEP-v2's contiguous layout allocates.
              {[](const SelectionContext& c, const Request& r) {
                 const Device& d = c.deployment.device;
                 return d.is_cuda() && d.is_device_capability_family(100) && c.moe.parallel.use_deepep_v2_kernels() && block_scheme(r);
               },
               "FLASHINFER_TRTLLM", PriorityMove::To::front},
              // Hopper block FP8: Triton for TP, FlashInfer CUTLASS for EP.
              {[](const SelectionContext& c, const Request& r) { return hopper_block(c, r) && c.moe.parallel.ep_size > 1; },
               "FLASHINFER_CUTLASS", PriorityMove::To::front},
              {[](const SelectionContext& c, const Request& r) { return hopper_block(c, r) && c.moe.parallel.ep_size <= 1; }, "TRITON",
               PriorityMove::To::front},
              {[](const SelectionContext& c, const Request&) { return c.deployment.device.is_xpu(); }, "XPU", PriorityMove::To::front},
              {[](const SelectionContext& c, const Request&) { return c.deployment.device.is_cpu(); }, "CPU", PriorityMove::To::front},
          },
      .env_switches =
          {
              {{"VLLM_USE_DEEP_GEMM", "VLLM_MOE_USE_DEEP_GEMM"},
               [](const SelectionContext& c) {
                 return c.deployment.env.int_flag("VLLM_USE_DEEP_GEMM", true) && c.deployment.env.int_flag("VLLM_MOE_USE_DEEP_GEMM", true);
               },
               "DEEPGEMM", "VLLM_USE_DEEP_GEMM / VLLM_MOE_USE_DEEP_GEMM is exported and true: DeepGEMM is forced"},
              {{"VLLM_ROCM_USE_AITER", "VLLM_ROCM_USE_AITER_MOE"}, aiter_moe_forced, "AITER",
               "VLLM_ROCM_USE_AITER is exported and true: AITER is forced"},
          },
      .filters = {{.rejects = vllm_cutlass_disallowed,
                   .shown = false,
                   .forced_message = [](const SelectionContext&, const std::string&) -> std::string {
                     return "vLLM CUTLASS FP8 MoE backend is disabled for this configuration.";
                   }}},
      // The FP8 oracle quotes the backend only when it has no reason to give.
      .forced_refusal = [](const std::string& v, const std::string& r) { return unsupported_message("FP8", v, r, false); },
      .none_fit = [](SelectionContext& ctx, const Request& r, const AutoWalk&) -> Selection {
        if (ctx.deployment.device.is_cuda() || ctx.deployment.device.is_rocm())
          raise_not_implemented("No FP8 MoE backend supports the deployment configuration.");
        // Elsewhere vLLM returns (NONE, None) for out-of-tree platform plugins to fill in.
        ctx.notes.push_back("no in-tree FP8 MoE kernel fits; vLLM returns Fp8MoeBackend.NONE (left to an out-of-tree platform)");
        return {"NONE", "", r.weight_key, r.activation_key};
      },
  };
  return s;
}

Selection select_fp8(SelectionContext& ctx) {
  return select_backend(fp8_selector(), ctx, {key_named(ctx.query.weight_key), key_named(ctx.query.activation_key), ctx.activation_format(), {}});
}

// Online block quantization allocates whole 128x128 blocks.
std::pair<int, int> whole_128_blocks(const SelectionContext&, const Selection&, int hidden, int inter) {
  return {round_up_to(hidden, 128), round_up_to(inter, 128)};
}

// Fp8PtpcOnlineMoEMethod refuses the backends whose quant config drops per-channel scales.
void refuse_per_tensor_scale_backends(const Selection& s) {
  if (s.backend == "MARLIN" || s.backend == "CPU" || s.backend == "FLASHINFER_CUTLASS" || s.backend == "FLASHINFER_TRTLLM")
    throw OracleRaise("ValueError", "FP8 PTPC online MoE quant is not supported with the " + s.backend +
                                        " backend, which does not implement per-output-channel weight scales.");
}

// The FP8 methods' process_weights_after_loading before convert_to_fp8_moe_kernel_format
// (quantization/fp8.py Fp8MoEMethod, compressed_tensors_moe_w8a8_fp8.py, modelopt.py
// ModelOptFp8MoEMethod @ e9d1398d9), for the backends whose kernel takes the result as it is:
//   * per-tensor weights of a gated layer: process_fp8_weight_tensor_strategy_moe requantizes
//     each w13 shard to the larger of the expert's two scales, which becomes its one w13 scale;
//   * static input scales: process_fp8_input_tensor_strategy_moe keeps their max (0-dim), over
//     the rank's experts, or all of them under EPLB (amax_for_moe_activation_quant);
//   * every scale is an fp32 parameter (the loader widens BF16 checkpoint scales).
// Ids are lib/convert/fp8_prepare.h's and packers/registry.cpp's. On MI300-class devices
// (E4M3FNUZ) Fp8MoEMethod, compressed-tensors and Quark first run normalize_e4m3fn_to_e4m3fnuz
// (w8a8_utils.py): moepack's loader does the same (RankGeometry::fp8_fnuz), so every row below
// holds F8_E4M3FNUZ weights and doubled scales there, and the w13 requantization writes FNUZ.
// ModelOptFp8MoEMethod skips the normalization: its E4M3FN weights would meet FNUZ activations
// and requantized codes converted back by value, which moepack does not reproduce.
using Roles = std::vector<std::pair<std::string, std::string>>;
// Fp8MoEMethod (Fp8Config and its DeepSeek-V4 subclass) names block scales weight_scale_inv; the
// compressed-tensors and ModelOpt methods, and per-tensor layers, weight_scale.
std::string fp8_scale_param(const SelectionContext& c, bool block) {
  const bool fp8_method = c.query.quant_method == "fp8" || c.query.quant_method == "deepseek_v4_fp8";
  return block && fp8_method ? "weight_scale_inv" : "weight_scale";
}
Roles fp8_checkpoint_roles(const SelectionContext& c, const Selection& s) {
  if (c.fp8_is_fnuz()) {
    if (c.query.quant_method == "modelopt")
      return {{"w13_weight", layout_id::refused(layout_id::head::modelopt_fp8_moe_method,
                                                "keeps E4M3FN weights on an E4M3FNUZ device: no normalize_e4m3fn_to_e4m3fnuz")}};
    c.notes.push_back("E4M3FNUZ device: vLLM normalizes the E4M3FN checkpoint (normalize_e4m3fn_to_e4m3fnuz): weights held as F8_E4M3FNUZ "
                      "with byte 0x80 made 0x00, every weight and input scale doubled");
  }
  const bool per_tensor = s.weight_key && *s.weight_key == kFp8StaticTensorSym;
  const bool block = s.weight_key && *s.weight_key == kFp8Static128BlockSym;
  const std::string scale = fp8_scale_param(c, block);
  const std::string input = layout_id::max_over_experts(c.moe.parallel.enable_eplb);
  const std::string unchanged(layout_id::unchanged);
  Roles r;
  r.push_back({"w13_weight", per_tensor && c.moe.is_act_and_mul() ? layout_id::staged(layout_id::fp8_requant_w13_max_scale(), unchanged) : unchanged});
  r.push_back({"w2_weight", unchanged});
  r.push_back({"w13_" + scale, per_tensor ? layout_id::fp8_w13_max_scale() : unchanged});
  r.push_back({"w2_" + scale, per_tensor ? std::string(layout_id::scalar_f32) : unchanged});
  if (c.query.static_input_scales) {
    r.push_back({"w13_input_scale", input});
    r.push_back({"w2_input_scale", input});
  }
  if (c.moe.has_bias) {
    r.push_back({"w13_bias", unchanged});
    r.push_back({"w2_bias", unchanged});
  }
  return r;
}

// FlashInfer (quantization/utils/flashinfer_utils.py `prepare_fp8_moe_layer_for_fi` @ e9d1398d9),
// after the same method steps: per-tensor layers are padded to an intermediate size of 16 (gated)
// or 128 (non-gated) at the END of w13's rows, then gated w13 becomes [w3; w1]
// (swap_w13_to_w31) and, for TRT-LLM, rows interleaved and shuffled with epilogue_tile_m 128
// (rotate_weights_for_fi_trtllm_fp8_per_tensor_moe); w2 is shuffled alike. Block layers swap
// w13 and its scale rows, clamp both scales to at least 1e-10 and, for TRT-LLM, shuffle with
// epilogue_tile_m 64 into BlockMajorK (_shuffle_deepseek_fp8_moe_weights).
// A gated per-tensor layer that needs the padding is refused: padding [w1; w3] at the end and then
// swapping halves of the padded rows mixes gate and up rows (vLLM loads it and computes garbage).
Roles fp8_flashinfer_roles(const SelectionContext& c, const Selection& s) {
  const bool trtllm = s.backend == "FLASHINFER_TRTLLM";
  const bool gated = c.moe.is_act_and_mul();
  const bool block = s.weight_key && *s.weight_key == kFp8Static128BlockSym;
  const bool per_tensor = s.weight_key && *s.weight_key == kFp8StaticTensorSym;
  namespace rows = layout_id::rows;
  using layout_id::staged;
  if (!block && !per_tensor) return {{"w13_weight", layout_id::not_reproduced(layout_id::head::prepare_fp8_moe_layer_for_fi, "per-channel weights")}};
  if (per_tensor && gated && c.moe.intermediate_size_per_partition % 16 != 0)
    return {{"w13_weight", layout_id::refused(layout_id::head::align_moe_weights_for_fi, "end padding then w31 swap mixes gate and up rows")}};
  if (per_tensor && trtllm && !c.query.static_input_scales)
    return {{"w13_weight", layout_id::refused(layout_id::head::rotate_weights_for_fi_trtllm_fp8_per_tensor_moe, "asserts static input scales")}};
  Roles r = fp8_checkpoint_roles(c, s);
  const std::string scale = fp8_scale_param(c, block);
  const std::string unchanged(layout_id::unchanged);
  const std::string swap = layout_id::reorder_w13_rows(rows::swap_halves);
  // A gated per-tensor w13 is first requantized to one scale per expert.
  auto requantized = [gated](const std::string& layout) { return gated ? staged(layout_id::fp8_requant_w13_max_scale(), layout) : layout; };
  for (auto& [role, id] : r) {
    if (role == "w13_weight") {
      if (block && trtllm) id = layout_id::fi_trtllm_fp8_block_major_k(gated ? rows::swap_halves : rows::identity);
      else if (block) id = gated ? swap : unchanged;
      else if (trtllm) id = requantized(layout_id::fi_trtllm_shuffle_matrix_a(gated ? rows::w3w1_interleave : rows::identity));
      else id = gated ? requantized(swap) : unchanged;
    } else if (role == "w2_weight" && trtllm) {
      id = block ? layout_id::fi_trtllm_fp8_block_major_k(rows::identity) : layout_id::fi_trtllm_shuffle_matrix_a(rows::identity);
    } else if (block && role == "w13_" + scale) {
      id = staged(layout_id::fp8_clamp_block_scales(), gated ? swap : unchanged);
    } else if (block && role == "w2_" + scale) {
      id = staged(layout_id::fp8_clamp_block_scales(), unchanged);
    }
  }
  // CUTLASS per-tensor: make_fp8_moe_quant_config registers the dequantization alphas (weight
  // scale times input scale) as layer parameters g1_alphas / g2_alphas.
  if (!trtllm && per_tensor && c.query.static_input_scales) {
    r.push_back({"g1_alphas", layout_id::fp8_fi_cutlass_alphas(1, c.moe.parallel.enable_eplb)});
    r.push_back({"g2_alphas", layout_id::fp8_fi_cutlass_alphas(2, c.moe.parallel.enable_eplb)});
  }
  return r;
}

// CPU (experts/cpu_moe.py `prepare_fp8_moe_layer_for_cpu` @ e9d1398d9): both weights through
// sgl-kernel's convert_weight_packed (VNNI-2 pairs in 32-row blocks); the block scales stay.
Roles fp8_cpu_roles(const SelectionContext& c, const Selection& s) {
  Roles r = fp8_checkpoint_roles(c, s);
  for (auto& [role, id] : r)
    if (role == "w13_weight" || role == "w2_weight") id = layout_id::cpu_sgl_fp8_weight;
  return r;
}

// XPU (experts/xpu_moe.py `prepare_fp8_moe_layer_for_xpu` @ e9d1398d9), after the same method
// steps: every expert's weight is stored transposed, and so is a scale whose stacked param is
// 3-D (per-channel [E, N, 1], 128x128 blocks); per-tensor scales ([E]) and input scales stay.
// A checkpoint-layout role id (`vllm.unchanged`, possibly after a value stage `... => `) with
// `layout` in place of the unchanged layout; other ids are kept.
std::string then_layout(const std::string& id, const std::string& layout) {
  const std::string unchanged(layout_id::unchanged);
  if (id == unchanged) return layout;
  if (id.ends_with(std::string(layout_id::kValueStageSeparator) + unchanged)) return id.substr(0, id.size() - unchanged.size()) + layout;
  return id;
}
Roles fp8_xpu_roles(const SelectionContext& c, const Selection& s) {
  Roles r = fp8_checkpoint_roles(c, s);
  const bool per_tensor = s.weight_key && *s.weight_key == kFp8StaticTensorSym;
  for (auto& [role, id] : r) {
    const bool weight = role == "w13_weight" || role == "w2_weight";
    const bool scale = role.ends_with("_weight_scale") || role.ends_with("_weight_scale_inv");
    if (weight || (scale && !per_tensor)) id = then_layout(id, layout_id::xpu_transpose());
  }
  return r;
}

// AITER (oracle/fp8.py `convert_to_fp8_moe_kernel_format`, AITER branch @ e9d1398d9), after the
// same method steps: `rocm_aiter_ops.shuffle_weights(w13, w2)`, AITER's shuffle_weight with layout
// (16, 16), whose view for one-byte elements is the plain 16-row x 16-byte tiling of the MXFP4
// AITER packer (packers/aiter_shuffle_weight.h); the scales stay. Only OCP E4M3FN devices
// (gfx950, gfx1250) get here: MI300's FNUZ normalization is refused by fp8_checkpoint_roles.
Roles fp8_aiter_roles(const SelectionContext& c, const Selection& s) {
  Roles r = fp8_checkpoint_roles(c, s);
  for (auto& [role, id] : r)
    if (role == "w13_weight" || role == "w2_weight") id = then_layout(id, layout_id::aiter_shuffle_weight());
  return r;
}

// The FP8 Marlin weight path: FP8 bytes as GPTQ int32, then the 8-bit repack.
std::string fp8_marlin_weight() {
  return layout_id::pipeline({layout_id::pack_fp8_to_int32(), layout_id::marlin_int_repack(layout_id::IntPacking::gptq, 8)});
}

// Marlin (quantization/utils/marlin_utils_fp8.py `prepare_fp8_moe_layer_for_marlin` @ e9d1398d9;
// lib/convert/fp8_marlin.h): weights through pack_fp8_to_int32 and the 8-bit repack; scales
// rebuilt channel- or group-wise in the params dtype with Marlin's exponent bias. 8-bit Marlin
// activations raise ("Marlin W8A8 is not supported"); an fp32 model has no FP8 exponent bias in
// vLLM (fp8_fused_exponent_bias_into_scales knows fp16 and bf16 only).
Roles fp8_marlin_roles(const SelectionContext& c, const Selection& s) {
  if (auto v = c.deployment.env.get("VLLM_MARLIN_INPUT_DTYPE"); v && (*v == "fp8" || *v == "int8"))
    return {{"w13_weight",
             layout_id::refused(layout_id::head::prepare_fp8_moe_layer_for_marlin, "raises NotImplementedError: Marlin W8A8 is not supported")}};
  const FloatType dtype = c.deployment.model_dtype;
  if (dtype == FloatType::float32) return {{"w13_weight", layout_id::refused(layout_id::head::fp8_fused_exponent_bias_into_scales, "fp32 params")}};
  const bool block = s.weight_key && *s.weight_key == kFp8Static128BlockSym;
  const bool per_tensor = s.weight_key && *s.weight_key == kFp8StaticTensorSym;
  const std::string kind = block ? "block" : per_tensor ? "tensor" : "channel", d = dtype == FloatType::bfloat16 ? "BF16" : "F16";
  const int n = c.moe.intermediate_size_per_partition, padded = marlin_moe_padded_intermediate(n, block ? 128 : -1), hidden = c.moe.hidden_dim;
  auto scales = [&](bool grouped) {
    return layout_id::pipeline({layout_id::fp8_marlin_scales(kind, d), layout_id::marlin_moe_permute_scales(grouped, d)});
  };
  const std::string weight = fp8_marlin_weight();
  const std::string scale = fp8_scale_param(c, block);
  Roles r = fp8_checkpoint_roles(c, s);
  for (auto& [role, id] : r) {
    if (role == "w13_weight") id = per_tensor && c.moe.is_act_and_mul() ? layout_id::staged(layout_id::fp8_requant_w13_max_scale(), weight) : weight;
    else if (role == "w2_weight") id = weight;
    else if (role == "w13_" + scale) id = scales(block && 128 < hidden);
    else if (role == "w2_" + scale) id = scales(block && 128 < padded);
  }
  return r;
}

// DeepGEMM (quantization/utils/fp8_utils.py `prepare_fp8_moe_layer_for_deepgemm` @ e9d1398d9,
// after the same method steps; only 128x128 block layers reach it): with
// is_deep_gemm_e8m0_used() (DeepGEMM supported, which selecting it implies, and
// VLLM_USE_DEEP_GEMM_E8M0, default 1) every expert's w13 and w2 are requantized to power-of-two
// block scales (lib/convert/fp8_deepgemm.h), then DeepGEMM's transform_sf_into_required_layout
// with recipe (1, 128, 128) (csrc/apis/layout.hpp): SM90, or E8M0 off anywhere, keeps the fp32
// [N/128, K/128] grid as it is (a layout check only); the SM100 family broadcasts each block row
// to its 128 rows and packs four UE8M0 bytes per int32, MN-major, MN padded to 4 (a derivation
// from the weight and scale, lib/convert/fp8_deepgemm.h); SM120 with E8M0 reaches
// DG_HOST_UNREACHABLE at the pinned DeepGEMM.
Roles fp8_deepgemm_roles(const SelectionContext& c, const Selection& s) {
  if (!s.weight_key || *s.weight_key != kFp8Static128BlockSym)
    return {{"w13_weight", layout_id::refused(layout_id::head::prepare_fp8_moe_layer_for_deepgemm, "asserts block_quant")}};
  Roles r = fp8_checkpoint_roles(c, s);
  if (!c.deployment.env.int_flag("VLLM_USE_DEEP_GEMM_E8M0", true)) return r;
  const Device& d = c.deployment.device;
  const std::string scale = fp8_scale_param(c, true);
  const std::string unchanged(layout_id::unchanged);
  const std::string requantized_weight = layout_id::staged(layout_id::deep_gemm_requant_ue8m0("weight"), unchanged);
  std::string scale_layout = unchanged;
  if (d.is_device_capability_family(100)) {
    // The scales are rebuilt from the requantized weight and broadcast (lib/convert/fp8_deepgemm.h).
    const std::string sm100 = layout_id::pipeline({layout_id::deep_gemm_fp8_block_scales(), layout_id::deep_gemm_transform_sf("1x128x128")});
    for (auto& [role, id] : r) {
      if (role == "w13_weight" || role == "w2_weight") id = requantized_weight;
      else if (role == "w13_" + scale || role == "w2_" + scale) id = sm100;
    }
    return r;
  }
  if (d.is_device_capability_family(120))
    scale_layout = layout_id::refused(layout_id::head::deep_gemm_transform_sf, "recipe=1x128x128,sm120 fp32 with E8M0: DG_HOST_UNREACHABLE");
  for (auto& [role, id] : r) {
    if (role == "w13_weight" || role == "w2_weight") id = requantized_weight;
    else if (role == "w13_" + scale || role == "w2_" + scale) id = layout_id::staged(layout_id::deep_gemm_requant_ue8m0("scale"), scale_layout);
  }
  return r;
}

std::span<const LayoutRow> fp8_layouts() {
  const std::string unchanged(layout_id::unchanged);
  static const LayoutRow rows[] = {
      {.backend = "DEEPGEMM",
       .roles = {{"w13_weight", "E8M0: requantized to power-of-two 128x128 block scales"}, {"w2_weight", "E8M0: requantized likewise"},
                 {"w13_weight_scale", "fp32 grid (SM90, or E8M0 off); SM100: packed UE8M0, MN-major"},
                 {"w2_weight_scale", "fp32 grid (SM90, or E8M0 off); SM100: packed UE8M0, MN-major"}},
       .roles_of = fp8_deepgemm_roles},
      {.backend = "BATCHED_DEEPGEMM",
       .roles = {{"w13_weight", "E8M0: requantized to power-of-two 128x128 block scales"}, {"w2_weight", "E8M0: requantized likewise"},
                 {"w13_weight_scale", "fp32 grid (SM90, or E8M0 off); SM100: packed UE8M0, MN-major"},
                 {"w2_weight_scale", "fp32 grid (SM90, or E8M0 off); SM100: packed UE8M0, MN-major"}},
       .roles_of = fp8_deepgemm_roles},
      {.backend = "MARLIN",
       .roles = {{"w13_weight", "FP8 bytes as GPTQ int32, then gptq_marlin_repack(num_bits=8)"}, {"w2_weight", "the same"},
                 {"w13_weight_scale", "channel-/group-wise [G, N] in the params dtype, exponent bias fused, marlin_permute_scales"},
                 {"w2_weight_scale", "the same"}},
       .roles_of = fp8_marlin_roles},
      {.backend = "FLASHINFER_TRTLLM",
       .roles = {{"w13_weight", "[w3; w1], gate/up rows interleaved, shuffle_matrix_a (per-tensor); BlockMajorK (block)"},
                 {"w2_weight", "shuffle_matrix_a (per-tensor); BlockMajorK (block)"},
                 {"w13_weight_scale", "as the checkpoint-layout backends; block: [w3; w1] rows, clamped to 1e-10"},
                 {"w2_weight_scale", "as the checkpoint-layout backends; block: clamped to 1e-10"},
                 {"w13_input_scale", "max over the experts (0-dim)"}, {"w2_input_scale", "max over the experts (0-dim)"}},
       .roles_of = fp8_flashinfer_roles},
      {.backend = "FLASHINFER_CUTLASS",
       .roles = {{"w13_weight", "[w3; w1]"}, {"w2_weight", unchanged},
                 {"w13_weight_scale", "as the checkpoint-layout backends; block: [w3; w1] rows, clamped to 1e-10"},
                 {"w2_weight_scale", "as the checkpoint-layout backends; block: clamped to 1e-10"},
                 {"w13_input_scale", "max over the experts (0-dim)"}, {"w2_input_scale", "max over the experts (0-dim)"}},
       .roles_of = fp8_flashinfer_roles},
      {.backend = "AITER",
       .roles = {{"w13_weight", std::string(layout_id::head::aiter_shuffle_weight) + " (16x16 tiles; per-tensor: after the w13 requantization)"},
                 {"w2_weight", std::string(layout_id::head::aiter_shuffle_weight) + " (16x16 tiles)"},
                 {"w13_weight_scale", "as the checkpoint-layout backends"}, {"w2_weight_scale", "as the checkpoint-layout backends"}},
       .roles_of = fp8_aiter_roles},
      {.backend = "CPU",
       .roles = {{"w13_weight", std::string(layout_id::cpu_sgl_fp8_weight)}, {"w2_weight", std::string(layout_id::cpu_sgl_fp8_weight)},
                 {"w13_weight_scale", "fp32"}, {"w2_weight_scale", "fp32"}},
       .roles_of = fp8_cpu_roles},
      {.backend = "XPU",
       .roles = {{"w13_weight", "transposed [K, N] (per-tensor: after the w13 requantization)"}, {"w2_weight", "transposed [K, N]"},
                 {"w13_weight_scale", "per-channel and block scales transposed; per-tensor as the checkpoint-layout backends"},
                 {"w2_weight_scale", "the same"}},
       .roles_of = fp8_xpu_roles},
      {.backend = "HUMMING",
       .roles = {{"w13_weight", "humming"}, {"w2_weight", "humming"}, {"w13_weight_scale", "humming"}, {"w2_weight_scale", "humming"}}},
      {.backend = "*",
       .condition_text = "TRITON, VLLM_CUTLASS, HPC and their batched twins: checkpoint bytes after the method's own steps",
       .roles = {{"w13_weight", "per-tensor: requantized to the larger of the w1/w3 scales"}, {"w2_weight", unchanged},
                 {"w13_weight_scale", "per-tensor: the larger of the w1/w3 scales per expert; else fp32"}, {"w2_weight_scale", "fp32"},
                 {"w13_input_scale", "max over the experts (0-dim)"}, {"w2_input_scale", "max over the experts (0-dim)"}},
       .roles_of = fp8_checkpoint_roles},
  };
  return rows;
}

// ---- MXFP8 ----

std::span<const BackendRow> mxfp8_backends() {
  // DeepGEMM is the plain DeepGemmExperts: the Triton fallback cannot run the 1x32 MXFP8 recipe.
  static const BackendRow rows[] = {
      {.name = "FLASHINFER_TRTLLM", .classes = {"TrtLlmFp8ExpertsMonolithic", "TrtLlmFp8ExpertsModular"}},
      {.name = "DEEPGEMM", .classes = {"DeepGemmExperts"}},
      {.name = "MARLIN", .classes = {"MarlinExperts"}},
      {.name = "XPU", .classes = {"XPUExpertsFp8", "XPUExpertsMxFp8", "XPUExpertsBlockFp8"}},
      {.name = "AITER_MXFP8", .classes = {"AiterMxfp8Experts"}},
      {.name = "HUMMING", .classes = {"BatchedHummingGroupedExperts", "HummingGroupedExperts", "HummingIndexedExperts"}},
      {.name = "TRITON_MXFP8", .classes = {"Mxfp8NativeTritonExperts"}},
      {.name = "EMULATION", .classes = {"Mxfp8EmulationTritonExperts"}},
  };
  return rows;
}

std::span<const MoeBackendName> mxfp8_moe_backend_map() {
  static const MoeBackendName rows[] = {
      {"flashinfer_trtllm", {"FLASHINFER_TRTLLM"}}, {"deep_gemm", {"DEEPGEMM"}}, {"marlin", {"MARLIN"}}, {"xpu", {"XPU"}},
      {"aiter", {"AITER_MXFP8"}}, {"triton", {"TRITON_MXFP8"}}, {"humming", {"HUMMING"}},
  };
  return rows;
}

// The auto list is the enum in table order.
const Selector& mxfp8_selector() {
  static const Selector s{
      .backends = mxfp8_backends(),
      .moe_backend_map = mxfp8_moe_backend_map(),
      .map_name = "MXFP8",
      .forced_refusal = [](const std::string& v, const std::string& r) {
        return "No supported MXFP8 expert class for " + v + ": " + (r.empty() ? "None" : r);
      },
      .none_fit = [](SelectionContext&, const Request&, const AutoWalk&) -> Selection { raise_value_error("No MXFP8 MoE backends available."); },
  };
  return s;
}

Selection select_mxfp8(SelectionContext& ctx) { return select_backend(mxfp8_selector(), ctx, {kMxfp8Static, kMxfp8Dynamic, ctx.activation_format(), {}}); }

// The online MX methods quantize in 32-wide blocks (create_weights, after the round-up).
void online_mxfp8_blocks(int hidden, int inter, int, int) {
  if (hidden % 32 != 0 || inter % 32 != 0) throw OracleRaise("ValueError", "Online MXFP8 MoE requires hidden/intermediate sizes divisible by 32.");
}

// FlashInfer TRT-LLM MXFP8 (flashinfer_utils.py `prepare_fp8_moe_layer_for_fi`, MXFP8 branch, and
// `_shuffle_mxfp8_moe_weights` @ e9d1398d9): gated w13 and its E8M0 scales become [w3; w1]
// (swap_w13_to_w31), then reorder_rows_for_gated_act_gemm interleaves the rows, then
// shuffle_matrix_a / shuffle_matrix_sf_a with epilogue_tile_m 128; w2 is only shuffled. These
// are the MXFP4 TRT-LLM packers' row orders on one-byte FP8 elements; the scales stay uint8
// (no float8 view, unlike MXFP4's: the `u8` scale ids).
Roles mxfp8_trtllm_roles(const SelectionContext& c, const Selection&) {
  using layout_id::fi_trtllm_shuffle_matrix_a;
  using layout_id::fi_trtllm_shuffle_matrix_sf_a;
  using layout_id::rows::identity;
  const std::string_view rows = c.moe.is_act_and_mul() ? layout_id::rows::w3w1_interleave : identity;
  return {{"w13_weight", fi_trtllm_shuffle_matrix_a(rows)},
          {"w2_weight", fi_trtllm_shuffle_matrix_a(identity)},
          {"w13_weight_scale", fi_trtllm_shuffle_matrix_sf_a(rows, true)},
          {"w2_weight_scale", fi_trtllm_shuffle_matrix_sf_a(identity, true)}};
}

// Marlin MXFP8 (marlin_utils_fp8.py `prepare_mxfp8_moe_layer_for_marlin` @ e9d1398d9): the FP8
// Marlin weight path; E8M0 scales through the params dtype, transposed, marlin_permute_scales
// with group 32, then mxfp8_marlin_process_scales, which is mxfp4_marlin_process_scales' 16-bit
// branch (the [0, 2, 1, 3] reorder of each 4 and the E8M0 cast): the MXFP4 Marlin scale packer.
// Its E8M0 -> fp16 -> E8M0 round trip is lossy (fp16 spans 2^-24..2^15): fp16 models refused.
Roles mxfp8_marlin_roles(const SelectionContext& c, const Selection&) {
  if (c.deployment.model_dtype != FloatType::bfloat16)
    return {{"w13_weight", layout_id::not_reproduced(layout_id::head::prepare_mxfp8_moe_layer_for_marlin, "E8M0 scales through a non-bf16 params dtype")}};
  const std::string weight = fp8_marlin_weight();
  const std::string scale = layout_id::mxfp4_marlin_process_scales(false);
  return {{"w13_weight", weight}, {"w2_weight", weight}, {"w13_weight_scale", scale}, {"w2_weight_scale", scale}};
}

std::span<const LayoutRow> mxfp8_layouts() {
  const std::string deep_gemm_scales(layout_id::deep_gemm_sf_e8m0_as_f32);
  const std::string xpu_transpose = layout_id::xpu_transpose();
  const std::string aiter_shuffle(layout_id::head::aiter_shuffle_mxfp8_moe_weights);
  static const LayoutRow rows[] = {
      {.backend = "FLASHINFER_TRTLLM",
       .roles = {{"w13_weight", "[w3; w1], gate/up rows interleaved, shuffle_matrix_a"}, {"w2_weight", "shuffle_matrix_a"},
                 {"w13_weight_scale", "the same rows, shuffle_matrix_sf_a (128x4)"}, {"w2_weight_scale", "shuffle_matrix_sf_a (128x4)"}},
       .roles_of = mxfp8_trtllm_roles},
      {.backend = "DEEPGEMM",
       .roles = {{"w13_weight", "checkpoint"}, {"w2_weight", "checkpoint"}, {"w13_weight_scale", deep_gemm_scales}, {"w2_weight_scale", deep_gemm_scales}}},
      {.backend = "MARLIN",
       .roles = {{"w13_weight", "FP8 bytes as GPTQ int32, then gptq_marlin_repack(num_bits=8)"}, {"w2_weight", "the same"},
                 {"w13_weight_scale", "E8M0 transposed, marlin_permute_scales(group 32), [0,2,1,3] reorder"}, {"w2_weight_scale", "the same"}},
       .roles_of = mxfp8_marlin_roles},
      {.backend = "XPU",
       .roles = {{"w13_weight", xpu_transpose}, {"w2_weight", xpu_transpose}, {"w13_weight_scale", xpu_transpose}, {"w2_weight_scale", xpu_transpose}}},
      {.backend = "AITER_MXFP8",
       .roles = {{"w13_weight", aiter_shuffle}, {"w2_weight", aiter_shuffle}, {"w13_weight_scale", aiter_shuffle}, {"w2_weight_scale", aiter_shuffle}}},
      {.backend = "*",
       .condition_text = "HUMMING, TRITON_MXFP8, EMULATION: checkpoint bytes",
       .roles = {{"w13_weight", "checkpoint"}, {"w2_weight", "checkpoint"}, {"w13_weight_scale", "checkpoint"}, {"w2_weight_scale", "checkpoint"}}},
  };
  return rows;
}

// Fp8MoEMethod / CompressedTensorsW8A8Fp8MoEMethod.create_weights (quantization/fp8.py,
// compressed_tensors_moe_w8a8_fp8.py @ e9d1398d9): block scales must tile the per-partition
// intermediate size, as the gate/up output (block_n) and, when tensor-parallel, as down's input
// (block_k). The TP size is the engine's (get_tensor_model_parallel_world_size), also under EP.
void fp8_block_create_weights(const SelectionContext& c, const Selection& s) {
  if (!s.weight_key || *s.weight_key != kFp8Static128BlockSym) return;
  constexpr int block_n = 128, block_k = 128;
  const int inter = c.moe.intermediate_size_per_partition;
  if (inter % block_n != 0)
    raise_value_error("The output_size of gate's and up's weight = " + std::to_string(inter) + " is not divisible by weight quantization block_n = " +
                      std::to_string(block_n) + ".");
  if (c.deployment.parallel.tp > 1 && inter % block_k != 0)
    raise_value_error("The input_size of down's weight = " + std::to_string(inter) + " is not divisible by weight quantization block_k = " +
                      std::to_string(block_k) + ".");
}

}  // namespace

const FamilyDescriptor& fp8_family() {
  static const FamilyDescriptor d{
      .family = Family::fp8,
      .name = "fp8",
      .methods =
          {
              {.method_class = "Fp8MoEMethod", .reached_by = {{"fp8"}, {"deepseek_v4_fp8"}}, .select = select_fp8, .check_weights = fp8_block_create_weights},
              // ModelOptMixedPrecisionConfig hands FP8 experts to its ModelOptFp8Config.
              {.method_class = "ModelOptFp8MoEMethod", .reached_by = {{"modelopt"}, {"modelopt_mixed"}}, .select = select_fp8},
              {.method_class = "CompressedTensorsW8A8Fp8MoEMethod", .reached_by = {{"compressed-tensors"}}, .select = select_fp8, .check_weights = fp8_block_create_weights},
              {.method_class = "QuarkW8A8Fp8MoEMethod", .reached_by = {{"quark"}}, .select = select_fp8},
              // The online methods quantize 16-bit checkpoints themselves and pick their own keys
              // (_Fp8OnlineMoEBase, quantization/online/fp8.py).
              {.method_class = "Fp8PerBlockOnlineMoEMethod",
               .reached_by = {{"online"}},
               .select = select_fp8,
               .round_up = whole_128_blocks,
               .own_weight_key = "kFp8Static128BlockSym",
               .own_activation_key = "kFp8Dynamic128Sym"},
              {.method_class = "Fp8PerTensorOnlineMoEMethod",
               .select = select_fp8,
               .own_weight_key = "kFp8StaticTensorSym",
               .own_activation_key = "kFp8DynamicTensorSym"},
              {.method_class = "Fp8PtpcOnlineMoEMethod", .select = select_fp8, .check_selection = refuse_per_tensor_scale_backends},
              {.method_class = "", .select = select_fp8},
          },
      .backends = fp8_backends(),
      .moe_backend_map = fp8_moe_backend_map(),
      .conversion_padding = conversion_padding,
      .layouts = fp8_layouts(),
  };
  return d;
}

const FamilyDescriptor& mxfp8_family() {
  static const FamilyDescriptor d{
      .family = Family::mxfp8,
      .name = "mxfp8",
      .methods =
          {
              // ModelOptMixedPrecisionConfig hands MXFP8 experts to its ModelOptMxFp8Config.
              {.method_class = "ModelOptMxFp8FusedMoE", .reached_by = {{"modelopt_mxfp8"}, {"mxfp8"}, {"modelopt_mixed"}}, .select = select_mxfp8},
              {.method_class = "CompressedTensorsW8A8Mxfp8MoEMethod", .reached_by = {{"compressed-tensors"}}, .select = select_mxfp8},
              {.method_class = "Mxfp8OnlineMoEMethod", .reached_by = {{"online"}}, .select = select_mxfp8, .check_sizes = online_mxfp8_blocks},
              {.method_class = "", .select = select_mxfp8},
          },
      .backends = mxfp8_backends(),
      .moe_backend_map = mxfp8_moe_backend_map(),
      .conversion_padding = conversion_padding,
      .layouts = mxfp8_layouts(),
  };
  return d;
}

}  // namespace moepack::oracle
