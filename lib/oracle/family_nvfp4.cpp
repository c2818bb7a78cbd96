// NVFP4 MoE selection (vllm/model_executor/layers/fused_moe/oracle/nvfp4.py @ e9d1398d9).
//
// Weight key kNvfp4Static; activation kNvfp4Dynamic (W4A4: ModelOpt NVFP4, compressed-tensors
// NVFP4, Quark NVFP4) or None (W4A16: ModelOpt W4A16_NVFP4, compressed-tensors NVFP4A16).
// Auto priority: FLASHINFER_TRTLLM, FLASHINFER_CUTEDSL, FLASHINFER_CUTEDSL_BATCHED,
// FLASHINFER_CUTLASS, VLLM_CUTLASS, MARLIN, HUMMING, EMULATION. A model with a SwiGLU clamp
// (swiglu_limit) keeps only the clamp-capable backends. FLASHINFER_B12X and B12X are explicit only.
#include <algorithm>

#include "lib/oracle/family.h"

namespace moepack::oracle {

namespace {

using namespace keys;

std::span<const BackendRow> backends() {
  static const BackendRow rows[] = {
    {.name = "B12X", .classes = {"B12xExperts"}, .a16_env = "VLLM_B12X_MOE_FP4_FORCE_A16", .explicit_only = true},
    {.name = "FLASHINFER_TRTLLM", .classes = {"TrtLlmNvFp4ExpertsMonolithic", "TrtLlmNvFp4ExpertsModular"}},
    {.name = "FLASHINFER_CUTLASS", .classes = {"FlashInferExperts"}},
    {.name = "FLASHINFER_CUTEDSL", .classes = {"FlashInferCuteDSLExperts"}, .batched = "FLASHINFER_CUTEDSL_BATCHED"},
    {.name = "FLASHINFER_CUTEDSL_BATCHED",
     .classes = {"FlashInferCuteDSLBatchedExperts"},
     .extra_moe_backend_name = "flashinfer_cutedsl (batched format)"},
    {.name = "FLASHINFER_B12X", .classes = {"FlashInferB12xExperts"}, .explicit_only = true},
    {.name = "VLLM_CUTLASS", .classes = {"CutlassExpertsFp4"}},
    {.name = "MARLIN", .classes = {"MarlinExperts"}},
    {.name = "HUMMING", .classes = {"BatchedHummingGroupedExperts", "HummingGroupedExperts", "HummingIndexedExperts"}},
    {.name = "EMULATION", .classes = {"Nvfp4QuantizationEmulationTritonExperts"}},
  };
  return rows;
}

std::span<const MoeBackendName> moe_backend_map() {
  static const MoeBackendName rows[] = {
    {"b12x", {"B12X"}},
    {"cutlass", {"VLLM_CUTLASS"}},
    {"flashinfer_trtllm", {"FLASHINFER_TRTLLM"}},
    {"flashinfer_cutlass", {"FLASHINFER_CUTLASS"}},
    {"flashinfer_cutedsl", {"FLASHINFER_CUTEDSL"}},
    {"flashinfer_b12x", {"FLASHINFER_B12X"}},
    {"marlin", {"MARLIN"}},
    {"humming", {"HUMMING"}},
    {"emulation", {"EMULATION"}},
  };
  return rows;
}

// NVFP4_BACKENDS_WITH_CLAMP: the backends that apply the SwiGLU clamp of models with swiglu_limit.
std::optional<std::string> lacks_swiglu_clamp(const SelectionContext& ctx, const std::string& backend) {
  static const std::vector<std::string> kClampCapable = {"B12X", "FLASHINFER_TRTLLM", "FLASHINFER_CUTLASS", "FLASHINFER_CUTEDSL",
                                                         "VLLM_CUTLASS", "MARLIN", "EMULATION", "HUMMING"};
  if (!ctx.moe.swiglu_limit || std::find(kClampCapable.begin(), kClampCapable.end(), backend) != kClampCapable.end())
    return std::nullopt;
  return "backend does not apply the SwiGLU clamp (swiglu_limit is set)";
}

std::string clamp_refusal(const SelectionContext& ctx, const std::string&) {
  // Python's repr of the float (7.0, 10.5).
  std::string limit = std::to_string(*ctx.moe.swiglu_limit);
  limit.erase(limit.find_last_not_of('0') + 1);
  if (!limit.empty() && limit.back() == '.') limit += '0';
  return "Model sets swiglu_limit=" + limit + ", but the explicitly requested moe_backend='" + ctx.moe.moe_backend +
         "' does not apply the SwiGLU clamp. Use 'flashinfer_trtllm', 'flashinfer_cutlass', "
         "'flashinfer_cutedsl', 'cutlass', 'b12x', 'marlin', or 'humming' instead.";
}

const Selector& nvfp4_selector() {
  static const Selector s{
      .backends = backends(),
      .moe_backend_map = moe_backend_map(),
      .map_name = "NvFP4",
      .priority = {{nullptr,
                    {"FLASHINFER_TRTLLM", "FLASHINFER_CUTEDSL", "FLASHINFER_CUTEDSL_BATCHED", "FLASHINFER_CUTLASS", "VLLM_CUTLASS", "MARLIN",
                     "HUMMING", "EMULATION"}}},
      // Filtered out of the list before the walk; shown so `plan` explains why it never ran.
      .filters = {{.rejects = lacks_swiglu_clamp, .shown = true, .forced_message = clamp_refusal}},
      .forced_refusal = [](const std::string& v, const std::string& r) { return unsupported_message("NvFp4", v, r, true); },
      .none_fit = [](SelectionContext&, const Request&, const AutoWalk&) -> Selection {
        raise_not_implemented("No NvFp4 MoE backend supports the deployment configuration.");
      },
  };
  return s;
}

Selection select_nvfp4(SelectionContext& ctx) {
  return select_backend(nvfp4_selector(), ctx, {kNvfp4Static, key_named(ctx.query.activation_key), ctx.activation_format(), {}});
}

// The text Python prints for NotImplementedError(fmt, arg): the repr of its argument tuple
// (the upstream call passes a %-format and its argument separately, so nothing is formatted).
std::string gated_padding_refusal(const std::string& backend) {
  return "('Intermediate size padding for w1 and w3, for %s NvFp4 backend, but this is not currently supported', '" + backend + "')";
}

// The conversion padding of sizes_layouts.h, step 2.
std::pair<int, int> conversion_padding(const SelectionContext& ctx, const Selection& s, int hidden, int inter) {
  const std::string& b = s.backend;
  const bool gated = is_gated(ctx.moe.activation);
  if (b == "FLASHINFER_TRTLLM") return {round_up_to(hidden, 256), round_up_to(inter, gated ? 64 : 128)};
  if (b == "B12X") {
    // Gated weights are padded per gate/up half before the swizzle, so the swizzle adds nothing.
    if (gated) return {hidden, round_up_to(inter, 64)};
    return {hidden, round_up_to(inter, 128)};
  }
  if (b == "FLASHINFER_CUTLASS" || b == "VLLM_CUTLASS" || b == "FLASHINFER_CUTEDSL_BATCHED" || b == "FLASHINFER_B12X") {
    // swizzle_blockscale pads the w13 scale rows (2*I gated, I otherwise) to 128; the weights
    // follow only for a single projection.
    const int w13_rows = gated ? 2 * inter : inter;
    if (w13_rows % 128 == 0) return {hidden, inter};
    if (gated) {
      // Selection accepted the backend; vLLM fails later, while preparing the weights.
      ctx.notes.push_back(b + " was selected, but its weight preparation cannot pad gated w1/w3 (2 * " + std::to_string(inter) +
                          " rows are not a multiple of 128), so vLLM fails while loading the layer");
      throw OracleRaise("NotImplementedError", gated_padding_refusal(b));
    }
    return {hidden, round_up_to(inter, 128)};
  }
  if (b == "MARLIN") {
    if (hidden % 128 == 0) return {hidden, round_up_to(inter, 64)};
    if (hidden % 64 != 0) throw OracleRaise("AssertionError", "hidden_size = " + std::to_string(hidden) + " unsupported by Marlin tiles");
    return {hidden, round_up_to(inter, 128)};
  }
  return {hidden, inter};  // FLASHINFER_CUTEDSL, HUMMING, EMULATION keep the loaded extents
}

std::span<const LayoutRow> layouts() {
  static const LayoutRow rows[] = {
    {.backend = "FLASHINFER_TRTLLM",
     .roles = {{"w13_weight", "trtllm_gen.nvfp4.w31_shuffled(epilogue_tile_m=128)"}, {"w2_weight", "trtllm_gen.nvfp4.shuffled(epilogue_tile_m=128)"},
               {"w13_weight_scale", "trtllm_gen.nvfp4.scale_shuffled_interleaved(w31)"}, {"w2_weight_scale", "trtllm_gen.nvfp4.scale_shuffled_interleaved"},
               {"w13_weight_scale_2", "per_expert(f32)"}, {"w2_weight_scale_2", "per_expert(f32)"},
               {"w13_input_scale", "global_max(f32)"}, {"w2_input_scale", "global_max(f32)"}}},
    {.backend = "FLASHINFER_CUTEDSL",
     .roles = {{"w13_weight", "cutedsl.w31_interleave_linear_gate(64)"}, {"w2_weight", "checkpoint"},
               {"w13_weight_scale", "swizzle_128x4(w31)"}, {"w2_weight_scale", "swizzle_128x4"},
               {"w13_weight_scale_2", "per_expert(f32)"}, {"w2_weight_scale_2", "per_expert(f32)"},
               {"w13_input_scale", "global_max(f32)"}, {"w2_input_scale", "global_max(f32)"}}},
    {.backend = "MARLIN",
     .roles = {{"w13_weight", "marlin.repack(num_bits=4)"}, {"w2_weight", "marlin.repack(num_bits=4)"},
               {"w13_weight_scale", "marlin.nvfp4_scales(group=16)"}, {"w2_weight_scale", "marlin.nvfp4_scales(group=16)"},
               {"w13_weight_scale_2", "marlin.nvfp4_global_scale"}, {"w2_weight_scale_2", "marlin.nvfp4_global_scale"}}},
    {.backend = "EMULATION",
     .roles = {{"w13_weight", "checkpoint"}, {"w2_weight", "checkpoint"}, {"w13_weight_scale", "checkpoint"}, {"w2_weight_scale", "checkpoint"},
               {"w13_weight_scale_2", "checkpoint"}, {"w2_weight_scale_2", "checkpoint"},
               {"w13_input_scale", "inverse_global_max(f32)"}, {"w2_input_scale", "inverse_global_max(f32)"}}},
    {.backend = "HUMMING",
     .roles = {{"w13_weight", "humming"}, {"w2_weight", "humming"}, {"w13_weight_scale", "humming"}, {"w2_weight_scale", "humming"}}},
    {.backend = "B12X",
     .roles = {{"w13_weight", "b12x.prepared"}, {"w2_weight", "b12x.prepared"}, {"w13_weight_scale", "b12x.prepared"}, {"w2_weight_scale", "b12x.prepared"}}},
    {.backend = "FLASHINFER_B12X",
     .roles = {{"w13_weight", "flashinfer.w31"}, {"w2_weight", "checkpoint"},
               {"w13_weight_scale", "swizzle_128x4(w31,global_scale_baked)"}, {"w2_weight_scale", "swizzle_128x4(global_scale_baked)"},
               {"w13_weight_scale_2", "ones(f32)"}, {"w2_weight_scale_2", "ones(f32)"}, {"w13_fc2_input_scale", "ones(num_local_experts,f32)"}}},
    {.backend = "*",
     .condition_text = "FLASHINFER_CUTLASS, VLLM_CUTLASS, FLASHINFER_CUTEDSL_BATCHED",
     .roles = {{"w13_weight", "flashinfer.w31_if_gated"}, {"w2_weight", "checkpoint"},
               {"w13_weight_scale", "swizzle_128x4(w31_if_gated)"}, {"w2_weight_scale", "swizzle_128x4"},
               {"w13_weight_scale_2", "per_expert(f32)"}, {"w2_weight_scale_2", "per_expert(f32)"},
               {"w13_input_scale", "global_or_per_expert_max(f32)"}, {"w2_input_scale", "global_or_per_expert_max(f32)"}}},
  };
  return rows;
}

void require_blackwell(const MoeLayerQuery&, const Deployment& dep) {
  if (!dep.device.is_device_capability_family(100))
    throw OracleRaise("ValueError", "nvfp4_per_token online quantization requires a Blackwell (SM100) GPU.");
}

}  // namespace

const FamilyDescriptor& nvfp4_family() {
  static const FamilyDescriptor d{
      .family = Family::nvfp4,
      .name = "nvfp4",
      .methods =
          {
              // ModelOptMixedPrecisionConfig hands NVFP4 experts to its ModelOptNvFp4Config.
              {.method_class = "ModelOptNvFp4FusedMoE", .reached_by = {{"modelopt_fp4"}, {"deepseek_v4_fp8"}, {"modelopt_mixed"}}, .select = select_nvfp4},
              {.method_class = "CompressedTensorsW4A4Nvfp4MoEMethod", .reached_by = {{"compressed-tensors"}}, .select = select_nvfp4},
              {.method_class = "QuarkNvfp4MoEMethod", .reached_by = {{"quark"}}, .select = select_nvfp4},
              {.method_class = "Nvfp4OnlineMoEMethod", .reached_by = {{"online"}}, .select = select_nvfp4, .check_deployment = require_blackwell},
              {.method_class = "", .select = select_nvfp4},
          },
      .backends = backends(),
      .moe_backend_map = moe_backend_map(),
      .conversion_padding = conversion_padding,
      .layouts = layouts(),
  };
  return d;
}

}  // namespace moepack::oracle
