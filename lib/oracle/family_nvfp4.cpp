// NVFP4 MoE selection (vllm/model_executor/layers/fused_moe/oracle/nvfp4.py @ e9d1398d9).
//
// Weight key kNvfp4Static; activation kNvfp4Dynamic (W4A4: ModelOpt NVFP4, compressed-tensors
// NVFP4, Quark NVFP4) or None (W4A16: ModelOpt W4A16_NVFP4, compressed-tensors NVFP4A16).
// Auto priority: FLASHINFER_TRTLLM, FLASHINFER_CUTEDSL, FLASHINFER_CUTEDSL_BATCHED,
// FLASHINFER_CUTLASS, VLLM_CUTLASS, MARLIN, HUMMING, EMULATION. A model with a SwiGLU clamp
// (swiglu_limit) keeps only the clamp-capable backends. FLASHINFER_B12X and B12X are explicit only.
#include <algorithm>
#include <cctype>

#include "lib/core/layout_ids.h"
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
    // prepare_nvfp4_moe_layer_for_marlin refuses 8-bit Marlin activations (get_marlin_input_dtype).
    if (auto v = ctx.deployment.env.get("VLLM_MARLIN_INPUT_DTYPE")) {
      std::string lower;
      for (char ch : *v) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (lower == "fp8" || lower == "int8") throw OracleRaise("RuntimeError", "NVFP4 weight + INT8/FP8 activation is not supported.");
    }
    if (hidden % 128 == 0) return {hidden, round_up_to(inter, 64)};
    if (hidden % 64 != 0) throw OracleRaise("AssertionError", "hidden_size = " + std::to_string(hidden) + " unsupported by Marlin tiles");
    return {hidden, round_up_to(inter, 128)};
  }
  return {hidden, inter};  // FLASHINFER_CUTEDSL, HUMMING, EMULATION keep the loaded extents
}

// ---- Layouts (lib/convert/nvfp4_prepare.h for the values, packers/nvfp4_layouts.h and the
// shared FlashInfer TRT-LLM / Marlin packers for the byte orders) ----

// compressed-tensors allocates the input scales for the rank's experts only, so a FlashInfer
// backend's shared maximum is over them unless EPLB all-reduces it; ModelOpt allocates every
// expert's (use_global_sf) and its maximum covers the layer.
// Without expert parallelism every rank holds every expert, and both are the same maximum.
bool rank_scope(const SelectionContext& c) {
  return c.query.quant_method == "compressed-tensors" && !c.moe.parallel.enable_eplb && c.moe.parallel.ep_size > 1;
}
bool gated_of(const SelectionContext& c) { return is_gated(c.moe.activation); }
bool swigluoai_rows(const SelectionContext& c) { return c.moe.activation == MoEActivation::SWIGLUOAI; }
bool bf16_params(const SelectionContext& c) { return c.deployment.model_dtype != FloatType::float16; }
// TrtLlmNvFp4Experts folds the SwiGLU clamp and beta by g1_alphas for gated activations other than SiTU.
bool trtllm_folds(const SelectionContext& c) { return gated_of(c) && c.moe.activation != MoEActivation::SITU; }

const std::string kDropped = "dropped";  // vLLM replaces the parameter by None

std::string scope_name(bool rank) { return rank ? "rank" : "all"; }
std::string global_max(bool rank) { return "global_max_" + scope_name(rank); }
std::string scale_2_times_global(std::string_view proj, bool rank) { return layout_id::nvfp4_weight_scale_2(proj, "input_" + global_max(rank)); }
std::string input_global(std::string_view proj, bool rank) { return layout_id::nvfp4_input_scale(proj, global_max(rank)); }

using Roles = std::vector<std::pair<std::string, std::string>>;

// The FlashInfer backends that share one input scale: weights and block scales by `w13_rows`
// (the w13 reorder; "" keeps vLLM's order), weight_scale_2 with the input scale folded in.
Roles flashinfer_roles(std::string_view w13_rows, bool rank) {
  using layout_id::swizzle_blockscale;
  const std::string unchanged(layout_id::unchanged);
  return {{"w13_weight", w13_rows.empty() ? unchanged : layout_id::reorder_w13_rows(w13_rows)},
          {"w2_weight", unchanged},
          {"w13_weight_scale", swizzle_blockscale(w13_rows.empty() ? layout_id::rows::identity : w13_rows)},
          {"w2_weight_scale", swizzle_blockscale(layout_id::rows::identity)},
          {"w13_weight_scale_2", scale_2_times_global("w13", rank)},
          {"w2_weight_scale_2", scale_2_times_global("w2", rank)},
          {"w13_input_scale", input_global("w13", rank)},
          {"w2_input_scale", input_global("w2", rank)}};
}

