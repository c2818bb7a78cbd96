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
#include <algorithm>

#include "lib/oracle/selection.h"

namespace moepack::oracle {

namespace {

using namespace keys;

const std::vector<BackendRow>& fp8_backends() {
  static const std::vector<BackendRow> rows = {
      {"FLASHINFER_TRTLLM", "FLASHINFER_TRTLLM", {"TrtLlmFp8ExpertsMonolithic", "TrtLlmFp8ExpertsModular"}},
      {"FLASHINFER_CUTLASS", "FLASHINFER_CUTLASS", {"FlashInferExperts"}},
      {"DEEPGEMM", "DEEPGEMM", {"TritonOrDeepGemmExperts"}},
      {"BATCHED_DEEPGEMM", "BATCHED_DEEPGEMM", {"BatchedDeepGemmExperts"}},
      {"HUMMING", "HUMMING", {"BatchedHummingGroupedExperts", "HummingGroupedExperts", "HummingIndexedExperts"}},
      {"MARLIN", "MARLIN", {"MarlinExperts"}},
      {"TRITON", "TRITON", {"TritonExperts"}},
      {"BATCHED_TRITON", "BATCHED_TRITON", {"BatchedTritonExperts"}},
      {"AITER", "AITER", {"AiterExperts"}},
      {"VLLM_CUTLASS", "VLLM_CUTLASS", {"TritonOrCutlassExperts"}},
      {"BATCHED_VLLM_CUTLASS", "BATCHED_VLLM_CUTLASS", {"CutlassBatchedExpertsFp8"}},
      {"XPU", "XPU", {"XPUExpertsFp8", "XPUExpertsMxFp8", "XPUExpertsBlockFp8"}},
      {"CPU", "CPU", {"CPUExpertsFp8"}},
      {"HPC", "HPC", {"HPCExperts"}},
  };
  return rows;
}

const BackendRow& fp8_backend(const std::string& name) { return find_backend_row(fp8_backends(), name, "FP8"); }

const std::vector<std::pair<std::string, std::string>> kFp8MoeBackendMap = {
    {"triton", "TRITON"},
    {"deep_gemm", "DEEPGEMM"},
    {"cutlass", "VLLM_CUTLASS"},
    {"flashinfer_trtllm", "FLASHINFER_TRTLLM"},
    {"flashinfer_cutlass", "FLASHINFER_CUTLASS"},
    {"marlin", "MARLIN"},
    {"humming", "HUMMING"},
    {"aiter", "AITER"},
    {"hpc", "HPC"},
};

void move_to_front(std::vector<std::string>& list, const std::string& name) {
  auto it = std::find(list.begin(), list.end(), name);
  if (it == list.end()) return;
  list.erase(it);
  list.insert(list.begin(), name);
}
void remove(std::vector<std::string>& list, const std::string& name) { list.erase(std::remove(list.begin(), list.end(), name), list.end()); }

std::vector<std::string> fp8_priority(const SelectionContext& ctx, const OptKey& w, const OptKey& a) {
  std::vector<std::string> list = {"AITER",         "FLASHINFER_TRTLLM", "FLASHINFER_CUTLASS", "DEEPGEMM",
                                   "VLLM_CUTLASS",  "TRITON",            "MARLIN",             "HUMMING",
                                   "BATCHED_DEEPGEMM", "BATCHED_VLLM_CUTLASS", "BATCHED_TRITON", "XPU",
                                   "CPU",           "HPC"};
  const Device& d = ctx.deployment.device;
  const bool block = w == kFp8Static128BlockSym && a == kFp8Dynamic128Sym;
  // TRT-LLM skips the padding rows DeepEP-v2's contiguous layout allocates.
  if (d.is_cuda() && d.is_device_capability_family(100) && ctx.moe.parallel.use_deepep_v2_kernels() && block)
    move_to_front(list, "FLASHINFER_TRTLLM");
  // Hopper block FP8: Triton for TP, FlashInfer CUTLASS for EP.
  if (d.is_cuda() && d.is_device_capability(90) && block)
    move_to_front(list, ctx.moe.parallel.ep_size > 1 ? "FLASHINFER_CUTLASS" : "TRITON");
  if (d.is_xpu()) move_to_front(list, "XPU");
  if (d.is_cpu()) move_to_front(list, "CPU");
  return list;
}

Selection fp8_return_or_raise(SelectionContext& ctx, const std::string& name, const OptKey& w, const OptKey& a) {
  std::string reason;
  if (auto cls = try_backend(ctx, fp8_backend(name), w, a, ctx.activation_format(), reason)) return {name, *cls, w, a};
  // The FP8 oracle quotes the backend only when it has no reason to give.
  raise_value_error(unsupported_message("FP8", name, reason, false));
}

OptKey key_from_query(const std::string& name) { return name.empty() ? OptKey{} : quant_key_by_name(name); }

}  // namespace

Selection select_fp8_family(SelectionContext& ctx) {
  const OptKey w = key_from_query(ctx.query.weight_key);
  const OptKey a = key_from_query(ctx.query.activation_key);
  const bool allow_vllm_cutlass = ctx.query.allow_vllm_cutlass.value_or(false);
  const ActivationFormat fmt = ctx.activation_format();
  std::vector<std::string> available = fp8_priority(ctx, w, a);

  const std::string& runner = ctx.moe.moe_backend;
  if (runner != "auto") {
    std::string requested = map_moe_backend(kFp8MoeBackendMap, runner, "FP8");
    if (fmt == ActivationFormat::BatchedExperts) {
      if (requested == "DEEPGEMM") requested = "BATCHED_DEEPGEMM";
      else if (requested == "TRITON") requested = "BATCHED_TRITON";
      else if (requested == "VLLM_CUTLASS") requested = "BATCHED_VLLM_CUTLASS";
    }
    if ((requested == "VLLM_CUTLASS" || requested == "BATCHED_VLLM_CUTLASS") && !allow_vllm_cutlass)
      raise_value_error("vLLM CUTLASS FP8 MoE backend is disabled for this configuration.");
    return fp8_return_or_raise(ctx, requested, w, a);
  }

  const EnvVars& env = ctx.deployment.env;
  if (env.is_set("VLLM_USE_DEEP_GEMM") || env.is_set("VLLM_MOE_USE_DEEP_GEMM")) {
    if (!env.int_flag("VLLM_USE_DEEP_GEMM", true) || !env.int_flag("VLLM_MOE_USE_DEEP_GEMM", true)) {
      remove(available, "DEEPGEMM");
      remove(available, "BATCHED_DEEPGEMM");
    } else {
      ctx.notes.push_back("VLLM_USE_DEEP_GEMM / VLLM_MOE_USE_DEEP_GEMM is exported and true: DeepGEMM is forced");
      return fp8_return_or_raise(ctx, fmt == ActivationFormat::Standard ? "DEEPGEMM" : "BATCHED_DEEPGEMM", w, a);
    }
  }
  if (env.is_set("VLLM_ROCM_USE_AITER") || env.is_set("VLLM_ROCM_USE_AITER_MOE")) {
    const bool skip = !env.true_flag("VLLM_ROCM_USE_AITER", false) || !env.true_flag("VLLM_ROCM_USE_AITER_MOE", true) ||
                      ctx.env.aiter_rdna_enabled();
    if (skip) {
      remove(available, "AITER");
    } else {
      ctx.notes.push_back("VLLM_ROCM_USE_AITER is exported and true: AITER is forced");
      return fp8_return_or_raise(ctx, "AITER", w, a);
    }
  }
  if (!allow_vllm_cutlass) {
    remove(available, "VLLM_CUTLASS");
    remove(available, "BATCHED_VLLM_CUTLASS");
  }

  for (const auto& name : available) {
    std::string reason;
    if (auto cls = try_backend(ctx, fp8_backend(name), w, a, fmt, reason)) return {name, *cls, w, a};
  }
  if (ctx.deployment.device.is_cuda() || ctx.deployment.device.is_rocm())
    raise_not_implemented("No FP8 MoE backend supports the deployment configuration.");
  // Elsewhere vLLM returns (NONE, None) for out-of-tree platform plugins to fill in.
  ctx.notes.push_back("no in-tree FP8 MoE kernel fits; vLLM returns Fp8MoeBackend.NONE (left to an out-of-tree platform)");
  return {"NONE", "", w, a};
}

// ---------------------------------------------------------------------------------------------
// MXFP8
// ---------------------------------------------------------------------------------------------
namespace {

const std::vector<BackendRow>& mxfp8_backends() {
  // DeepGEMM is the plain DeepGemmExperts: the Triton fallback cannot run the 1x32 MXFP8 recipe.
  static const std::vector<BackendRow> rows = {
      {"FLASHINFER_TRTLLM", "FLASHINFER_TRTLLM", {"TrtLlmFp8ExpertsMonolithic", "TrtLlmFp8ExpertsModular"}},
      {"DEEPGEMM", "DEEPGEMM", {"DeepGemmExperts"}},
      {"MARLIN", "MARLIN", {"MarlinExperts"}},
      {"XPU", "XPU", {"XPUExpertsFp8", "XPUExpertsMxFp8", "XPUExpertsBlockFp8"}},
      {"AITER_MXFP8", "AITER_MXFP8", {"AiterMxfp8Experts"}},
      {"HUMMING", "HUMMING", {"BatchedHummingGroupedExperts", "HummingGroupedExperts", "HummingIndexedExperts"}},
      {"TRITON_MXFP8", "TRITON_MXFP8", {"Mxfp8NativeTritonExperts"}},
      {"EMULATION", "EMULATION", {"Mxfp8EmulationTritonExperts"}},
  };
  return rows;
}

const std::vector<std::pair<std::string, std::string>> kMxfp8MoeBackendMap = {
    {"flashinfer_trtllm", "FLASHINFER_TRTLLM"}, {"deep_gemm", "DEEPGEMM"}, {"marlin", "MARLIN"}, {"xpu", "XPU"},
    {"aiter", "AITER_MXFP8"},                   {"triton", "TRITON_MXFP8"}, {"humming", "HUMMING"},
};

const BackendRow& mxfp8_backend(const std::string& name) { return find_backend_row(mxfp8_backends(), name, "MXFP8"); }

}  // namespace

Selection select_mxfp8_family(SelectionContext& ctx) {
  const OptKey w = kMxfp8Static;
  const OptKey a = kMxfp8Dynamic;
  const ActivationFormat fmt = ctx.activation_format();
  const std::string& runner = ctx.moe.moe_backend;
  if (runner != "auto") {
    std::string requested = map_moe_backend(kMxfp8MoeBackendMap, runner, "MXFP8");
    std::string reason;
    if (auto cls = try_backend(ctx, mxfp8_backend(requested), w, a, fmt, reason)) return {requested, *cls, w, a};
    raise_value_error("No supported MXFP8 expert class for " + requested + ": " + (reason.empty() ? "None" : reason));
  }
  for (const auto& b : mxfp8_backends()) {
    std::string reason;
    if (auto cls = try_backend(ctx, b, w, a, fmt, reason)) return {b.name, *cls, w, a};
  }
  raise_value_error("No MXFP8 MoE backends available.");
}

std::vector<BackendListing> fp8_backend_listing() {
  std::vector<BackendListing> out;
  for (const auto& b : fp8_backends()) {
    BackendListing l = listing_of("fp8", b, kFp8MoeBackendMap);
    out.push_back(std::move(l));
  }
  return out;
}

std::vector<BackendListing> mxfp8_backend_listing() {
  std::vector<BackendListing> out;
  for (const auto& b : mxfp8_backends()) {
    BackendListing l = listing_of("mxfp8", b, kMxfp8MoeBackendMap);
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace moepack::oracle
