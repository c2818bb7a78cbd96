// MXFP4 MoE selection (vllm/model_executor/layers/fused_moe/oracle/mxfp4.py @ e9d1398d9) and the
// method-side dispatch that surrounds it:
//
//   method class                          selector
//   GptOssMxfp4MoEMethod (gpt_oss_mxfp4)   select_mxfp4_moe_backend(moe)                 -> gpt-oss list
//   Mxfp4OnlineMoEMethod (online mxfp4)    select_mxfp4_moe_backend(moe, kMxfp4Dynamic)
//   QuarkOCP_MX_MoEMethod (quark)          by OCP-MX scheme, see select_quark()
//   Mxfp4MoEMethod (mxfp4, deepseek_v4_fp8) select_deepseek_v4_mxfp4_moe_backend(moe)
//   CompressedTensorsW4A4Mxfp4MoEMethod,   no oracle: CUTLASS W4A4 on 10.0 <= SM < 12.0, XPU,
//   INCMxfp4MoEMethod                      else Marlin (only --moe-backend b12x consults it)
#include <algorithm>

#include "lib/oracle/selection.h"

namespace moepack::oracle {

namespace {

using namespace keys;

// Mxfp4MoeBackend members with their classes and the activation key each runs with by default
// (_backend_activation_key). AITER is an alias of AITER_MXFP4_BF16 and never appears by name.
struct Mxfp4Backend {
  BackendRow row;
  OptKey default_activation;
};

const std::vector<Mxfp4Backend>& mxfp4_backends() {
  static const std::vector<Mxfp4Backend> rows = {
      {{"B12X_MXFP4_MXFP8", "B12X_MXFP4_MXFP8", {"B12xExperts"}}, kMxfp8Dynamic},
      {{"B12X_MXFP4_BF16", "B12X_MXFP4_BF16", {"B12xExperts"}}, std::nullopt},
      {{"DEEPGEMM_MXFP4", "DEEPGEMM_MXFP4", {"DeepGemmFP4Experts"}}, kFp8Dynamic128Sym},
      {{"FLASHINFER_TRTLLM_MXFP4_MXFP8", "FLASHINFER_TRTLLM_MXFP4_MXFP8", {"TrtLlmMxfp4ExpertsMonolithic", "TrtLlmMxfp4ExpertsModular"}}, kMxfp8Dynamic},
      {{"FLASHINFER_TRTLLM_MXFP4_BF16", "FLASHINFER_TRTLLM_MXFP4_BF16", {"TrtLlmMxfp4ExpertsMonolithic", "TrtLlmMxfp4ExpertsModular"}}, std::nullopt},
      {{"FLASHINFER_CUTLASS_MXFP4_MXFP8", "FLASHINFER_CUTLASS_MXFP4_MXFP8", {"FlashInferExperts"}}, kMxfp8Dynamic},
      {{"FLASHINFER_CUTLASS_MXFP4_BF16", "FLASHINFER_CUTLASS_MXFP4_BF16", {"FlashInferExperts"}}, std::nullopt},
      {{"BATCHED_MARLIN", "BATCHED_MARLIN", {"BatchedMarlinExperts"}}, std::nullopt},
      {{"MARLIN", "MARLIN", {"MarlinExperts"}}, std::nullopt},
      {{"AITER_MXFP4_BF16", "AITER_MXFP4_BF16", {"AiterExperts", "AiterW4A16ExpertsMonolithic"}}, std::nullopt},
      {{"AITER_MXFP4_FP8", "AITER_MXFP4_FP8", {"AiterW4A8ExpertsMonolithic"}}, kFp8StaticTensorSym},
      {{"AITER_MXFP4_MXFP4", "AITER_MXFP4_MXFP4", {"AiterExperts"}}, kMxfp4Dynamic},
      {{"TRITON", "TRITON", {"OAITritonMxfp4ExpertsMonolithic", "OAITritonExperts"}}, std::nullopt},
      {{"TRITON_UNFUSED", "TRITON_UNFUSED", {"UnfusedOAITritonExperts"}}, std::nullopt},
      {{"XPU", "XPU", {"XPUExpertsMxFp4"}}, std::nullopt},
      {{"CPU", "CPU", {"CPUExpertsMxfp4"}}, std::nullopt},
      {{"EMULATION", "EMULATION", {"OCP_MXQuantizationEmulationTritonExperts"}}, std::nullopt},
      {{"HUMMING", "HUMMING", {"BatchedHummingGroupedExperts", "HummingGroupedExperts", "HummingIndexedExperts"}}, std::nullopt},
  };
  return rows;
}

const Mxfp4Backend& backend(const std::string& name) {
  for (const auto& b : mxfp4_backends())
    if (b.row.name == name) return b;
  throw OracleRaise("ValueError", "Unknown MXFP4 MoE backend: " + name);
}

// map_mxfp4_backend: --moe-backend string -> candidate backends. Vendor names return every
// activation variant; the activation key picks among them. The *_afp8, aiter_mxfp4_*, xpu and
// cpu keys are not MoEBackend literals, so the CLI can never reach them.
const std::vector<std::pair<std::string, std::vector<std::string>>>& moe_backend_map() {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> m = {
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
  return m;
}

std::vector<std::string> map_mxfp4_backend(const std::string& name) {
  std::vector<std::string> keys_listed;
  for (const auto& [k, v] : moe_backend_map()) {
    if (k == name) return v;
    keys_listed.push_back(k);
  }
  raise_value_error("moe_backend='" + name + "' is not supported for MXFP4 MoE. Expected one of " + py_list(keys_listed) + ".");
}

// The gpt-oss priority list (_get_priority_backends_for_gpt_oss). TRITON_UNFUSED is commented
// out upstream ("bug with MTP support"); DEEPGEMM_MXFP4, HUMMING, CPU and B12X are explicit only.
const std::vector<std::string> kGptOssPriority = {
    "FLASHINFER_TRTLLM_MXFP4_BF16", "FLASHINFER_TRTLLM_MXFP4_MXFP8", "AITER_MXFP4_BF16", "AITER_MXFP4_FP8",
    "AITER_MXFP4_MXFP4", "TRITON", "FLASHINFER_CUTLASS_MXFP4_BF16", "FLASHINFER_CUTLASS_MXFP4_MXFP8",
    "MARLIN", "BATCHED_MARLIN", "XPU", "EMULATION"};

// The DeepSeek-V4 style list (_get_priority_backends) by platform.
std::vector<std::string> deepseek_v4_priority(const SelectionContext& ctx) {
  const Device& d = ctx.deployment.device;
  if (d.is_rocm() && ctx.moe.routing == RoutingMethodType::DeepseekV4) return {"AITER_MXFP4_BF16", "TRITON_UNFUSED"};
  if (d.is_rocm()) return {"AITER_MXFP4_BF16", "EMULATION"};
  if (d.is_xpu()) return {"XPU"};
  return {"FLASHINFER_TRTLLM_MXFP4_MXFP8", "DEEPGEMM_MXFP4", "MARLIN", "BATCHED_MARLIN"};
}

// _filter_by_activation: with a requested key keep the variants running it plus EMULATION;
// without one prefer the BF16 variants if the list has any.
std::vector<std::string> filter_by_activation(const std::vector<std::string>& names, const OptKey& requested) {
  std::vector<std::string> out;
  if (requested) {
    for (const auto& n : names)
      if (backend(n).default_activation == requested || n == "EMULATION") out.push_back(n);
    return out;
  }
  for (const auto& n : names)
    if (!backend(n).default_activation) out.push_back(n);
  return out.empty() ? names : out;
}

std::vector<std::string> requested_backends(const SelectionContext& ctx, const std::string& name, const OptKey& requested) {
  std::vector<std::string> list = map_mxfp4_backend(name);
  if (name == "b12x") {
    if (ctx.deployment.env.int_flag("VLLM_B12X_MOE_FP4_FORCE_A16", false)) return {"B12X_MXFP4_BF16"};
    // W4A8 is b12x's preferred path when the model asks for no activation format.
    if (!requested) return list;
  }
  return filter_by_activation(list, requested);
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

// _return_or_raise: the first class of `name` that supports the configuration, else ValueError.
Selection return_or_raise(SelectionContext& ctx, const std::string& name, const OptKey& a) {
  const Mxfp4Backend& b = backend(name);
  std::string reason;
  if (auto cls = try_backend(ctx, b.row, kMxfp4Static, a, ctx.activation_format(), reason))
    return {name, *cls, kMxfp4Static, a};
  raise_value_error(unsupported_message("Mxfp4", b.row.value, reason, true));
}

std::vector<std::string> swap_marlin_for_batched(const SelectionContext& ctx, std::vector<std::string> list) {
  if (ctx.activation_format() == ActivationFormat::BatchedExperts)
    for (auto& n : list)
      if (n == "MARLIN") n = "BATCHED_MARLIN";
  return list;
}

// select_mxfp4_moe_backend(config, activation_key).
Selection select_mxfp4_moe_backend(SelectionContext& ctx, const OptKey& model_activation_key) {
  const OptKey requested = resolve_activation_key(ctx, model_activation_key);
  const std::string& runner = ctx.moe.moe_backend;
  if (runner != "auto") {
    std::vector<std::string> list = swap_marlin_for_batched(ctx, requested_backends(ctx, runner, requested));
    if (list.empty()) raise_value_error("moe_backend='" + runner + "' does not support activation=" + ctx.key_text(requested));
    std::optional<OracleRaise> last;
    for (const auto& name : list) {
      // EMULATION runs with the requested key; every other variant with its own.
      const OptKey a = name == "EMULATION" ? requested : backend(name).default_activation;
      try {
        return return_or_raise(ctx, name, a);
      } catch (const OracleRaise& e) {
        last = e;
      }
    }
    throw *last;
  }

  const std::vector<std::string> available = filter_by_activation(kGptOssPriority, requested);
  std::vector<std::pair<std::string, std::string>> unsupported;
  for (const auto& name : available) {
    const Mxfp4Backend& b = backend(name);
    const OptKey a = requested ? requested : b.default_activation;
    for (const auto& cls : b.row.classes) {
      CheckInput in{ctx.moe, kMxfp4Static, a, ctx.activation_format(), ctx.env};
      CheckResult r = is_supported_config(cls, in);
      ctx.candidates.push_back({name, experts_class_display_name(cls), r.ok, r.reason});
      if (r.ok) return {name, cls, kMxfp4Static, a};
      unsupported.emplace_back(b.row.value, r.reason);
    }
  }
  // Platform fallbacks after the list; both drop the requested activation key.
  if (ctx.deployment.device.is_xpu()) return return_or_raise(ctx, "XPU", std::nullopt);
  if (ctx.deployment.device.is_cpu()) return return_or_raise(ctx, "CPU", std::nullopt);

  std::string reasons;
  for (size_t i = 0; i < unsupported.size(); ++i)
    reasons += (i ? "; " : "") + std::string("backend: ") + unsupported[i].first + ", reason: " + unsupported[i].second;
  std::vector<std::string> values;
  for (const auto& n : available) values.push_back(backend(n).row.value);
  raise_not_implemented("No MXFP4 MoE backend supports the deployment configuration. weight_key=kMxfp4Static, activation_key=" +
                        ctx.key_text(model_activation_key) + ". Candidate backends were: " + py_list(values) +
                        ". Unsupported reasons: " + reasons + ". ");
}

// select_deepseek_v4_mxfp4_moe_backend(config): ignores the user activation override.
Selection select_deepseek_v4(SelectionContext& ctx) {
  const std::string& runner = ctx.moe.moe_backend;
  if (runner != "auto") {
    std::vector<std::string> list = swap_marlin_for_batched(ctx, requested_backends(ctx, runner, std::nullopt));
    std::optional<OracleRaise> last;
    for (const auto& name : list) {
      try {
        return return_or_raise(ctx, name, backend(name).default_activation);
      } catch (const OracleRaise& e) {
        last = e;
      }
    }
    throw *last;
  }
  for (const auto& name : deepseek_v4_priority(ctx)) {
    const Mxfp4Backend& b = backend(name);
    std::string reason;
    if (auto cls = try_backend(ctx, b.row, kMxfp4Static, b.default_activation, ctx.activation_format(), reason))
      return {name, *cls, kMxfp4Static, b.default_activation};
  }
  // Upstream discards the per-backend reasons here (complaint in vLLM PR #57821); `plan` still
  // shows them as candidates.
  raise_not_implemented("No MXFP4 MoE backend supports the deployment configuration.");
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
  const std::string first = backend(s.backend).row.classes.front();
  if (first != s.experts_class && !s.experts_class.empty())
    ctx.notes.push_back("QuarkOCP_MX_MoEMethod keeps the backend's first class " + first + " (selected " +
                        experts_class_display_name(s.experts_class) + ")");
  s.experts_class = first;
  return s;
}

// CompressedTensorsW4A4Mxfp4MoEMethod / INCMxfp4MoEMethod: no oracle walk. The method keeps
// mxfp4_backend = MARLIN unless b12x or (INC) XPU goes through the oracle.
Selection select_compressed_tensors_like(SelectionContext& ctx, bool is_inc) {
  if (ctx.moe.moe_backend == "b12x") {
    Selection s = select_mxfp4_moe_backend(ctx, std::nullopt);
    return s;
  }
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

}  // namespace

Selection select_mxfp4_family(SelectionContext& ctx) {
  const std::string& method = ctx.query.method_class;
  if (method == "GptOssMxfp4MoEMethod") {
    Selection s = select_mxfp4_moe_backend(ctx, std::nullopt);
    s.round_up = Selection::RoundUp::mxfp4;
    return s;
  }
  if (method == "Mxfp4OnlineMoEMethod") {
    Selection s = select_mxfp4_moe_backend(ctx, kMxfp4Dynamic);
    s.round_up = Selection::RoundUp::mxfp4;
    return s;
  }
  if (method == "QuarkOCP_MX_MoEMethod") {
    Selection s = select_quark(ctx);
    s.round_up = Selection::RoundUp::mxfp4;
    return s;
  }
  if (method == "Mxfp4MoEMethod") {
    Selection s = select_deepseek_v4(ctx);
    s.round_up = Selection::RoundUp::mxfp4_with_activation;
    return s;
  }
  if (method == "CompressedTensorsW4A4Mxfp4MoEMethod") return select_compressed_tensors_like(ctx, false);
  if (method == "INCMxfp4MoEMethod") return select_compressed_tensors_like(ctx, true);
  raise_value_error("no MXFP4 MoE method '" + method + "' in vLLM");
}

std::vector<BackendListing> mxfp4_backend_listing() {
  std::vector<BackendListing> out;
  for (const auto& b : mxfp4_backends()) {
    BackendListing l;
    l.family = "mxfp4";
    l.backend = b.row.name;
    for (const auto& c : b.row.classes) l.classes.push_back(experts_class_display_name(c));
    for (const auto& [name, list] : moe_backend_map())
      if (std::find(list.begin(), list.end(), b.row.name) != list.end()) l.moe_backend_names.push_back(name);
    l.auto_selectable = std::find(kGptOssPriority.begin(), kGptOssPriority.end(), b.row.name) != kGptOssPriority.end() ||
                        b.row.name == "DEEPGEMM_MXFP4" || b.row.name == "TRITON_UNFUSED" || b.row.name == "CPU";
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace moepack::oracle