Roles trtllm_roles(bool gated, bool rank, bool clamp, bool beta) {
  using layout_id::fi_trtllm_shuffle_matrix_a;
  using layout_id::fi_trtllm_shuffle_matrix_sf_a;
  using layout_id::rows::identity;
  const std::string_view rows = gated ? layout_id::rows::w3w1_interleave : identity;
  Roles r = {{"w13_weight", fi_trtllm_shuffle_matrix_a(rows)},
             {"w2_weight", fi_trtllm_shuffle_matrix_a(identity)},
             {"w13_weight_scale", fi_trtllm_shuffle_matrix_sf_a(rows, false)},
             {"w2_weight_scale", fi_trtllm_shuffle_matrix_sf_a(identity, false)},
             {"w13_weight_scale_2", scale_2_times_global("w13", rank)},
             {"w2_weight_scale_2", scale_2_times_global("w2", rank)},
             {"w13_input_scale", input_global("w13", rank)},
             {"w2_input_scale", input_global("w2", rank)},
             {"g1_scale_c", layout_id::trtllm_nvfp4_g1_scale_c(global_max(rank), gated)}};
  if (clamp) r.push_back({"gemm1_clamp_limit", layout_id::trtllm_nvfp4_gemm1("clamp_limit", global_max(rank))});
  if (beta) r.push_back({"gemm1_beta", layout_id::trtllm_nvfp4_gemm1("beta", global_max(rank))});
  return r;
}

Roles b12x_roles(bool gated, bool rank) {
  using layout_id::nvfp4_bake_weight_scale_2;
  using layout_id::staged;
  using layout_id::swizzle_blockscale;
  const std::string_view rows = gated ? layout_id::rows::swap_halves : layout_id::rows::identity;
  const std::string unchanged(layout_id::unchanged);
  return {{"w13_weight", gated ? layout_id::reorder_w13_rows(rows) : unchanged},
          {"w2_weight", unchanged},
          {"w13_weight_scale", staged(nvfp4_bake_weight_scale_2("w13"), swizzle_blockscale(rows))},
          {"w2_weight_scale", staged(nvfp4_bake_weight_scale_2("w2"), swizzle_blockscale(layout_id::rows::identity))},
          {"w13_weight_scale_2", layout_id::nvfp4_ones()},
          {"w2_weight_scale_2", layout_id::nvfp4_ones()},
          {"w13_input_scale", input_global("w13", rank)},
          {"w2_input_scale", input_global("w2", rank)},
          {"fc2_input_scale", layout_id::nvfp4_ones()}};
}

Roles marlin_roles(bool bf16) {
  using layout_id::nvfp4_marlin_global_scale;
  using layout_id::nvfp4_marlin_scale_factor;
  const std::string_view dt = bf16 ? "bf16" : "f16";
  const std::string weight = layout_id::marlin_fp4_repack(false);
  const std::string scales = layout_id::nvfp4_marlin_process_scales();
  return {{"w13_weight", weight},
          {"w2_weight", weight},
          {"w13_weight_scale", layout_id::staged(nvfp4_marlin_scale_factor("w13", dt), scales)},
          {"w2_weight_scale", layout_id::staged(nvfp4_marlin_scale_factor("w2", dt), scales)},
          {"w13_weight_scale_2", nvfp4_marlin_global_scale("w13", dt)},
          {"w2_weight_scale_2", nvfp4_marlin_global_scale("w2", dt)},
          {"w13_input_scale", kDropped},
          {"w2_input_scale", kDropped}};
}

// Each row's condition, as a plain function of the context.
#define NVFP4_COND(name, expr) \
  bool name(const SelectionContext& c, const Selection&) { return (expr); }
