// Integer weight-only (WNA16) MoE selection (vllm/model_executor/layers/fused_moe/oracle/int_wna16.py
// @ e9d1398d9). Activations are always 16-bit (activation key None).
//
// Priority: CPU -> [CPU]; XPU -> [XPU]; otherwise FLASHINFER_TRTLLM, MARLIN, BATCHED_MARLIN,
// TRITON, HUMMING, EMULATION. Before its classes are checked, each backend must pass
// _backend_incompatibility_reason, which depends on the checkpoint layout (GPTQ, AWQ,
// compressed-tensors, MoeWNA16) and the caller's may_have_zp / may_have_bias /
// allow_tile_padding flags; Marlin also needs check_moe_marlin_supports_config's shapes.
#include <algorithm>

#include "lib/oracle/selection.h"

namespace moepack::oracle {

namespace {

using namespace keys;

const std::vector<BackendRow>& wna16_backends() {
  static const std::vector<BackendRow> rows = {
      {"MARLIN", "MARLIN", {"MarlinExperts"}},
      {"BATCHED_MARLIN", "BATCHED_MARLIN", {"BatchedMarlinExperts"}},
      {"HUMMING", "HUMMING", {"BatchedHummingGroupedExperts", "HummingGroupedExperts", "HummingIndexedExperts"}},
      {"CPU", "CPU", {"CPUExpertsInt4"}},
      {"FLASHINFER_TRTLLM", "FLASHINFER_TRTLLM", {"TrtLlmMxint4ExpertsMonolithic"}},
      {"TRITON", "TRITON", {"TritonWNA16Experts"}},
      {"XPU", "XPU", {"XPUExpertsWNA16"}},
      {"EMULATION", "EMULATION", {"Int4EmulationTritonExperts"}},
  };
  return rows;
}

const BackendRow& backend(const std::string& name) { return find_backend_row(wna16_backends(), name, "WNA16"); }

const std::vector<std::pair<std::string, std::string>> kMoeBackendMap = {
    {"triton", "TRITON"}, {"marlin", "MARLIN"}, {"humming", "HUMMING"}, {"flashinfer_trtllm", "FLASHINFER_TRTLLM"}, {"emulation", "EMULATION"},
};

// The quantization config object vLLM hands the oracle, by checkpoint layout.
enum class Layout { gptq, awq, compressed_tensors, moe_wna16 };

Layout layout_of(const std::string& method) {
  if (method == "auto_gptq" || method == "gptq" || method == "gptq_marlin") return Layout::gptq;
  if (method == "auto_awq" || method == "awq" || method == "awq_marlin") return Layout::awq;
  if (method == "compressed-tensors") return Layout::compressed_tensors;
  if (method == "moe_wna16") return Layout::moe_wna16;
  raise_value_error("quantization method '" + method + "' has no WNA16 MoE method in vLLM");
}

// check_moe_marlin_supports_config (quantization/utils/marlin_utils.py).
bool marlin_supports(const SelectionContext& ctx, int group_size, bool allow_tile_padding) {
  if (ctx.deployment.device.is_rocm()) return false;
  const int hidden = ctx.moe.hidden_dim;
  const int inter = ctx.moe.intermediate_size_per_partition;
  bool shape_ok;
  if (allow_tile_padding) shape_ok = hidden % 128 == 0 && (group_size <= 0 || inter % group_size == 0);
  else shape_ok = hidden % 128 == 0 && inter % std::max(64, group_size) == 0;
  const bool group_ok = group_size == -1 || group_size == 32 || group_size == 64 || group_size == 128;
  return shape_ok && group_ok;
}

struct Flags {
  bool may_have_zp;
  bool may_have_bias;
  bool allow_tile_padding;
};

std::optional<std::string> incompatibility(const SelectionContext& ctx, const std::string& b, Layout layout, const Flags& f) {
  const MoeLayerQuery& q = ctx.query;
  if (b == "FLASHINFER_TRTLLM" && (f.may_have_zp || f.may_have_bias)) return "zero points and bias are not supported";
  if (b == "TRITON") {
    if (f.may_have_bias) return "expert bias is not supported";
    if (layout == Layout::awq) return "the AutoAWQ weight layout is not supported";
    if (layout == Layout::gptq && q.desc_act) return "GPTQ activation ordering is not supported";
    // Only "group" act-order is rejected; "dynamic" passes (as coded upstream).
    if (layout == Layout::compressed_tensors && q.actorder == "group") return "group activation ordering is not supported";
  }
  const bool marlin = b == "MARLIN" || b == "BATCHED_MARLIN";
  if (layout != Layout::moe_wna16 && marlin && !marlin_supports(ctx, q.group_size, f.allow_tile_padding))
    return "Marlin not supported for this layer";
  if (layout == Layout::moe_wna16 && (marlin || b == "EMULATION")) return "the MoeWNA16 checkpoint layout is not supported";
  return std::nullopt;
}

Flags flags_for(const MoeLayerQuery& q, Layout layout) {
  // The callers' defaults (compressed_tensors_moe_wna16.py, auto_gptq.py, auto_awq.py, moe_wna16.py).
  Flags f{};
  switch (layout) {
    case Layout::compressed_tensors:
      f = {!q.symmetric, false, !(q.actorder == "group" || q.actorder == "dynamic")};
      break;
    case Layout::gptq: f = {!q.symmetric, true, !q.desc_act}; break;
    case Layout::awq: f = {q.has_zero_points, true, true}; break;
    case Layout::moe_wna16: f = {q.has_zero_points, false, false}; break;
  }
  if (q.may_have_zp) f.may_have_zp = *q.may_have_zp;
  if (q.may_have_bias) f.may_have_bias = *q.may_have_bias;
  if (q.allow_tile_padding) f.allow_tile_padding = *q.allow_tile_padding;
  return f;
}

}  // namespace

// CompressedTensorsW4A16FlydslMoEMethod (chosen in oracle.cpp, as vLLM's get_moe_method does):
// no oracle, its apply calls fused_flydsl_moe; its constructor asserts what the kernel supports.
Selection compressed_tensors_flydsl(SelectionContext& ctx, const OptKey& w) {
  const MoeLayerQuery& q = ctx.query;
  if (q.actorder == "group") throw OracleRaise("AssertionError", "");
  if (!q.symmetric) throw OracleRaise("AssertionError", "Only symmetric quantization is supported for MoE. Try --moe-backend emulation.");
  ctx.candidates.push_back({"FLYDSL", "fused_flydsl_moe", true, ""});
  return Selection{"FLYDSL", "fused_flydsl_moe", w, std::nullopt};
}

Selection select_wna16_family(SelectionContext& ctx) {
  const MoeLayerQuery& q = ctx.query;
  const Layout layout = layout_of(q.quant_method);
  const Flags flags = flags_for(q, layout);
  OptKey w = q.weight_key_value ? q.weight_key_value : quant_key_by_name(q.weight_key);
  if (q.method_class == "CompressedTensorsW4A16FlydslMoEMethod") return compressed_tensors_flydsl(ctx, w);
  const ActivationFormat fmt = ctx.activation_format();
  auto unsupported = [](const std::string& b, const std::string& reason) { return unsupported_message("WNA16", b, reason, true); };

  const std::string& runner = ctx.moe.moe_backend;
  if (runner != "auto") {
    std::string requested = map_moe_backend(kMoeBackendMap, runner, "WNA16");
    if (auto why = incompatibility(ctx, requested, layout, flags)) {
      record_rejection(ctx, requested, *why);
      raise_value_error(unsupported(requested, *why));
    }
    std::string reason;
    if (auto cls = try_backend(ctx, backend(requested), w, std::nullopt, fmt, reason)) return {requested, *cls, w, std::nullopt};
    raise_value_error(unsupported(requested, reason));
  }

  std::vector<std::string> priority;
  if (ctx.deployment.device.is_cpu()) priority = {"CPU"};
  else if (ctx.deployment.device.is_xpu()) priority = {"XPU"};
  else priority = {"FLASHINFER_TRTLLM", "MARLIN", "BATCHED_MARLIN", "TRITON", "HUMMING", "EMULATION"};

  for (const auto& name : priority) {
    if (auto why = incompatibility(ctx, name, layout, flags)) {
      record_rejection(ctx, name, *why);
      continue;
    }
    std::string reason;
    if (auto cls = try_backend(ctx, backend(name), w, std::nullopt, fmt, reason)) return {name, *cls, w, std::nullopt};
  }
  raise_not_implemented("No WNA16 MoE backend supports the deployment configuration.");
}

std::vector<BackendListing> wna16_backend_listing() {
  std::vector<BackendListing> out;
  for (const auto& b : wna16_backends()) {
    BackendListing l = listing_of("wna16", b, kMoeBackendMap);
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace moepack::oracle
