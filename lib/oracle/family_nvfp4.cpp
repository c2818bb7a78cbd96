// NVFP4 MoE selection (vllm/model_executor/layers/fused_moe/oracle/nvfp4.py @ e9d1398d9).
//
// Weight key kNvfp4Static; activation kNvfp4Dynamic (W4A4: ModelOpt NVFP4, compressed-tensors
// NVFP4, Quark NVFP4) or None (W4A16: ModelOpt W4A16_NVFP4, compressed-tensors NVFP4A16).
// Auto priority: FLASHINFER_TRTLLM, FLASHINFER_CUTEDSL, FLASHINFER_CUTEDSL_BATCHED,
// FLASHINFER_CUTLASS, VLLM_CUTLASS, MARLIN, HUMMING, EMULATION. A model with a SwiGLU clamp
// (swiglu_limit) keeps only the clamp-capable backends. FLASHINFER_B12X and B12X are explicit only.
#include <algorithm>

#include "lib/oracle/selection.h"

namespace moepack::oracle {

namespace {

using namespace keys;

const std::vector<BackendRow>& nvfp4_backends() {
  static const std::vector<BackendRow> rows = {
      {"B12X", "B12X", {"B12xExperts"}},
      {"FLASHINFER_TRTLLM", "FLASHINFER_TRTLLM", {"TrtLlmNvFp4ExpertsMonolithic", "TrtLlmNvFp4ExpertsModular"}},
      {"FLASHINFER_CUTLASS", "FLASHINFER_CUTLASS", {"FlashInferExperts"}},
      {"FLASHINFER_CUTEDSL", "FLASHINFER_CUTEDSL", {"FlashInferCuteDSLExperts"}},
      {"FLASHINFER_CUTEDSL_BATCHED", "FLASHINFER_CUTEDSL_BATCHED", {"FlashInferCuteDSLBatchedExperts"}},
      {"FLASHINFER_B12X", "FLASHINFER_B12X", {"FlashInferB12xExperts"}},
      {"VLLM_CUTLASS", "VLLM_CUTLASS", {"CutlassExpertsFp4"}},
      {"MARLIN", "MARLIN", {"MarlinExperts"}},
      {"HUMMING", "HUMMING", {"BatchedHummingGroupedExperts", "HummingGroupedExperts", "HummingIndexedExperts"}},
      {"EMULATION", "EMULATION", {"Nvfp4QuantizationEmulationTritonExperts"}},
  };
  return rows;
}

const BackendRow& backend(const std::string& name) { return find_backend_row(nvfp4_backends(), name, "NvFP4"); }

const std::vector<std::string> kAutoPriority = {"FLASHINFER_TRTLLM", "FLASHINFER_CUTEDSL", "FLASHINFER_CUTEDSL_BATCHED",
                                                "FLASHINFER_CUTLASS", "VLLM_CUTLASS",       "MARLIN",
                                                "HUMMING",           "EMULATION"};

// Backends that apply the SwiGLU clamp of models with swiglu_limit.
const std::vector<std::string> kClampCapable = {"B12X",   "FLASHINFER_TRTLLM", "FLASHINFER_CUTLASS", "FLASHINFER_CUTEDSL",
                                                "VLLM_CUTLASS", "MARLIN",      "EMULATION",          "HUMMING"};
bool clamp_capable(const std::string& b) { return std::find(kClampCapable.begin(), kClampCapable.end(), b) != kClampCapable.end(); }

const std::vector<std::pair<std::string, std::string>> kMoeBackendMap = {
    {"b12x", "B12X"},
    {"cutlass", "VLLM_CUTLASS"},
    {"flashinfer_trtllm", "FLASHINFER_TRTLLM"},
    {"flashinfer_cutlass", "FLASHINFER_CUTLASS"},
    {"flashinfer_cutedsl", "FLASHINFER_CUTEDSL"},
    {"flashinfer_b12x", "FLASHINFER_B12X"},
    {"marlin", "MARLIN"},
    {"humming", "HUMMING"},
    {"emulation", "EMULATION"},
};

std::string map_nvfp4_backend(const std::string& name) { return map_moe_backend(kMoeBackendMap, name, "NvFP4"); }

}  // namespace

Selection select_nvfp4_family(SelectionContext& ctx) {
  OptKey w = kNvfp4Static;
  OptKey a = ctx.query.activation_key.empty() ? OptKey{} : quant_key_by_name(ctx.query.activation_key);
  const ActivationFormat fmt = ctx.activation_format();

  const std::string& runner = ctx.moe.moe_backend;
  if (runner != "auto") {
    std::string requested = map_nvfp4_backend(runner);
    // b12x can be forced to 16-bit activations (_use_a16).
    if (requested == "B12X" && ctx.deployment.env.int_flag("VLLM_B12X_MOE_FP4_FORCE_A16", false)) a = std::nullopt;
    if (fmt == ActivationFormat::BatchedExperts && requested == "FLASHINFER_CUTEDSL") requested = "FLASHINFER_CUTEDSL_BATCHED";
    if (ctx.moe.swiglu_limit && !clamp_capable(requested)) {
      std::string limit = std::to_string(*ctx.moe.swiglu_limit);
      limit.erase(limit.find_last_not_of('0') + 1);
      if (!limit.empty() && limit.back() == '.') limit += '0';
      raise_value_error("Model sets swiglu_limit=" + limit + ", but the explicitly requested moe_backend='" + runner +
                        "' does not apply the SwiGLU clamp. Use 'flashinfer_trtllm', 'flashinfer_cutlass', "
                        "'flashinfer_cutedsl', 'cutlass', 'b12x', 'marlin', or 'humming' instead.");
    }
    std::string reason;
    if (auto cls = try_backend(ctx, backend(requested), w, a, fmt, reason)) return {requested, *cls, w, a};
    raise_value_error(unsupported_message("NvFp4", requested, reason, true));
  }

  for (const auto& name : kAutoPriority) {
    if (ctx.moe.swiglu_limit && !clamp_capable(name)) {
      // Filtered out of the list before the walk; shown so `plan` explains why it never ran.
      record_rejection(ctx, name, "backend does not apply the SwiGLU clamp (swiglu_limit is set)");
      continue;
    }
    std::string reason;
    if (auto cls = try_backend(ctx, backend(name), w, a, fmt, reason)) return {name, *cls, w, a};
  }
  raise_not_implemented("No NvFp4 MoE backend supports the deployment configuration.");
}

std::vector<BackendListing> nvfp4_backend_listing() {
  std::vector<BackendListing> out;
  for (const auto& b : nvfp4_backends()) {
    BackendListing l = listing_of("nvfp4", b, kMoeBackendMap);
    if (b.name == "FLASHINFER_CUTEDSL_BATCHED") l.moe_backend_names.push_back("flashinfer_cutedsl (batched format)");
    l.auto_selectable = std::find(kAutoPriority.begin(), kAutoPriority.end(), b.name) != kAutoPriority.end();
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace moepack::oracle
