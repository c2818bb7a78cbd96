// MXFP4 MoE selection (vllm/model_executor/layers/fused_moe/oracle/mxfp4.py @ e9d1398d9), the
// method-side dispatch that surrounds it, and the layouts its weight converters produce:
//
//   method class                          selector
//   GptOssMxfp4MoEMethod (gpt_oss_mxfp4)   select_mxfp4_moe_backend(moe)                 -> gpt-oss list
//   Mxfp4OnlineMoEMethod (online mxfp4)    select_mxfp4_moe_backend(moe, kMxfp4Dynamic)
//   QuarkOCP_MX_MoEMethod (quark)          by OCP-MX scheme, see select_quark()
//   Mxfp4MoEMethod (mxfp4, deepseek_v4_fp8) select_deepseek_v4_mxfp4_moe_backend(moe)
//   CompressedTensorsW4A4Mxfp4MoEMethod,   no oracle: CUTLASS W4A4 on 10.0 <= SM < 12.0, XPU,
//   INCMxfp4MoEMethod                      else Marlin (only --moe-backend b12x consults it)
#include <algorithm>
#include <cctype>

#include "lib/core/layout_ids.h"
#include "lib/oracle/family.h"

namespace moepack::oracle {

namespace {

using namespace keys;

// Mxfp4MoeBackend members with the activation key each runs with by default
// (_backend_activation_key). AITER is an alias of AITER_MXFP4_BF16 and never appears by name.
std::span<const BackendRow> backends() {
  static const BackendRow rows[] = {
      {.name = "B12X_MXFP4_MXFP8", .classes = {"B12xExperts"}, .activation = kMxfp8Dynamic, .explicit_only = true},
      {.name = "B12X_MXFP4_BF16", .classes = {"B12xExperts"}, .explicit_only = true},
      {.name = "DEEPGEMM_MXFP4", .classes = {"DeepGemmFP4Experts"}, .activation = kFp8Dynamic128Sym},
      {.name = "FLASHINFER_TRTLLM_MXFP4_MXFP8", .classes = {"TrtLlmMxfp4ExpertsMonolithic", "TrtLlmMxfp4ExpertsModular"}, .activation = kMxfp8Dynamic},
      {.name = "FLASHINFER_TRTLLM_MXFP4_BF16", .classes = {"TrtLlmMxfp4ExpertsMonolithic", "TrtLlmMxfp4ExpertsModular"}},
      {.name = "FLASHINFER_CUTLASS_MXFP4_MXFP8", .classes = {"FlashInferExperts"}, .activation = kMxfp8Dynamic},
      {.name = "FLASHINFER_CUTLASS_MXFP4_BF16", .classes = {"FlashInferExperts"}},
      {.name = "BATCHED_MARLIN", .classes = {"BatchedMarlinExperts"}},
      {.name = "MARLIN", .classes = {"MarlinExperts"}, .batched = "BATCHED_MARLIN"},
      {.name = "AITER_MXFP4_BF16", .classes = {"AiterExperts", "AiterW4A16ExpertsMonolithic"}},
      {.name = "AITER_MXFP4_FP8", .classes = {"AiterW4A8ExpertsMonolithic"}, .activation = kFp8StaticTensorSym},
      {.name = "AITER_MXFP4_MXFP4", .classes = {"AiterExperts"}, .activation = kMxfp4Dynamic},
      {.name = "TRITON", .classes = {"OAITritonMxfp4ExpertsMonolithic", "OAITritonExperts"}},
      {.name = "TRITON_UNFUSED", .classes = {"UnfusedOAITritonExperts"}},
      {.name = "XPU", .classes = {"XPUExpertsMxFp4"}},
      {.name = "CPU", .classes = {"CPUExpertsMxfp4"}},
      // EMULATION runs whatever activation key was requested.
      {.name = "EMULATION", .classes = {"OCP_MXQuantizationEmulationTritonExperts"}, .takes_requested_activation = true},
      {.name = "HUMMING",
       .classes = {"BatchedHummingGroupedExperts", "HummingGroupedExperts", "HummingIndexedExperts"},
       .explicit_only = true},
  };
  return rows;
}

// map_mxfp4_backend: vendor names return every activation variant; the activation key picks
// among them. The *_afp8, aiter_mxfp4_*, xpu and cpu keys are not MoEBackend literals, so the
// CLI can never reach them.
std::span<const MoeBackendName> moe_backend_map() {
  static const MoeBackendName rows[] = {
      {"b12x", {"B12X_MXFP4_MXFP8", "B12X_MXFP4_BF16"}},
      {"deep_gemm", {"DEEPGEMM_MXFP4"}},
      {"flashinfer_trtllm", {"FLASHINFER_TRTLLM_MXFP4_BF16", "FLASHINFER_TRTLLM_MXFP4_MXFP8"}},
      {"flashinfer_trtllm_afp8", {"FLASHINFER_TRTLLM_MXFP4_MXFP8"}},
      {"flashinfer_cutlass", {"FLASHINFER_CUTLASS_MXFP4_BF16", "FLASHINFER_CUTLASS_MXFP4_MXFP8"}},
      {"flashinfer_cutlass_afp8", {"FLASHINFER_CUTLASS_MXFP4_MXFP8"}},
      {"triton", {"TRITON"}},
      {"triton_unfused", {"TRITON_UNFUSED"}},
      {"humming", {"HUMMING"}},
      {"marlin", {"MARLIN"}},
      {"aiter", {"AITER_MXFP4_BF16", "AITER_MXFP4_FP8", "AITER_MXFP4_MXFP4"}},
      {"aiter_mxfp4_fp8", {"AITER_MXFP4_FP8"}},
      {"aiter_mxfp4_mxfp4", {"AITER_MXFP4_MXFP4"}},
      {"xpu", {"XPU"}},
      {"cpu", {"CPU"}},
      {"emulation", {"EMULATION"}},
  };
  return rows;
}

const BackendRow& row_named(const std::string& name) {
  for (const BackendRow& b : backends())
    if (b.name == name) return b;
  raise_value_error("Unknown MXFP4 MoE backend: " + name);
}

// _filter_by_activation: with a requested key keep the variants running it plus EMULATION;
// without one prefer the BF16 variants if the list has any.
std::vector<std::string> filter_by_activation(const std::vector<std::string>& names, const OptKey& requested) {
  std::vector<std::string> out;
  if (requested) {
    for (const auto& n : names)
      if (row_named(n).activation == requested || n == "EMULATION") out.push_back(n);
    return out;
  }
  for (const auto& n : names)
    if (!row_named(n).activation) out.push_back(n);
  return out.empty() ? names : out;
}

// The variants an explicit --moe-backend keeps.
std::vector<std::string> requested_variants(const SelectionContext& ctx, const std::string& runner, const OptKey& requested,
                                            std::vector<std::string> mapped) {
  if (runner == "b12x") {
    if (ctx.deployment.env.int_flag("VLLM_B12X_MOE_FP4_FORCE_A16", false)) return {"B12X_MXFP4_BF16"};
    // W4A8 is b12x's preferred path when the model asks for no activation format.
    if (!requested) return mapped;
  }
  return filter_by_activation(mapped, requested);
}

// select_mxfp4_moe_backend narrows the auto list by activation too.
std::vector<std::string> gpt_oss_variants(const SelectionContext& ctx, const Request& r, const std::string& runner,
                                          std::vector<std::string> names) {
  if (runner == "auto") return filter_by_activation(names, r.activation_key);
  return requested_variants(ctx, runner, r.activation_key, std::move(names));
}

// select_deepseek_v4_mxfp4_moe_backend walks its platform list as it is.
std::vector<std::string> deepseek_v4_variants(const SelectionContext& ctx, const Request& r, const std::string& runner,
                                              std::vector<std::string> names) {
  if (runner == "auto") return names;
  return requested_variants(ctx, runner, r.activation_key, std::move(names));
}

std::string mxfp4_refusal(const std::string& value, const std::string& reason) { return unsupported_message("Mxfp4", value, reason, true); }

// The gpt-oss priority list (_get_priority_backends_for_gpt_oss). TRITON_UNFUSED is commented
// out upstream ("bug with MTP support"); DEEPGEMM_MXFP4, HUMMING, CPU and B12X are explicit only.
const Selector& gpt_oss_selector();

Selection gpt_oss_none_fit(SelectionContext& ctx, const Request& r, const AutoWalk& walk) {
  // Platform fallbacks after the list; both drop the requested activation key.
  const Request plain{r.weight_key, std::nullopt, r.format, r.declared_activation_key};
  if (ctx.deployment.device.is_xpu()) return return_or_raise(gpt_oss_selector(), ctx, plain, "XPU");
  if (ctx.deployment.device.is_cpu()) return return_or_raise(gpt_oss_selector(), ctx, plain, "CPU");
  std::string reasons;
  for (size_t i = 0; i < walk.rejections.size(); ++i)
    reasons += (i ? "; " : "") + std::string("backend: ") + walk.rejections[i].first + ", reason: " + walk.rejections[i].second;
  std::vector<std::string> values;
  for (const auto& n : walk.backends) values.push_back(row_named(n).shown_value());
  raise_not_implemented("No MXFP4 MoE backend supports the deployment configuration. weight_key=kMxfp4Static, activation_key=" +
                        ctx.key_text(r.declared_activation_key) + ". Candidate backends were: " + py_list(values) +
                        ". Unsupported reasons: " + reasons + ". ");
}

const Selector& gpt_oss_selector() {
  static const Selector s{
      .backends = backends(),
      .moe_backend_map = moe_backend_map(),
      .map_name = "MXFP4",
      .priority = {{nullptr,
                    {"FLASHINFER_TRTLLM_MXFP4_BF16", "FLASHINFER_TRTLLM_MXFP4_MXFP8", "AITER_MXFP4_BF16", "AITER_MXFP4_FP8", "AITER_MXFP4_MXFP4",
                     "TRITON", "FLASHINFER_CUTLASS_MXFP4_BF16", "FLASHINFER_CUTLASS_MXFP4_MXFP8", "MARLIN", "BATCHED_MARLIN", "XPU", "EMULATION"}}},
      .narrow = gpt_oss_variants,
      .activation_variants = true,
      .forced_refusal = mxfp4_refusal,
      .none_fit = gpt_oss_none_fit,
  };
  return s;
}

// The DeepSeek-V4 style list (_get_priority_backends) by platform.
const Selector& deepseek_v4_selector() {
  static const Selector s{
      .backends = backends(),
      .moe_backend_map = moe_backend_map(),
      .map_name = "MXFP4",
      .priority = {{[](const SelectionContext& c, const Request&) {
                      return c.deployment.device.is_rocm() && c.moe.routing == RoutingMethodType::DeepseekV4;
                    },
                    {"AITER_MXFP4_BF16", "TRITON_UNFUSED"}},
                   {[](const SelectionContext& c, const Request&) { return c.deployment.device.is_rocm(); }, {"AITER_MXFP4_BF16", "EMULATION"}},
                   {[](const SelectionContext& c, const Request&) { return c.deployment.device.is_xpu(); }, {"XPU"}},
                   {nullptr, {"FLASHINFER_TRTLLM_MXFP4_MXFP8", "DEEPGEMM_MXFP4", "MARLIN", "BATCHED_MARLIN"}}},
      .narrow = deepseek_v4_variants,
      .activation_variants = true,
      .forced_refusal = mxfp4_refusal,
      // Upstream discards the per-backend reasons here (complaint in vLLM PR #57821); `plan`
      // still shows them as candidates.
      .none_fit = [](SelectionContext&, const Request&, const AutoWalk&) -> Selection {
        raise_not_implemented("No MXFP4 MoE backend supports the deployment configuration.");
      },
  };
  return s;
}

// _resolve_activation_key: combine the model's key with quantization_config.moe.activation.
OptKey resolve_activation_key(const SelectionContext& ctx, const OptKey& model_key) {
  if (!ctx.deployment.moe_activation) return model_key;
  auto user = quant_key_by_user_name(*ctx.deployment.moe_activation);
  if (!user)
    raise_value_error("unknown quantization name '" + *ctx.deployment.moe_activation + "'; expected one of " +
                      py_list(user_quant_key_names()));
  if (!model_key || *model_key == *user) return user;
  raise_value_error("checkpoint declares MoE activation=" + ctx.key_text(model_key) +
                    " but quantization_config.moe.activation=" + ctx.key_text(user) +
                    "; remove the override or align it with the checkpoint.");
}

// select_mxfp4_moe_backend(config, activation_key).
Selection select_mxfp4_moe_backend(SelectionContext& ctx, const OptKey& model_activation_key) {
  const OptKey requested = resolve_activation_key(ctx, model_activation_key);
  return select_backend(gpt_oss_selector(), ctx, {kMxfp4Static, requested, ctx.activation_format(), model_activation_key});
}

// select_deepseek_v4_mxfp4_moe_backend(config): ignores the user activation override.
Selection select_deepseek_v4(SelectionContext& ctx) {
  return select_backend(deepseek_v4_selector(), ctx, {kMxfp4Static, std::nullopt, ctx.activation_format(), std::nullopt});
}

// QuarkOCP_MX_MoEMethod.__init__: select by OCP-MX scheme, validate static/dynamic activation
// scales, fall back to EMULATION when no selector ran, then keep the backend's FIRST class
// (the method re-resolves experts_cls = backend_to_kernel_cls(backend)[0]).
Selection select_quark(SelectionContext& ctx) {
  const std::string& scheme = ctx.query.quark_ocp_mx_scheme;
  const bool static_scales = ctx.query.static_input_scales;
  auto ends_with = [&scheme](const std::string& tail) {
    return scheme.size() >= tail.size() && scheme.compare(scheme.size() - tail.size(), tail.size(), tail) == 0;
  };
  static const std::vector<std::string> kSchemes = {
      "w_mxfp4", "w_mxfp4_a_mxfp4", "w_mxfp4_a_mxfp6_e3m2", "w_mxfp4_a_mxfp6_e2m3", "w_mxfp4_a_fp8", "w_mxfp6_e3m2",
      "w_mxfp6_e3m2_a_mxfp6_e3m2", "w_mxfp6_e3m2_a_fp8", "w_mxfp6_e2m3", "w_mxfp6_e2m3_a_mxfp6_e2m3", "w_mxfp6_e2m3_a_fp8"};
  if (std::find(kSchemes.begin(), kSchemes.end(), scheme) == kSchemes.end())
    raise_value_error("Unsupported OCP MX dtype combination for MoE: scheme '" + scheme +
                      "'. Please check that the combination is supported in OCP_MX_Scheme.");

  std::optional<Selection> selected;
  if (scheme == "w_mxfp4") selected = select_mxfp4_moe_backend(ctx, std::nullopt);
  else if (scheme == "w_mxfp4_a_fp8" && static_scales) selected = select_mxfp4_moe_backend(ctx, kFp8StaticTensorSym);
  else if (scheme == "w_mxfp4_a_mxfp4") selected = select_mxfp4_moe_backend(ctx, kMxfp4Dynamic);

  if (ends_with("a_mxfp4") || ends_with("a_mxfp6_e3m2") || ends_with("a_mxfp6_e2m3")) {
    if (static_scales)
      raise_not_implemented("QuarkOCP_MX_MoEMethod with static input scales is currently not implemented for OCP MX scheme " +
                            scheme + ". Please open an issue.");
  } else if (ends_with("a_fp8") && !static_scales) {
    raise_not_implemented("QuarkOCP_MX_MoEMethod with dynamic input scales is currently not implemented for OCP MX scheme " +
                          scheme + ". Please open an issue.");
  }

  Selection s;
  if (selected) {
    s = *selected;
  } else {
    s.backend = "EMULATION";
    // The weight element type of the scheme (w_mxfp6_e3m2... / w_mxfp6_e2m3... / w_mxfp4...).
    if (scheme.rfind("w_mxfp6_e3m2", 0) == 0) s.weight_key = kMxfp6E3M2Static;
    else if (scheme.rfind("w_mxfp6_e2m3", 0) == 0) s.weight_key = kMxfp6E2M3Static;
    else s.weight_key = kMxfp4Static;
    ctx.notes.push_back("Quark OCP-MX scheme " + scheme + " has no native backend selector; the method uses EMULATION");
  }
  const std::string first = row_named(s.backend).classes.front();
  if (first != s.experts_class && !s.experts_class.empty())
    ctx.notes.push_back("QuarkOCP_MX_MoEMethod keeps the backend's first class " + first + " (selected " +
                        experts_class_display_name(s.experts_class) + ")");
  s.experts_class = first;
  return s;
}

// CompressedTensorsW4A4Mxfp4MoEMethod / INCMxfp4MoEMethod: no oracle walk. The method keeps
// mxfp4_backend = MARLIN unless b12x or (INC) XPU goes through the oracle.
Selection select_compressed_tensors_like(SelectionContext& ctx, bool is_inc) {
  if (ctx.moe.moe_backend == "b12x") return select_mxfp4_moe_backend(ctx, std::nullopt);
  ctx.notes.push_back(std::string(is_inc ? "AutoRound (INC)" : "compressed-tensors") +
                      " MXFP4 picks its experts class by device only; --moe-backend other than b12x is ignored");
  const bool cutlass_device = experts_class("CutlassExpertsMxfp4").device(ctx.env);
  if (cutlass_device) {
    ctx.candidates.push_back({"MARLIN", "CutlassExpertsMxfp4", true, ""});
    ctx.notes.push_back("CUTLASS W4A4: activations are quantized to MXFP4 at run time; the method's backend field stays MARLIN");
    return {"MARLIN", "CutlassExpertsMxfp4", kMxfp4Static, kMxfp4Dynamic};
  }
  ctx.candidates.push_back({"MARLIN", "CutlassExpertsMxfp4", false, "kernel does not support current device " + ctx.deployment.device.device_name()});
  if (ctx.deployment.device.is_xpu()) {
    if (is_inc) return select_mxfp4_moe_backend(ctx, std::nullopt);
    ctx.candidates.push_back({"XPU", "XPUExpertsMxFp4", true, ""});
    return {"XPU", "XPUExpertsMxFp4", kMxfp4Static, std::nullopt};
  }
  ctx.candidates.push_back({"MARLIN", "MarlinExperts", true, ""});
  ctx.notes.push_back("no native FP4 compute on this device: weight-only FP4 through Marlin (not validated against the device)");
  return {"MARLIN", "MarlinExperts", kMxfp4Static, std::nullopt};
}

// ---------------------------------------------------------------------------------------------
// Sizes
// ---------------------------------------------------------------------------------------------

// mxfp4_round_up_hidden_size_and_intermediate_size. `activation` is only passed by
// Mxfp4MoEMethod (it matters for AITER_MXFP4_BF16 on ROCm).
std::pair<int, int> mxfp4_round_up(const std::string& b, int hidden, int inter, const Device& device, std::optional<MoEActivation> activation) {
  if (b == "B12X_MXFP4_MXFP8" || b == "B12X_MXFP4_BF16") return {hidden, inter};  // b12x plans exact sizes
  if (b == "EMULATION") return {round_up_to(hidden, 32), round_up_to(inter, 32)};     // OCP MX block alignment
  if (b == "DEEPGEMM_MXFP4") return {round_up_to(hidden, 128), round_up_to(inter, 128)};
  if (b == "MARLIN" || b == "BATCHED_MARLIN") return {round_up_to(hidden, device.is_xpu() ? 128 : 256), round_up_to(inter, 128)};
  if (b == "FLASHINFER_TRTLLM_MXFP4_BF16" || b == "FLASHINFER_TRTLLM_MXFP4_MXFP8") return {round_up_to(hidden, 256), round_up_to(inter, 128)};
  if (b == "FLASHINFER_CUTLASS_MXFP4_BF16" || b == "FLASHINFER_CUTLASS_MXFP4_MXFP8") return {round_up_to(hidden, 128), round_up_to(inter, 128)};
  if (device.is_rocm()) {
    // Kimi-K3's A16W4 SiTU/SiLU kernel handles its native sizes; 256 would inflate them.
    if (b == "AITER_MXFP4_BF16" && activation && (*activation == MoEActivation::SITU || *activation == MoEActivation::SILU))
      return {round_up_to(hidden, 128), round_up_to(inter, 128)};
    return {round_up_to(hidden, 256), round_up_to(inter, 256)};
  }
  if (b == "CPU") return {round_up_to(hidden, 32), round_up_to(inter, 32)};  // AMX BLOCK_N = 32
  return {hidden, round_up_to(inter, 64)};
}

std::pair<int, int> round_up_for_backend(const SelectionContext& ctx, const Selection& s, int hidden, int inter) {
  return mxfp4_round_up(s.backend, hidden, inter, ctx.deployment.device, std::nullopt);
}
std::pair<int, int> round_up_for_backend_and_activation(const SelectionContext& ctx, const Selection& s, int hidden, int inter) {
  return mxfp4_round_up(s.backend, hidden, inter, ctx.deployment.device, ctx.moe.activation);
}

// The online MX methods quantize in 32-wide blocks (create_weights, after the round-up).
void online_mxfp4_blocks(int, int, int padded_hidden, int padded_inter) {
  if (padded_hidden % 32 != 0 || padded_inter % 32 != 0)
    throw OracleRaise("ValueError", "Online MXFP4 MoE requires hidden/intermediate sizes divisible by 32.");
}

// The checkpoint override vLLM applies to gpt-oss MXFP4 checkpoints (quant_method mxfp4 on a
// gpt_oss model is served by GptOssMxfp4Config).
void gpt_oss_quant_method(MoeLayerQuery& q) {
  if (q.quant_method == "mxfp4" && q.model_type == "gpt_oss") q.quant_method = "gpt_oss_mxfp4";
}

// ---------------------------------------------------------------------------------------------
// Layouts
// ---------------------------------------------------------------------------------------------

using Roles = std::vector<std::pair<std::string, std::string>>;

// Which converter runs decides the w13 row handling: the gpt-oss one (GptOssMxfp4MoEMethod,
// QuarkOCP_MX_MoEMethod) keeps interleaved rows, the generic one (Mxfp4MoEMethod) has [w1; w3].
bool gpt_oss_layout(const SelectionContext& c) {
  return c.query.method_class == "GptOssMxfp4MoEMethod" || c.query.method_class == "QuarkOCP_MX_MoEMethod";
}

// The conditions that pick the layouts.
bool gpt_oss_converter(const SelectionContext& c, const Selection&) { return gpt_oss_layout(c); }
// QuarkOCP_MX_MoEMethod.create_weights allocates has_bias' w13_bias / w2_bias in fp32 (the other
// MXFP4 methods in the model dtype): backends that keep the loaded biases keep them fp32.
bool quark_method(const SelectionContext& c, const Selection&) { return c.query.method_class == "QuarkOCP_MX_MoEMethod"; }
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
bool situ_activation(const SelectionContext& c, const Selection&) { return !gpt_oss_layout(c) && c.query.activation == "situ"; }
// The SiTU kernel's w13 layout: gate/up interleaved only with the A8W4 SiTU-v2 kernel enabled.
bool situ_v2_enabled(const SelectionContext& c) {
  return c.deployment.env.is_set("VLLM_ROCM_USE_AITER_MOE_SITUV2_A8W4") && c.deployment.env.true_flag("VLLM_ROCM_USE_AITER_MOE_SITUV2_A8W4", false);
}
Roles aiter_situ_roles(int gate_up) {
  const std::string bias(layout_id::bias_f32);
  return {{"w13_weight", layout_id::aiter_shuffle_weight_guinterleave(gate_up)}, {"w2_weight", layout_id::aiter_shuffle_weight_guinterleave(0)},
          {"w13_weight_scale", layout_id::pipeline({layout_id::view_e8m0, layout_id::aiter_shuffle_scale(gate_up)})},
          {"w2_weight_scale", layout_id::pipeline({layout_id::view_e8m0, layout_id::aiter_e8m0_shuffle(2)})}, {"w13_bias", bias}, {"w2_bias", bias}};
}

Roles marlin_roles(bool fp8_input) {
  const std::string weights = layout_id::marlin_fp4_repack(fp8_input);
  const std::string scales = layout_id::mxfp4_marlin_process_scales(fp8_input);
  const std::string bias = layout_id::marlin_permute_bias();
  return {{"w13_weight", weights}, {"w2_weight", weights}, {"w13_weight_scale", scales}, {"w2_weight_scale", scales},
          {"w13_bias", bias}, {"w2_bias", bias}};
}

Roles trtllm_roles(std::string_view w13_rows) {
  using layout_id::rows::identity;
  return {{"w13_weight", layout_id::fi_trtllm_shuffle_matrix_a(w13_rows)}, {"w2_weight", layout_id::fi_trtllm_shuffle_matrix_a(identity)},
          {"w13_weight_scale", layout_id::fi_trtllm_shuffle_matrix_sf_a(w13_rows, false)},
          {"w2_weight_scale", layout_id::fi_trtllm_shuffle_matrix_sf_a(identity, false)},
          {"w13_bias", layout_id::fi_trtllm_shuffle_bias(w13_rows)}, {"w2_bias", layout_id::fi_trtllm_shuffle_bias(identity)}};
}

// FlashInfer CUTLASS: w13 rows become [w3; w1]; the gpt-oss converter leaves the w2 bias as is,
// the generic one casts it to bf16.
Roles cutlass_bias_roles(std::string_view w13_rows, bool gpt_oss) {
  return {{"w13_bias", layout_id::fi_cutlass_bias(w13_rows)},
          {"w2_bias", gpt_oss ? std::string(layout_id::unchanged) : layout_id::fi_cutlass_bias(layout_id::rows::identity)}};
}
Roles cutlass_sm100_roles(std::string_view w13_rows, bool gpt_oss) {
  using layout_id::rows::identity;
  Roles r = {{"w13_weight", layout_id::fi_cutlass_mxfp4_weight(w13_rows)},
             {"w2_weight", layout_id::fi_cutlass_mxfp4_weight(identity)},
             {"w13_weight_scale", layout_id::fi_block_scale_interleave(w13_rows)},
             {"w2_weight_scale", layout_id::fi_block_scale_interleave(identity)}};
  for (auto& b : cutlass_bias_roles(w13_rows, gpt_oss)) r.push_back(b);
  return r;
}
Roles cutlass_sm90_roles(std::string_view w13_rows, bool gpt_oss) {
  using layout_id::rows::identity;
  Roles r = {{"w13_weight", layout_id::fi_interleave_sm90_weights(w13_rows)},
             {"w2_weight", layout_id::fi_interleave_sm90_weights(identity)},
             {"w13_weight_scale", layout_id::fi_interleave_sm90_scales(w13_rows)},
             {"w2_weight_scale", layout_id::fi_interleave_sm90_scales(identity)}};
  for (auto& b : cutlass_bias_roles(w13_rows, gpt_oss)) r.push_back(b);
  return r;
}

// The generic converter runs shuffle_weight on the w13 weight, scale and bias before the swizzle
// (TRITON only); the gpt-oss converter does not.
Roles triton_roles(const std::string& value, const std::string& scale, bool generic_converter) {
  const std::string shuffle = layout_id::mxfp4_triton_shuffle_weight();
  const std::string bias(layout_id::bias_f32);
  auto w13 = [&](const std::string& layout) { return generic_converter ? layout_id::pipeline({shuffle, layout}) : layout; };
  return {{"w13_weight", w13(value)}, {"w2_weight", value}, {"w13_weight_scale", w13(scale)}, {"w2_weight_scale", scale},
          {"w13_bias", generic_converter ? layout_id::pipeline({bias, shuffle}) : bias}, {"w2_bias", bias}};
}

// triton_kernels v3.5.1's layouts as _swizzle_mxfp4 picks them, value and scale.
Roles hopper_roles(bool generic_converter) {
  return triton_roles(layout_id::hopper_mx_value(), layout_id::hopper_mx_scale(8), generic_converter);
}
Roles blackwell_roles(bool generic_converter) {
  return triton_roles(layout_id::blackwell_mx_value(), layout_id::blackwell_mx_scale(), generic_converter);
}
Roles cdna4_roles(bool generic_converter) { return triton_roles(layout_id::strided(1), layout_id::cdna4_mx_scale(), generic_converter); }
Roles strided_roles(bool generic_converter) { return triton_roles(layout_id::strided(1), layout_id::strided(1), generic_converter); }

// Ids are those of packers/registry.cpp, both spelled by lib/core/layout_ids.h; " | " chains
// transforms applied in order. Which converter runs decides the w13 row handling: the gpt-oss
// one (GptOssMxfp4MoEMethod, QuarkOCP_MX_MoEMethod) keeps interleaved rows, the generic one
// (Mxfp4MoEMethod) has [w1; w3] (fused_moe/oracle/mxfp4.py). The rows are grouped by kernel vendor; within a
// backend the first row whose condition holds wins.
std::vector<LayoutRow> marlin_layouts() {
  const std::string unchanged(layout_id::unchanged);
  const std::string w4a4_scales = layout_id::cutlass_swizzle_mxfp4_scales();
  return {
    {.backend = "MARLIN",
     .condition_text = "compressed-tensors / AutoRound CUTLASS W4A4",
     .condition = [](const SelectionContext&, const Selection& s) { return s.experts_class == "CutlassExpertsMxfp4"; },
     .roles = {{"w13_weight", unchanged}, {"w2_weight", unchanged}, {"w13_weight_scale", w4a4_scales}, {"w2_weight_scale", w4a4_scales}}},
    {.backend = "MARLIN",
     .condition_text = "FP8 activations (VLLM_MARLIN_INPUT_DTYPE=fp8)",
     .condition = marlin_fp8_input,
     .roles = marlin_roles(true)},
    {.backend = "MARLIN",
     .condition_text = "16-bit activations",
     .roles = marlin_roles(false)},
    {.backend = "BATCHED_MARLIN",
     .condition_text = "FP8 activations (VLLM_MARLIN_INPUT_DTYPE=fp8)",
     .condition = marlin_fp8_input,
     .roles = marlin_roles(true)},
    {.backend = "BATCHED_MARLIN",
     .condition_text = "16-bit activations",
     .roles = marlin_roles(false)},
  };
}

std::vector<LayoutRow> flashinfer_layouts() {
  return {
    {.backend = "FLASHINFER_TRTLLM_MXFP4_*",
     .condition_text = "gpt-oss interleaved w13 (adjacent row pairs swapped)",
     .condition = gpt_oss_converter,
     .roles = trtllm_roles(layout_id::rows::swap_pairs)},
    {.backend = "FLASHINFER_TRTLLM_MXFP4_*",
     .condition_text = "[w1; w3] w13 (rebuilt as w3/w1 row pairs)",
     .roles = trtllm_roles(layout_id::rows::w3w1_interleave)},
    {.backend = "FLASHINFER_CUTLASS_MXFP4_MXFP8",
     .condition_text = "gpt-oss interleaved w13",
     .condition = gpt_oss_converter,
     .roles = cutlass_sm100_roles(layout_id::rows::deinterleave_up_first, true)},
    {.backend = "FLASHINFER_CUTLASS_MXFP4_MXFP8",
     .condition_text = "[w1; w3] w13",
     .roles = cutlass_sm100_roles(layout_id::rows::swap_halves, false)},
    {.backend = "FLASHINFER_CUTLASS_MXFP4_BF16",
     .condition_text = "gpt-oss interleaved w13, SM90 mixed-input GEMM",
     .condition = gpt_oss_converter,
     .roles = cutlass_sm90_roles(layout_id::rows::deinterleave_up_first, true)},
    {.backend = "FLASHINFER_CUTLASS_MXFP4_BF16",
     .condition_text = "[w1; w3] w13, SM90 mixed-input GEMM",
     .roles = cutlass_sm90_roles(layout_id::rows::swap_halves, false)},
  };
}

std::vector<LayoutRow> triton_kernels_layouts() {
  return {
    {.backend = "TRITON*",
     .condition_text = "CUDA SM90, gpt-oss converter",
     .condition = hopper_gpt_oss,
     .roles = hopper_roles(false)},
    {.backend = "TRITON*",
     .condition_text = "CUDA SM100 and newer, gpt-oss converter",
     .condition = blackwell_gpt_oss,
     .roles = blackwell_roles(false)},
    {.backend = "TRITON*",
     .condition_text = "ROCm gfx950 with TP <= 2, gpt-oss converter",
     .condition = cdna4_gpt_oss,
     .roles = cdna4_roles(false)},
    {.backend = "TRITON*",
     .condition_text = "CUDA before SM90 and other ROCm, gpt-oss converter",
     .condition = gpt_oss_converter,
     .roles = strided_roles(false)},
    // The generic converter shuffles w13's last axis for TRITON only, not for TRITON_UNFUSED.
    {.backend = "TRITON",
     .condition_text = "CUDA SM90, generic converter",
     .condition = hopper,
     .roles = hopper_roles(true)},
    {.backend = "TRITON",
     .condition_text = "CUDA SM100 and newer, generic converter",
     .condition = blackwell,
     .roles = blackwell_roles(true)},
    {.backend = "TRITON",
     .condition_text = "ROCm gfx950 with TP <= 2, generic converter",
     .condition = cdna4,
     .roles = cdna4_roles(true)},
    {.backend = "TRITON",
     .condition_text = "CUDA before SM90 and other ROCm, generic converter",
     .roles = strided_roles(true)},
    {.backend = "TRITON_UNFUSED",
     .condition_text = "CUDA SM90, generic converter",
     .condition = hopper,
     .roles = hopper_roles(false)},
    {.backend = "TRITON_UNFUSED",
     .condition_text = "CUDA SM100 and newer, generic converter",
     .condition = blackwell,
     .roles = blackwell_roles(false)},
    {.backend = "TRITON_UNFUSED",
     .condition_text = "ROCm gfx950 with TP <= 2, generic converter",
     .condition = cdna4,
     .roles = cdna4_roles(false)},
    {.backend = "TRITON_UNFUSED",
     .condition_text = "CUDA before SM90 and other ROCm, generic converter",
     .roles = strided_roles(false)},
  };
}

std::vector<LayoutRow> aiter_layouts() {
  using layout_id::aiter_shuffle_scale;
  using layout_id::aiter_shuffle_weight_guinterleave;
  const std::string bias(layout_id::bias_f32), scalar(layout_id::scalar_f32);
  const std::string deinterleave = layout_id::aiter_deinterleave_gate_up_rows();
  const std::string strided = layout_id::strided(1), cdna4_scale = layout_id::cdna4_mx_scale();
  const std::string e8m0_shuffle_3d = layout_id::aiter_e8m0_shuffle(3);
  return {
    // gfx1250: the generic converter sends AITER_MXFP4_BF16 down the Triton path (no shuffle).
    {.backend = "AITER_MXFP4_BF16",
     .condition_text = "gfx1250, generic converter",
     .condition = [](const SelectionContext& c, const Selection&) { return c.deployment.device.on_gfx1250() && !gpt_oss_layout(c); },
     .roles = strided_roles(false)},
    {.backend = "AITER_MXFP4_BF16",
     .condition_text = "gpt-oss converter (rows de-interleaved, a16w4 shuffles)",
     .condition = gpt_oss_converter,
     .roles = {{"w13_weight", layout_id::pipeline({deinterleave, aiter_shuffle_weight_guinterleave(1)})}, {"w2_weight", aiter_shuffle_weight_guinterleave(0)},
      {"w13_weight_scale", layout_id::pipeline({deinterleave, aiter_shuffle_scale(1)})}, {"w2_weight_scale", aiter_shuffle_scale(0)},
      {"w13_bias", layout_id::pipeline({bias, deinterleave})}, {"w2_bias", bias}}},
    {.backend = "AITER_MXFP4_BF16",
     .condition_text = "generic converter, SiTU activation, VLLM_ROCM_USE_AITER_MOE_SITUV2_A8W4 on",
     .condition = [](const SelectionContext& c, const Selection& s) { return situ_activation(c, s) && situ_v2_enabled(c); },
     .roles = aiter_situ_roles(1)},
    {.backend = "AITER_MXFP4_BF16",
     .condition_text = "generic converter, SiTU activation",
     .condition = situ_activation,
     .roles = aiter_situ_roles(0)},
    {.backend = "AITER_MXFP4_BF16",
     .condition_text = "generic converter",
     .roles = {{"w13_weight", aiter_shuffle_weight_guinterleave(1)}, {"w2_weight", aiter_shuffle_weight_guinterleave(0)},
      {"w13_weight_scale", aiter_shuffle_scale(1)}, {"w2_weight_scale", aiter_shuffle_scale(0)}, {"w13_bias", bias}, {"w2_bias", bias}}},
    // W4A8: the triton_kernels swizzle on ROCm. The kernel's activation scale is the maximum
    // of the static input scales over the experts, held in its precision config; the layer
    // itself keeps the per-expert fp32 [E] parameters, which is what is written.
    {.backend = "AITER_MXFP4_FP8",
     .condition_text = "gfx950 with TP <= 2",
     .condition = cdna4,
     .roles = {{"w13_weight", strided}, {"w2_weight", strided}, {"w13_weight_scale", cdna4_scale}, {"w2_weight_scale", cdna4_scale},
      {"w13_input_scale", scalar}, {"w2_input_scale", scalar}, {"w13_bias", bias}, {"w2_bias", bias}}},
    {.backend = "AITER_MXFP4_FP8",
     .condition_text = "other ROCm",
     .roles = {{"w13_weight", strided}, {"w2_weight", strided}, {"w13_weight_scale", strided}, {"w2_weight_scale", strided},
      {"w13_input_scale", scalar}, {"w2_input_scale", scalar}, {"w13_bias", bias}, {"w2_bias", bias}}},
    {.backend = "AITER_MXFP4_MXFP4",
     .roles = {{"w13_weight", layout_id::aiter_shuffle_weight()}, {"w2_weight", layout_id::aiter_shuffle_weight()},
      {"w13_weight_scale", e8m0_shuffle_3d}, {"w2_weight_scale", e8m0_shuffle_3d}, {"w13_bias", bias}, {"w2_bias", bias}}},
  };
}

std::vector<LayoutRow> other_layouts() {
  const std::string unchanged(layout_id::unchanged), bias(layout_id::bias_f32), scalar(layout_id::scalar_f32);
  const std::string cpu_weight(layout_id::cpu_sgl_mxfp4_weight), cpu_scale(layout_id::cpu_sgl_e8m0_scale);
  const std::string deep_gemm_scales = layout_id::deep_gemm_transform_sf("1x1x32");
  // A per-layer reduction (lib/convert/reductions).
  const std::string max_over_experts = layout_id::max_over_experts(false);
  return {
    {.backend = "DEEPGEMM_MXFP4",
     .roles = {{"w13_weight", unchanged}, {"w2_weight", unchanged}, {"w13_weight_scale", deep_gemm_scales}, {"w2_weight_scale", deep_gemm_scales}}},
    // Only the gpt-oss converter has a CPU branch; the generic one raises ValueError (no row).
    // That branch leaves Quark's static input scales as loaded (fp32, one per expert).
    {.backend = "CPU",
     .condition_text = "gpt-oss converter",
     .condition = gpt_oss_converter,
     .roles = {{"w13_weight", cpu_weight}, {"w2_weight", cpu_weight}, {"w13_weight_scale", cpu_scale}, {"w2_weight_scale", cpu_scale},
      {"w13_input_scale", scalar}, {"w2_input_scale", scalar}, {"w13_bias", bias}, {"w2_bias", bias}}},
    {.backend = "HUMMING",
     .roles = {{"w13_weight", "humming"}, {"w2_weight", "humming"}, {"w13_weight_scale", "humming"}, {"w2_weight_scale", "humming"}}},
    // EMULATION replaces static input scales by their maximum over the experts (0-dim fp32).
    {.backend = "EMULATION",
     .condition_text = "Quark: biases as loaded, fp32; static input scales reduced to their maximum",
     .condition = quark_method,
     .roles = {{"w13_weight", unchanged}, {"w2_weight", unchanged}, {"w13_weight_scale", unchanged}, {"w2_weight_scale", unchanged},
      {"w13_bias", bias}, {"w2_bias", bias}, {"w13_input_scale", max_over_experts}, {"w2_input_scale", max_over_experts}}},
    {.backend = "EMULATION",
     .condition_text = "kept as loaded; static input scales reduced to their maximum",
     .roles = {{"w13_weight", unchanged}, {"w2_weight", unchanged}, {"w13_weight_scale", unchanged}, {"w2_weight_scale", unchanged},
      {"w13_bias", unchanged}, {"w2_bias", unchanged}, {"w13_input_scale", max_over_experts}, {"w2_input_scale", max_over_experts}}},
    {.backend = "*",
     .condition_text = "XPU, B12X: kept as loaded",
     .roles = {{"w13_weight", unchanged}, {"w2_weight", unchanged}, {"w13_weight_scale", unchanged}, {"w2_weight_scale", unchanged},
      {"w13_bias", unchanged}, {"w2_bias", unchanged}}},
  };
}

std::span<const LayoutRow> layouts() {
  static const std::vector<LayoutRow> rows = [] {
    std::vector<LayoutRow> all;
    for (const auto& group : {marlin_layouts(), flashinfer_layouts(), triton_kernels_layouts(), aiter_layouts(), other_layouts()})
      all.insert(all.end(), group.begin(), group.end());
    return all;
  }();
  return rows;
}

Selection no_such_method(SelectionContext& ctx) { raise_value_error("no MXFP4 MoE method '" + ctx.query.method_class + "' in vLLM"); }

}  // namespace

const FamilyDescriptor& mxfp4_family() {
  static const FamilyDescriptor d{
      .family = Family::mxfp4,
      .name = "mxfp4",
      .methods =
          {
              {.method_class = "GptOssMxfp4MoEMethod",
               .reached_by = {{"gpt_oss_mxfp4"}, {"mxfp4", "gpt_oss"}},
               .select = [](SelectionContext& ctx) { return select_mxfp4_moe_backend(ctx, std::nullopt); },
               .round_up = round_up_for_backend},
              {.method_class = "Mxfp4MoEMethod", .reached_by = {{"mxfp4"}, {"deepseek_v4_fp8"}}, .select = select_deepseek_v4, .round_up = round_up_for_backend_and_activation},
              {.method_class = "QuarkOCP_MX_MoEMethod", .reached_by = {{"quark"}}, .select = select_quark, .round_up = round_up_for_backend},
              {.method_class = "CompressedTensorsW4A4Mxfp4MoEMethod",
               .reached_by = {{"compressed-tensors"}},
               .select = [](SelectionContext& ctx) { return select_compressed_tensors_like(ctx, false); }},
              {.method_class = "INCMxfp4MoEMethod", .reached_by = {{"inc"}}, .select = [](SelectionContext& ctx) { return select_compressed_tensors_like(ctx, true); }},
              {.method_class = "Mxfp4OnlineMoEMethod",
               .reached_by = {{"online"}},
               .select = [](SelectionContext& ctx) { return select_mxfp4_moe_backend(ctx, kMxfp4Dynamic); },
               .round_up = round_up_for_backend,
               .check_sizes = online_mxfp4_blocks},
              {.method_class = "", .select = no_such_method},
          },
      .complete_query = gpt_oss_quant_method,
      .backends = backends(),
      .moe_backend_map = moe_backend_map(),
      .layouts = layouts(),
  };
  return d;
}

}  // namespace moepack::oracle
