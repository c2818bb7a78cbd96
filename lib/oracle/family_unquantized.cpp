// Unquantized (BF16/FP16) MoE selection (vllm/model_executor/layers/fused_moe/oracle/unquantized.py
// @ e9d1398d9).
//
// LoRA short-circuits: TrtLlmBf16LoRAExperts when it fits and the per-rank intermediate size is
// a multiple of 128, else TritonExperts, with no further checks. Otherwise:
//   ROCm [AITER, TRITON, BATCHED_TRITON]; XPU [XPU]; CPU [CPU];
//   CUDA [FLASHINFER_TRTLLM, FLASHINFER_CUTLASS, TRITON, BATCHED_TRITON] with both FlashInfer
//   backends moved to the back on Hopper (family 90), FLASHINFER_CUTLASS moved back when dp > 1,
//   and both moved back for SWIGLUOAI.
// --moe-backend humming is ignored here (treated as auto); other names outside this oracle's map
// are refused (the root of vLLM issue #56832).
#include <algorithm>

#include "lib/oracle/selection.h"

namespace moepack::oracle {

namespace {

// Enum members with the value strings vLLM prints in messages.
const std::vector<BackendRow>& unquantized_backends() {
  static const std::vector<BackendRow> rows = {
      {"FLASHINFER_TRTLLM", "FlashInfer TRTLLM", {"TrtLlmBf16ExpertsMonolithic", "TrtLlmBf16ExpertsModular"}},
      {"FLASHINFER_CUTLASS", "FlashInfer CUTLASS", {"FlashInferExperts"}},
      {"AITER", "ROCm AITER", {"AiterExperts"}},
      {"TRITON", "TRITON", {"TritonExperts"}},
      {"BATCHED_TRITON", "BATCHED_TRITON", {"BatchedTritonExperts"}},
      {"CPU", "CPU", {"X86CPUUnquantizedExperts", "ArmCPUUnquantizedExperts", "PowerCPUUnquantizedExperts", "CPUUnquantizedExperts"}},
      {"XPU", "XPU", {"XPUExperts"}},
  };
  return rows;
}

const BackendRow& backend(const std::string& name) { return find_backend_row(unquantized_backends(), name, "unquantized"); }

const std::vector<std::pair<std::string, std::string>> kMoeBackendMap = {
    {"triton", "TRITON"},
    {"batched_triton", "BATCHED_TRITON"},
    {"flashinfer_trtllm", "FLASHINFER_TRTLLM"},
    {"flashinfer_cutlass", "FLASHINFER_CUTLASS"},
    {"aiter", "AITER"},
};

void move_to_back(std::vector<std::string>& list, const std::string& name) {
  auto it = std::find(list.begin(), list.end(), name);
  if (it == list.end()) return;
  list.erase(it);
  list.push_back(name);
}

std::vector<std::string> priority(const SelectionContext& ctx) {
  const Device& d = ctx.deployment.device;
  if (d.is_rocm()) return {"AITER", "TRITON", "BATCHED_TRITON"};
  if (d.is_xpu()) return {"XPU"};
  if (d.is_cpu()) return {"CPU"};
  std::vector<std::string> list = {"FLASHINFER_TRTLLM", "FLASHINFER_CUTLASS", "TRITON", "BATCHED_TRITON"};
  // FlashInfer's unquantized kernels are slower than Triton on Hopper.
  if (d.is_device_capability_family(90)) {
    move_to_back(list, "FLASHINFER_TRTLLM");
    move_to_back(list, "FLASHINFER_CUTLASS");
  }
  if (ctx.moe.parallel.dp_size > 1) move_to_back(list, "FLASHINFER_CUTLASS");
  // FlashInfer maps SWIGLUOAI to plain SwiGLU without the clamp.
  if (ctx.moe.activation == MoEActivation::SWIGLUOAI) {
    move_to_back(list, "FLASHINFER_TRTLLM");
    move_to_back(list, "FLASHINFER_CUTLASS");
  }
  return list;
}

Selection return_or_raise(SelectionContext& ctx, const std::string& name, ActivationFormat fmt) {
  const BackendRow& row = backend(name);
  std::string reason;
  if (auto cls = try_backend(ctx, row, std::nullopt, std::nullopt, fmt, reason)) return {name, *cls, std::nullopt, std::nullopt};
  raise_value_error(unsupported_message("Unquantized", row.value, reason, false));
}

}  // namespace

Selection select_unquantized_family(SelectionContext& ctx) {
  if (ctx.moe.lora) {
    const BackendRow lora_row{"FLASHINFER_TRTLLM", "FlashInfer TRTLLM", {"TrtLlmBf16LoRAExperts"}};
    std::string reason;
    // The LoRA probe always uses the Standard format.
    auto cls = try_backend(ctx, lora_row, std::nullopt, std::nullopt, ActivationFormat::Standard, reason);
    if (cls) {
      if (ctx.moe.intermediate_size_per_partition % 128 == 0) return {"FLASHINFER_TRTLLM", *cls, std::nullopt, std::nullopt};
      ctx.candidates.back().ok = false;
      ctx.candidates.back().reason = "the TRT-LLM LoRA kernel needs the per-rank intermediate size to be a multiple of 128";
    }
    ctx.candidates.push_back({"TRITON", "TritonExperts", true, ""});
    ctx.notes.push_back("LoRA: vLLM returns TritonExperts without checking it");
    return {"TRITON", "TritonExperts", std::nullopt, std::nullopt};
  }

  std::vector<std::string> available = priority(ctx);
  const std::string& runner = ctx.moe.moe_backend;
  const ActivationFormat fmt =
      (ctx.moe.parallel.use_batched_activation_format() || runner == "batched_triton") ? ActivationFormat::BatchedExperts : ActivationFormat::Standard;

  if (runner != "auto" && runner != "humming") {
    std::string requested = map_moe_backend(kMoeBackendMap, runner, "unquantized");
    if (fmt == ActivationFormat::BatchedExperts && requested == "TRITON") requested = "BATCHED_TRITON";
    return return_or_raise(ctx, requested, fmt);
  }
  if (runner == "humming") ctx.notes.push_back("--moe-backend humming is quantization-only; the unquantized oracle treats it as auto");

  const EnvVars& env = ctx.deployment.env;
  if (env.is_set("VLLM_ROCM_USE_AITER") || env.is_set("VLLM_ROCM_USE_AITER_MOE")) {
    const bool skip = !env.true_flag("VLLM_ROCM_USE_AITER", false) || !env.true_flag("VLLM_ROCM_USE_AITER_MOE", true) ||
                      ctx.env.aiter_rdna_enabled();
    if (skip) {
      available.erase(std::remove(available.begin(), available.end(), "AITER"), available.end());
    } else {
      ctx.notes.push_back("VLLM_ROCM_USE_AITER is exported and true: AITER is forced");
      return return_or_raise(ctx, "AITER", fmt);
    }
  }

  for (const auto& name : available) {
    std::string reason;
    if (auto cls = try_backend(ctx, backend(name), std::nullopt, std::nullopt, fmt, reason)) return {name, *cls, std::nullopt, std::nullopt};
  }
  raise_not_implemented("No Unquantized MoE backend supports the deployment configuration.");
}

std::vector<BackendListing> unquantized_backend_listing() {
  std::vector<BackendListing> out;
  for (const auto& b : unquantized_backends()) {
    BackendListing l = listing_of("unquantized", b, kMoeBackendMap);
    out.push_back(std::move(l));
  }
  out.push_back({"unquantized", "FLASHINFER_TRTLLM (LoRA)", {"TrtLlmBf16LoRAExperts"}, {}, true});
  return out;
}

}  // namespace moepack::oracle