NVFP4_COND(gated_all, gated_of(c) && !rank_scope(c))
NVFP4_COND(gated_rank, gated_of(c) && rank_scope(c))
NVFP4_COND(plain_all, !gated_of(c) && !rank_scope(c))
NVFP4_COND(plain_rank, !gated_of(c) && rank_scope(c))
NVFP4_COND(oai_all, swigluoai_rows(c) && !rank_scope(c))
NVFP4_COND(oai_rank, swigluoai_rows(c) && rank_scope(c))
NVFP4_COND(bf16_model, bf16_params(c))
NVFP4_COND(trt_all_clamp_beta, trtllm_folds(c) && !rank_scope(c) && c.moe.swiglu_limit && c.moe.swiglu_beta)
NVFP4_COND(trt_rank_clamp_beta, trtllm_folds(c) && rank_scope(c) && c.moe.swiglu_limit && c.moe.swiglu_beta)
NVFP4_COND(trt_all_clamp, trtllm_folds(c) && !rank_scope(c) && c.moe.swiglu_limit)
NVFP4_COND(trt_rank_clamp, trtllm_folds(c) && rank_scope(c) && c.moe.swiglu_limit)
NVFP4_COND(trt_all_beta, trtllm_folds(c) && !rank_scope(c) && c.moe.swiglu_beta)
NVFP4_COND(trt_rank_beta, trtllm_folds(c) && rank_scope(c) && c.moe.swiglu_beta)
NVFP4_COND(trt_all_gated, trtllm_folds(c) && !rank_scope(c))
NVFP4_COND(trt_rank_gated, trtllm_folds(c) && rank_scope(c))
#undef NVFP4_COND

std::span<const LayoutRow> layouts() {
  static const std::vector<LayoutRow> rows = [] {
    std::vector<LayoutRow> r;
    namespace rows_of = layout_id::rows;
    const std::string unchanged(layout_id::unchanged);
    const char* const kAll = "ModelOpt (input scales of every expert)";
    const char* const kRank = "compressed-tensors, expert parallel without EPLB (input scales of the rank's experts)";
    // FLASHINFER_TRTLLM: gated [w3/w1 row pairs] with the clamp/beta folds, SiTU and non-gated without.
    r.push_back({"FLASHINFER_TRTLLM", std::string("gated, swiglu_limit and beta, ") + kAll, trt_all_clamp_beta, trtllm_roles(true, false, true, true)});
    r.push_back({"FLASHINFER_TRTLLM", std::string("gated, swiglu_limit and beta, ") + kRank, trt_rank_clamp_beta, trtllm_roles(true, true, true, true)});
    r.push_back({"FLASHINFER_TRTLLM", std::string("gated, swiglu_limit, ") + kAll, trt_all_clamp, trtllm_roles(true, false, true, false)});
    r.push_back({"FLASHINFER_TRTLLM", std::string("gated, swiglu_limit, ") + kRank, trt_rank_clamp, trtllm_roles(true, true, true, false)});
    r.push_back({"FLASHINFER_TRTLLM", std::string("gated, swiglu_beta, ") + kAll, trt_all_beta, trtllm_roles(true, false, false, true)});
    r.push_back({"FLASHINFER_TRTLLM", std::string("gated, swiglu_beta, ") + kRank, trt_rank_beta, trtllm_roles(true, true, false, true)});
    r.push_back({"FLASHINFER_TRTLLM", std::string("gated, ") + kAll, trt_all_gated, trtllm_roles(true, false, false, false)});
    r.push_back({"FLASHINFER_TRTLLM", std::string("gated, ") + kRank, trt_rank_gated, trtllm_roles(true, true, false, false)});
    r.push_back({"FLASHINFER_TRTLLM", std::string("not gated, ") + kAll, plain_all, trtllm_roles(false, false, false, false)});
    r.push_back({"FLASHINFER_TRTLLM", std::string("not gated, ") + kRank, plain_rank, trtllm_roles(false, true, false, false)});
    // FLASHINFER_CUTLASS: [w3; w1] when gated.
    r.push_back({"FLASHINFER_CUTLASS", std::string("gated, ") + kAll, gated_all, flashinfer_roles(rows_of::swap_halves, false)});
    r.push_back({"FLASHINFER_CUTLASS", std::string("gated, ") + kRank, gated_rank, flashinfer_roles(rows_of::swap_halves, true)});
    r.push_back({"FLASHINFER_CUTLASS", std::string("not gated, ") + kAll, plain_all, flashinfer_roles("", false)});
    r.push_back({"FLASHINFER_CUTLASS", std::string("not gated, ") + kRank, plain_rank, flashinfer_roles("", true)});
    // FLASHINFER_CUTEDSL: [w3; w1] in 64-row groups when gated (from interleaved rows for SWIGLUOAI).
    r.push_back({"FLASHINFER_CUTEDSL", std::string("SWIGLUOAI, ") + kAll, oai_all, flashinfer_roles(rows_of::cutedsl_deinterleave_interleave64, false)});
    r.push_back({"FLASHINFER_CUTEDSL", std::string("SWIGLUOAI, ") + kRank, oai_rank, flashinfer_roles(rows_of::cutedsl_deinterleave_interleave64, true)});
    r.push_back({"FLASHINFER_CUTEDSL", std::string("gated, ") + kAll, gated_all, flashinfer_roles(rows_of::cutedsl_w31_interleave64, false)});
    r.push_back({"FLASHINFER_CUTEDSL", std::string("gated, ") + kRank, gated_rank, flashinfer_roles(rows_of::cutedsl_w31_interleave64, true)});
    r.push_back({"FLASHINFER_CUTEDSL", std::string("not gated, ") + kAll, plain_all, flashinfer_roles("", false)});
    r.push_back({"FLASHINFER_CUTEDSL", std::string("not gated, ") + kRank, plain_rank, flashinfer_roles("", true)});
    // FLASHINFER_CUTEDSL_BATCHED keeps vLLM's [w1; w3].
    r.push_back({"FLASHINFER_CUTEDSL_BATCHED", kAll, [](const SelectionContext& c, const Selection&) { return !rank_scope(c); }, flashinfer_roles("", false)});
    r.push_back({"FLASHINFER_CUTEDSL_BATCHED", kRank, [](const SelectionContext& c, const Selection&) { return rank_scope(c); }, flashinfer_roles("", true)});
    // FLASHINFER_B12X: weight_scale_2 baked into the block scales, then ones.
    r.push_back({"FLASHINFER_B12X", std::string("gated, ") + kAll, gated_all, b12x_roles(true, false)});
    r.push_back({"FLASHINFER_B12X", std::string("gated, ") + kRank, gated_rank, b12x_roles(true, true)});
    r.push_back({"FLASHINFER_B12X", std::string("not gated, ") + kAll, plain_all, b12x_roles(false, false)});
    r.push_back({"FLASHINFER_B12X", std::string("not gated, ") + kRank, plain_rank, b12x_roles(false, true)});
    // VLLM_CUTLASS: vLLM's order, one input scale per expert (the larger of gate and up).
    r.push_back({"VLLM_CUTLASS",
                 "",
                 nullptr,
                 {{"w13_weight", unchanged},
                  {"w2_weight", unchanged},
                  {"w13_weight_scale", layout_id::swizzle_blockscale(rows_of::identity)},
                  {"w2_weight_scale", layout_id::swizzle_blockscale(rows_of::identity)},
                  {"w13_weight_scale_2", layout_id::nvfp4_weight_scale_2("w13", "input_expert_max")},
                  {"w2_weight_scale_2", layout_id::nvfp4_weight_scale_2("w2", "input_expert_max")},
                  {"w13_input_scale", layout_id::nvfp4_input_scale("w13", "expert_max")},
                  {"w2_input_scale", layout_id::nvfp4_input_scale("w2", "expert_max")}}});
    r.push_back({"MARLIN", "bf16 model", bf16_model, marlin_roles(true)});
    r.push_back({"MARLIN", "fp16 model", nullptr, marlin_roles(false)});
    r.push_back({"EMULATION",
                 "",
                 nullptr,
                 {{"w13_weight", unchanged},
                  {"w2_weight", unchanged},
                  {"w13_weight_scale", unchanged},
                  {"w2_weight_scale", unchanged},
                  {"w13_weight_scale_2", layout_id::nvfp4_weight_scale_2("w13", "none")},
                  {"w2_weight_scale_2", layout_id::nvfp4_weight_scale_2("w2", "none")},
                  {"w13_input_scale", layout_id::nvfp4_inverse_input_scale_max("w13")},
                  {"w2_input_scale", layout_id::nvfp4_inverse_input_scale_max("w2")}}});
    // Refused by name: their weights are converted by code outside the reference tree.
    r.push_back({"HUMMING", "", nullptr, {{"w13_weight", layout_id::external_package(layout_id::head::humming_kernel_format, "humming")}}});
    r.push_back({"B12X", "", nullptr, {{"w13_weight", layout_id::external_package(layout_id::head::b12x_prepare_weights, "b12x")}}});
    return r;
  }();
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
