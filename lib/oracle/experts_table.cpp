#include "lib/oracle/experts_table.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "lib/core/error.h"

namespace moepack::oracle {

// ---------------------------------------------------------------------------------------------
// Availability predicates
// ---------------------------------------------------------------------------------------------

bool KernelEnv::aiter_enabled() const {
  // The @if_aiter_supported guard: ROCm, aiter importable, CDNA3 or newer.
  const bool supported = device.is_rocm() && packages.aiter && device.cdna_version() > 2;
  return supported && env.true_flag("VLLM_ROCM_USE_AITER", false);
}

bool KernelEnv::aiter_fused_moe_enabled() const {
  return aiter_enabled() && env.true_flag("VLLM_ROCM_USE_AITER_MOE", true);
}

bool KernelEnv::aiter_rdna_enabled() const {
  return device.is_rocm() && packages.aiter && device.on_rdna4() && env.true_flag("VLLM_ROCM_USE_AITER", false);
}

bool KernelEnv::deep_gemm_supported() const {
  const bool arch = device.is_cuda() && (device.is_device_capability(90) || device.is_device_capability_family(100) ||
                                         device.is_device_capability_family(120));
  return env.int_flag("VLLM_USE_DEEP_GEMM", true) && packages.deep_gemm && arch;
}

bool KernelEnv::cutlass_group_gemm_supported() const {
  if (!device.is_cuda()) return false;
  const int cap = device.cuda_capability.to_int();
  return cap >= 90 && cap < 120;
}

bool KernelEnv::mxfp4_experts_quant_supported() const {
  if (!device.is_cuda()) return false;
  const int cap = device.cuda_capability.to_int();
  return cap >= 100 && cap < 120;
}

bool KernelEnv::flashinfer_mxint4_available() const {
  return env.int_flag("VLLM_USE_FLASHINFER_MOE_INT4", false) && has_flashinfer() && device.is_cuda() &&
         device.is_device_capability_family(100);
}

std::string KernelEnv::humming_gemm_type() const {
  auto v = env.get("VLLM_HUMMING_MOE_GEMM_TYPE");
  if (!v) return "indexed";
  std::string s = *v;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (s == "grouped_contiguous" || s == "grouped") return "grouped_contiguous";
  return "indexed";
}

// ---------------------------------------------------------------------------------------------
// Building blocks shared by many rows
// ---------------------------------------------------------------------------------------------
namespace {

using namespace keys;
using Act = MoEActivation;
using R = RoutingMethodType;
using Pair = std::pair<OptKey, OptKey>;

bool scheme_in(const OptKey& w, const OptKey& a, std::initializer_list<Pair> allowed) {
  for (const auto& p : allowed)
    if (p.first == w && p.second == a) return true;
  return false;
}
bool key_in(const OptKey& w, std::initializer_list<QuantKey> allowed) {
  if (!w) return false;
  return std::find(allowed.begin(), allowed.end(), *w) != allowed.end();
}
auto acts(std::initializer_list<Act> allowed) {
  std::vector<Act> v(allowed);
  return [v](Act a, const KernelEnv&) { return std::find(v.begin(), v.end(), a) != v.end(); };
}
auto routings(std::initializer_list<R> allowed) {
  std::vector<R> v(allowed);
  return [v](R r, const OptKey&, const OptKey&) { return std::find(v.begin(), v.end(), r) != v.end(); };
}
bool apply_set(Act a, const KernelEnv&) { return apply_moe_activation_supported(a); }
bool any_parallel(const MoeParallelConfig&) { return true; }
// Monolithic kernels that route themselves only run without all2all, EPLB and DP.
bool no_a2a_no_eplb_no_dp(const MoeParallelConfig& p) { return !p.use_all2all_kernels() && !p.enable_eplb && p.dp_size <= 1; }
bool no_fi_nvlink(const MoeParallelConfig& p) { return !(p.use_fi_nvl_two_sided_kernels() || p.use_fi_nvl_one_sided_kernels()); }
bool any_router_dtype(FloatType, R) { return true; }
bool bf16_or_fp32_router(FloatType t, R) { return t == FloatType::bfloat16 || t == FloatType::float32; }

bool cuda_family(const KernelEnv& e, int fam) { return e.device.is_cuda() && e.device.is_device_capability_family(fam); }
bool cpu_x86_amx(const KernelEnv& e) { return e.device.is_cpu() && e.device.cpu_arch == CpuArch::x86 && e.device.amx_tiles; }

// TritonExperts' own is_supported_config: after the generic checks, on CUDA/ROCm the
// moe_align_block_size kernel needs fewer than 1024 experts once padded to 32.
CheckResult triton_expert_count_check(CheckResult base, const CheckInput& in) {
  if (!base.ok || !in.env.device.is_cuda_alike()) return base;
  const int padded = (in.moe.num_experts + 31) / 32 * 32;
  if (padded >= 1024) return CheckResult::fail("kernel's moe_align_block_size requires fewer than 1024 padded experts");
  return base;
}

// The FlashInfer TRT-LLM routing kernels take at most 2048 experts (checked after the generic ones).
CheckResult trtllm_expert_count_check(CheckResult base, const CheckInput& in) {
  if (!base.ok || in.moe.num_experts <= 2048) return base;
  return CheckResult::fail("FlashInfer TRTLLM routing supports at most 2048 experts, but got " + std::to_string(in.moe.num_experts));
}

bool triton_quant_scheme(const OptKey& w, const OptKey& a, const KernelEnv& e) {
  if (!w && !a) return true;
  const bool int8_ok = (e.device.is_cuda() && e.device.has_device_capability(75)) || e.device.is_rocm();
  if (int8_ok && scheme_in(w, a, {{kInt8StaticChannelSym, kInt8DynamicTokenSym}, {kInt8StaticTensorSym, kInt8DynamicTensorSym}}))
    return true;
  if (e.device.supports_fp8() &&
      scheme_in(w, a,
                {{kFp8Static128BlockSym, kFp8Dynamic128Sym},
                 {kFp8StaticChannelSym, kFp8DynamicTokenSym},
                 {kFp8StaticTensorSym, kFp8DynamicTokenSym},
                 {kFp8StaticTensorSym, kFp8StaticTensorSym},
                 {kFp8StaticTensorSym, kFp8DynamicTensorSym}}))
    return true;
  return false;
}

ExpertsClass triton_experts() {
  ExpertsClass c;
  c.name = "TritonExperts";
  c.device = [](const KernelEnv& e) { return e.device.is_cuda_alike() || e.device.is_xpu(); };
  c.no_act_and_mul = true;
  c.activation = apply_set;
  c.quant_scheme = triton_quant_scheme;
  c.parallel = no_fi_nvlink;
  c.batch_invariant = true;
  c.lora = true;
  c.after = triton_expert_count_check;
  c.summary = "Triton fused MoE (BF16/FP16, FP8, INT8 W8A8)";
  return c;
}

ExpertsClass marlin_base(const char* name, ActivationFormat fmt, bool lora) {
  ExpertsClass c;
  c.name = name;
  c.format = fmt;
  c.device = [](const KernelEnv& e) { return e.device.is_cuda() && e.device.has_device_capability(75); };
  c.no_act_and_mul = true;
  c.activation = apply_set;
  // Marlin looks at the weight key only: any activation key passes.
  c.quant_scheme = [](const OptKey& w, const OptKey&, const KernelEnv&) {
    return key_in(w, {kFp8Static128BlockSym, kFp8StaticChannelSym, kFp8StaticTensorSym, kMxfp4Static, kMxfp8Static,
                      kNvfp4Static, kInt4Static, kInt8Static, kInt4Static32, kInt4StaticAsym, kInt4Static32Asym});
  };
  c.parallel = [](const MoeParallelConfig& p) { return !p.use_fi_nvl_two_sided_kernels(); };
  c.lora = lora;
  c.summary = "Marlin weight-only GEMM (FP8/FP4/MXFP4/MXFP8/INT4/INT8 weights, 16-bit activations)";
  return c;
}

// Humming keys: the explicit pairs plus any unsigned 2-8 bit integer weight with per-channel
// or (1, g) scales and a None or FP8-per-token activation.
bool humming_wna16_weight(const OptKey& w) {
  if (!w || w->scale2) return false;
  const GroupShape g = w->scale.group;
  if (!(g == GroupShape::per_channel() || (g.row == 1 && g.col > 0))) return false;
  switch (w->dtype) {
    case ElemType::uint4b8:
    case ElemType::uint8b128:
    case ElemType::u8:
    case ElemType::uint2b2:
    case ElemType::uint3b4:
    case ElemType::scalar_uint4:
    case ElemType::scalar_uint8: return true;
    default: return false;
  }
}

ExpertsClass humming(const char* name, const char* gemm_type, ActivationFormat fmt) {
  ExpertsClass c;
  c.name = name;
  c.format = fmt;
  c.device = [](const KernelEnv& e) { return e.has_humming() && e.device.is_cuda() && e.device.has_device_capability(75); };
  c.no_act_and_mul = true;
  c.activation = apply_set;
  c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) {
    if (scheme_in(w, a,
                  {{kMxfp4Static, std::nullopt},          {kMxfp4Static, kMxfp4Dynamic},
                   {kMxfp4Static, kMxfp8Dynamic},         {kMxfp4Static, kFp8DynamicTokenSym},
                   {kNvfp4Static, std::nullopt},          {kNvfp4Static, kFp8DynamicTokenSym},
                   {kMxfp8Static, std::nullopt},          {kMxfp8Static, kFp8DynamicTokenSym},
                   {kFp8StaticChannelSym, std::nullopt},  {kFp8StaticChannelSym, kFp8DynamicTokenSym},
                   {kFp8Static128BlockSym, std::nullopt}, {kFp8Static128BlockSym, kFp8DynamicTokenSym},
                   {kInt4Static, std::nullopt},           {kInt4Static, kFp8DynamicTokenSym},
                   {kInt8Static, std::nullopt},           {kInt8Static, kFp8DynamicTokenSym},
                   {kFp8StaticChannelSym, kFp8StaticTensorSym}, {kFp8StaticChannelSym, kFp8Dynamic128Sym},
                   {kFp8StaticTensorSym, std::nullopt},   {kFp8StaticTensorSym, kFp8DynamicTokenSym},
                   {kFp8StaticTensorSym, kFp8StaticTensorSym}, {kFp8StaticTensorSym, kFp8Dynamic128Sym},
                   {kFp8Static128BlockSym, kFp8Dynamic128Sym}, {kInt8StaticChannelSym, std::nullopt},
                   {kInt8StaticChannelSym, kInt8DynamicTokenSym}, {kNvfp4Static, kNvfp4Dynamic},
                   {kMxfp8Static, kMxfp8Dynamic}}))
      return true;
    return (!a || *a == kFp8DynamicTokenSym) && humming_wna16_weight(w);
  };
  c.parallel = any_parallel;
  c.batch_invariant = true;
  const std::string type = gemm_type;
  // Only the class whose GEMM type is the preferred one may be chosen.
  c.after = [type](CheckResult base, const CheckInput& in) {
    if (!base.ok) return base;
    const std::string preferred = in.env.humming_gemm_type();
    if (preferred != type) return CheckResult::fail("preferred gemm type " + preferred + " != supported gemm type " + type);
    return base;
  };
  c.summary = std::string("Humming ") + gemm_type + " MoE GEMM";
  return c;
}

// XPUExperts and its per-scheme subclasses (xpu_moe.py).
ExpertsClass xpu(const char* name, std::function<bool(const OptKey&, const OptKey&, const KernelEnv&)> scheme) {
  ExpertsClass c;
  c.name = name;
  c.device = [](const KernelEnv& e) { return e.device.is_xpu(); };
  c.no_act_and_mul = true;
  c.activation = acts({Act::SILU, Act::GELU, Act::GELU_TANH, Act::SWIGLUOAI, Act::RELU2_NO_MUL});
  c.quant_scheme = std::move(scheme);
  c.parallel = any_parallel;
  c.summary = "Intel XPU fused MoE";
  return c;
}

// CPU Monolithic experts: routing done by select_experts for the softmax-style routers.
ExpertsClass cpu_monolithic(const char* name) {
  ExpertsClass c;
  c.name = name;
  c.monolithic = true;
  c.device = cpu_x86_amx;
  c.no_act_and_mul = false;
  c.parallel = any_parallel;
  c.routing = routings({R::Default, R::Renormalize, R::RenormalizeNaive});
  c.router_logits = any_router_dtype;
  return c;
}

ExpertsClass trtllm_mxfp4(bool monolithic) {
  ExpertsClass c;
  c.name = monolithic ? "TrtLlmMxfp4ExpertsMonolithic" : "TrtLlmMxfp4ExpertsModular";
  c.monolithic = monolithic;
  c.device = [](const KernelEnv& e) { return cuda_family(e, 100) && e.has_flashinfer(); };
  c.no_act_and_mul = false;
  c.activation = [](Act a, const KernelEnv& e) {
    if (a == Act::SITU) return e.flashinfer_has_situ();
    return a == Act::SWIGLUOAI || a == Act::SILU;
  };
  c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) {
    return scheme_in(w, a, {{kMxfp4Static, std::nullopt}, {kMxfp4Static, kMxfp8Dynamic}});
  };
  if (monolithic) {
    c.parallel = no_a2a_no_eplb_no_dp;
    c.routing = routings({R::DeepSeekV3, R::Renormalize, R::RenormalizeNaive});
    c.router_logits = any_router_dtype;  // converted to bf16 inside the kernel
  } else {
    c.parallel = any_parallel;
  }
  c.summary = "FlashInfer TRT-LLM MXFP4 MoE (SM100 family)";
  return c;
}

ExpertsClass oai_triton(const char* name, bool monolithic, std::function<bool(Act, const KernelEnv&)> activation, bool lora) {
  ExpertsClass c;
  c.name = name;
  c.monolithic = monolithic;
  // CUDA 9.0 <= cap < 11.0 (Hopper, Blackwell SM10x); ROCm gfx9 or RDNA3/4; plus triton_kernels.
  c.device = [](const KernelEnv& e) {
    bool window = false;
    if (e.device.is_cuda()) {
      const int cap = e.device.cuda_capability.to_int();
      window = cap >= 90 && cap < 110;
    } else if (e.device.is_rocm()) {
      window = e.device.on_gfx9() || e.device.on_gfx1x();
    }
    return window && e.triton_kernels();
  };
  c.no_act_and_mul = false;
  c.activation = std::move(activation);
  c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) { return scheme_in(w, a, {{kMxfp4Static, std::nullopt}}); };
  if (monolithic) {
    c.parallel = no_a2a_no_eplb_no_dp;
    c.routing = routings({R::Renormalize, R::RenormalizeNaive});
    c.router_logits = any_router_dtype;
  } else {
    c.parallel = any_parallel;
  }
  c.lora = lora;
  c.summary = "OpenAI triton_kernels MXFP4 MoE";
  return c;
}

ExpertsClass trtllm_fp8(bool monolithic) {
  ExpertsClass c;
  c.name = monolithic ? "TrtLlmFp8ExpertsMonolithic" : "TrtLlmFp8ExpertsModular";
  c.monolithic = monolithic;
  c.device = [](const KernelEnv& e) { return cuda_family(e, 100) && e.has_flashinfer(); };
  c.no_act_and_mul = true;
  c.activation = acts({Act::SILU, Act::SWIGLUOAI_UNINTERLEAVE, Act::RELU2_NO_MUL});
  if (monolithic) {
    c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) {
      return scheme_in(w, a, {{kFp8Static128BlockSym, kFp8Dynamic128Sym}, {kFp8StaticTensorSym, kFp8StaticTensorSym}, {kMxfp8Static, kMxfp8Dynamic}});
    };
    c.parallel = [](const MoeParallelConfig& p) {
      return (!p.use_all2all_kernels() || p.use_ag_rs_all2all_kernels()) && !(p.enable_eplb || p.is_sequence_parallel());
    };
    c.routing = [](R r, const OptKey& w, const OptKey& a) {
      std::vector<R> allowed = {R::DeepSeekV3, R::Renormalize, R::RenormalizeNaive, R::SigmoidRenorm, R::Sigmoid, R::MiniMax2, R::Simulated};
      // Per-tensor FP8 additionally accepts Llama-4 routing.
      if (scheme_in(w, a, {{kFp8StaticTensorSym, kFp8StaticTensorSym}})) allowed.push_back(R::Llama4);
      return std::find(allowed.begin(), allowed.end(), r) != allowed.end();
    };
    c.router_logits = bf16_or_fp32_router;
  } else {
    c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) {
      return scheme_in(w, a, {{kFp8Static128BlockSym, kFp8Dynamic128Sym}, {kMxfp8Static, kMxfp8Dynamic}});
    };
    c.parallel = [](const MoeParallelConfig& p) {
      return (!p.use_all2all_kernels() || p.use_ag_rs_all2all_kernels() || p.use_deepep_v2_kernels() ||
              p.use_fi_nvl_one_sided_kernels() || p.use_fi_nvl_two_sided_kernels()) &&
             !p.enable_eplb;
    };
  }
  c.after = trtllm_expert_count_check;
  c.summary = "FlashInfer TRT-LLM FP8 MoE (SM100 family)";
  return c;
}

ExpertsClass trtllm_nvfp4(bool monolithic) {
  ExpertsClass c;
  c.name = monolithic ? "TrtLlmNvFp4ExpertsMonolithic" : "TrtLlmNvFp4ExpertsModular";
  c.monolithic = monolithic;
  c.device = [](const KernelEnv& e) { return cuda_family(e, 100) && e.has_flashinfer(); };
  c.no_act_and_mul = true;
  c.activation = [](Act a, const KernelEnv& e) {
    if (a == Act::SITU) return e.flashinfer_has_situ();
    return a == Act::SILU || a == Act::RELU2_NO_MUL || a == Act::GELU || a == Act::GELU_TANH || a == Act::SWIGLUOAI_UNINTERLEAVE;
  };
  c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) { return scheme_in(w, a, {{kNvfp4Static, kNvfp4Dynamic}}); };
  if (monolithic) {
    c.parallel = [](const MoeParallelConfig& p) { return !p.use_all2all_kernels() && !p.enable_eplb; };
    c.routing = routings({R::DeepSeekV3, R::Renormalize, R::RenormalizeNaive, R::Llama4, R::SigmoidRenorm, R::Sigmoid, R::MiniMax2, R::Simulated});
    c.router_logits = bf16_or_fp32_router;
  } else {
    c.parallel = any_parallel;
  }
  c.summary = "FlashInfer TRT-LLM NVFP4 MoE (SM100 family)";
  return c;
}

ExpertsClass trtllm_bf16(bool monolithic) {
  ExpertsClass c;
  c.name = monolithic ? "TrtLlmBf16ExpertsMonolithic" : "TrtLlmBf16ExpertsModular";
  c.monolithic = monolithic;
  c.device = [](const KernelEnv& e) { return cuda_family(e, 100) && e.has_flashinfer(); };
  c.no_act_and_mul = true;
  c.activation = acts({Act::SILU, Act::RELU2_NO_MUL});
  c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) { return !w && !a; };
  c.router_logits = any_router_dtype;
  if (monolithic) {
    c.parallel = [](const MoeParallelConfig& p) { return (!p.use_all2all_kernels() || p.use_ag_rs_all2all_kernels()) && !p.enable_eplb; };
    c.routing = routings({R::DeepSeekV3, R::Llama4, R::Renormalize, R::RenormalizeNaive, R::SigmoidRenorm, R::Sigmoid});
  } else {
    c.parallel = [](const MoeParallelConfig& p) {
      return p.use_all2all_kernels() && !p.use_ag_rs_all2all_kernels() && !p.use_deepep_ht_kernels() && !p.enable_eplb;
    };
  }
  c.after = trtllm_expert_count_check;
  c.summary = "FlashInfer TRT-LLM BF16 MoE (SM100 family)";
  return c;
}

ExpertsClass cutlass_fp8(bool batched) {
  ExpertsClass c;
  c.name = batched ? "CutlassBatchedExpertsFp8" : "CutlassExpertsFp8";
  c.format = batched ? ActivationFormat::BatchedExperts : ActivationFormat::Standard;
  c.device = [](const KernelEnv& e) { return e.cutlass_group_gemm_supported(); };
  c.no_act_and_mul = false;
  c.activation = [](Act a, const KernelEnv&) { return is_gated(a) && apply_moe_activation_supported(a); };
  c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) {
    return scheme_in(w, a, {{kFp8StaticChannelSym, kFp8DynamicTokenSym}, {kFp8StaticTensorSym, kFp8DynamicTensorSym}, {kFp8StaticTensorSym, kFp8StaticTensorSym}});
  };
  if (batched) c.parallel = any_parallel;
  else c.parallel = [](const MoeParallelConfig& p) {
    return !(p.use_fi_nvl_two_sided_kernels() || p.use_deepep_ht_kernels() || p.use_fi_nvl_one_sided_kernels());
  };
  c.summary = "vLLM CUTLASS grouped FP8 GEMM";
  return c;
}

ExpertsClass deep_gemm_experts() {
  ExpertsClass c;
  c.name = "DeepGemmExperts";
  c.device = [](const KernelEnv& e) { return e.deep_gemm_supported(); };
  c.no_act_and_mul = false;
  c.activation = acts({Act::SILU, Act::SWIGLUSTEP, Act::SWIGLUOAI_UNINTERLEAVE});
  c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv& e) {
    if (scheme_in(w, a, {{kFp8Static128BlockSym, kFp8Dynamic128Sym}})) return true;
    // The MXFP8 1x32 recipe exists only on Blackwell (SM100 family).
    if (scheme_in(w, a, {{kMxfp8Static, kMxfp8Dynamic}})) return e.device.is_device_capability_family(100);
    return false;
  };
  c.parallel = no_fi_nvlink;
  c.summary = "DeepGEMM grouped FP8 GEMM";
  return c;
}

// FallbackExperts wrappers (fallback.py): each static predicate is the AND of both children;
// routing, shape, batch invariance and LoRA stay at the base defaults, and TritonExperts'
// expert-count check does not run.
ExpertsClass fallback(const char* name, const ExpertsClass& primary, const ExpertsClass& secondary, const char* summary) {
  ExpertsClass c;
  c.name = name;
  c.format = primary.format;
  auto d1 = primary.device, d2 = secondary.device;
  c.device = [d1, d2](const KernelEnv& e) { return d1(e) && d2(e); };
  c.no_act_and_mul = primary.no_act_and_mul && secondary.no_act_and_mul;
  auto a1 = primary.activation, a2 = secondary.activation;
  c.activation = [a1, a2](Act a, const KernelEnv& e) { return a1(a, e) && a2(a, e); };
  auto q1 = primary.quant_scheme, q2 = secondary.quant_scheme;
  c.quant_scheme = [q1, q2](const OptKey& w, const OptKey& a, const KernelEnv& e) { return q1(w, a, e) && q2(w, a, e); };
  auto p1 = primary.parallel, p2 = secondary.parallel;
  c.parallel = [p1, p2](const MoeParallelConfig& p) { return p1(p) && p2(p); };
  c.summary = summary;
  return c;
}

ExpertsClass aiter_experts() {
  ExpertsClass c;
  c.name = "AiterExperts";
  c.device = [](const KernelEnv& e) { return e.aiter_fused_moe_enabled(); };
  c.no_act_and_mul = false;
  c.activation = acts({Act::SILU, Act::GELU, Act::SITU, Act::SWIGLUOAI, Act::SWIGLUOAI_UNINTERLEAVE});
  c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv& e) {
    if (!scheme_in(w, a,
                   {{std::nullopt, std::nullopt},
                    {kFp8Static128BlockSym, kFp8Dynamic128Sym},
                    {kFp8StaticTensorSym, kFp8StaticTensorSym},
                    {kFp8StaticTensorSym, kFp8DynamicTensorSym},
                    {kFp8StaticChannelSym, kFp8DynamicTokenSym},
                    {kMxfp4Static, std::nullopt},
                    {kMxfp4Static, kMxfp4Dynamic}}))
      return false;
    // The CK MXFP4 kernels exist for gfx950 only.
    if (w == kMxfp4Static) return e.device.on_gfx950() && !e.device.on_gfx1250();
    return true;
  };
  c.parallel = no_fi_nvlink;
  // A rejection while AITER MoE is off says how to turn it on.
  c.after = [](CheckResult base, const CheckInput& in) {
    if (!base.ok && !in.env.aiter_fused_moe_enabled())
      base.reason += ". AITER MoE is not enabled — set VLLM_ROCM_USE_AITER=1 and VLLM_ROCM_USE_AITER_MOE=1 to enable it";
    return base;
  };
  c.summary = "ROCm AITER CK fused MoE";
  return c;
}

ExpertsClass aiter_mxfp4_monolithic(bool w4a8) {
  ExpertsClass c;
  c.name = w4a8 ? "AiterW4A8ExpertsMonolithic" : "AiterW4A16ExpertsMonolithic";
  c.monolithic = true;
  c.device = [](const KernelEnv& e) { return e.aiter_enabled() && (e.device.on_gfx950() || e.device.on_gfx1250()); };
  c.no_act_and_mul = false;
  if (w4a8) {
    c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) { return scheme_in(w, a, {{kMxfp4Static, kFp8StaticTensorSym}}); };
    c.activation = acts({Act::SWIGLUOAI});
    c.routing = routings({R::Renormalize, R::RenormalizeNaive});
  } else {
    c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) { return scheme_in(w, a, {{kMxfp4Static, std::nullopt}}); };
    c.activation = acts({Act::SWIGLUOAI, Act::SILU});
    c.routing = routings({R::Renormalize, R::RenormalizeNaive, R::DeepseekV4});
  }
  c.parallel = no_a2a_no_eplb_no_dp;
  c.router_logits = any_router_dtype;
  c.summary = w4a8 ? "AITER triton MXFP4 W4A8 MoE (gfx950/gfx1250)" : "AITER MXFP4 W4A16 MoE (gfx950/gfx1250)";
  return c;
}

// Mxfp8TritonExpertsBase: TritonExperts restricted to (MXFP8, MXFP8).
ExpertsClass mxfp8_triton(const char* name, std::function<bool(const KernelEnv&)> device, const char* summary) {
  ExpertsClass c = triton_experts();
  c.name = name;
  c.device = std::move(device);
  c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) { return scheme_in(w, a, {{kMxfp8Static, kMxfp8Dynamic}}); };
  c.activation = [](Act a, const KernelEnv&) { return a == Act::SWIGLUOAI_UNINTERLEAVE || apply_moe_activation_supported(a); };
  c.summary = summary;
  return c;
}

constexpr double kAiterSwigluAlpha = 1.702;
constexpr double kAiterSwigluBeta = 1.0;

std::string py_float(std::optional<double> v) {
  if (!v) return "None";
  std::string s = std::to_string(*v);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s += '0';
  return s;
}

bool isclose(double a, double b) { return std::fabs(a - b) <= std::max(1e-9 * std::max(std::fabs(a), std::fabs(b)), 0.0); }

ExpertsClass b12x_experts() {
  ExpertsClass c;
  c.name = "B12xExperts";
  c.device = [](const KernelEnv& e) { return cuda_family(e, 120) && e.packages.b12x; };
  c.no_act_and_mul = true;
  c.activation = acts({Act::SILU, Act::SITU, Act::SWIGLUOAI_UNINTERLEAVE, Act::RELU2_NO_MUL});
  c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) {
    return scheme_in(w, a,
                     {{kMxfp4Static, kMxfp8Dynamic}, {kMxfp4Static, std::nullopt}, {kNvfp4Static, kNvfp4Dynamic},
                      {kNvfp4Static, kMxfp8Dynamic}, {kNvfp4Static, std::nullopt}});
  };
  c.parallel = [](const MoeParallelConfig& p) { return !p.use_ep && p.ep_size == 1 && !p.use_all2all_kernels() && !p.enable_eplb; };
  // b12x validates the layer itself before the generic checks (b12x.py).
  c.before = [](const CheckInput& in) -> std::optional<std::string> {
    const MoeConfig& m = in.moe;
    if (m.has_bias) return "kernel does not support expert biases";
    if (m.in_dtype != FloatType::float16 && m.in_dtype != FloatType::bfloat16)
      return "kernel does not support " + float_type_torch_name(m.in_dtype) + " input/output dtype";
    if (m.activation == Act::SITU && (!m.situ_beta || *m.situ_beta != 4.0 || !m.situ_linear_beta || *m.situ_linear_beta != 25.0))
      return "kernel supports only SiTU beta=4 and linear_beta=25";
    if (in.activation_key && m.activation == Act::SWIGLUOAI_UNINTERLEAVE) return "kernel does not support swigluoai_uninterleave with W4A8";
    if (in.weight_key == kMxfp4Static && m.intermediate_size_per_partition % 32 != 0)
      return "MXFP4 requires the per-rank intermediate size to be divisible by 32";
    if (in.weight_key == kMxfp4Static && in.activation_key == kMxfp8Dynamic) {
      if (m.activation != Act::SILU && m.activation != Act::SITU) return "MXFP4 W4A8 supports only SiLU and SiTU";
      if (m.hidden_dim % 256 != 0 || m.intermediate_size_per_partition % 32 != 0)
        return "MXFP4 W4A8 requires hidden size divisible by 256 and per-rank intermediate size divisible by 32";
    }
    return std::nullopt;
  };
  c.summary = "b12x fused MoE (SM12x, needs the b12x library)";
  return c;
}

ExpertsClass cpu_unquantized(const char* name, std::function<bool(const KernelEnv&)> device, int output_alignment,
                             int reduction_alignment, bool needs_bf16) {
  ExpertsClass c;
  c.name = name;
  c.monolithic = true;
  c.device = std::move(device);
  c.no_act_and_mul = false;
  c.activation = acts({Act::SILU, Act::SWIGLUOAI, Act::GELU, Act::GELU_TANH});
  c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) { return !w && !a; };
  c.parallel = any_parallel;
  c.routing = [](R, const OptKey&, const OptKey&) { return true; };
  c.router_logits = any_router_dtype;
  // After the generic checks: (zentorch is not part of the reference builds) the grouped GEMM
  // needs aligned dimensions, and the x86/Arm/Power kernels need bf16 activations.
  c.after = [output_alignment, reduction_alignment, needs_bf16](CheckResult base, const CheckInput& in) {
    if (!base.ok) return base;
    if (needs_bf16 && in.moe.in_dtype != FloatType::bfloat16) return CheckResult::fail("kernel requires bfloat16 activations");
    const int lcm = std::lcm(output_alignment, reduction_alignment);
    int inter = in.moe.intermediate_size_per_partition;
    if (in.moe.activation != Act::SWIGLUOAI) inter = (inter + lcm - 1) / lcm * lcm;
    const int hidden = in.moe.hidden_dim;
    if (hidden % output_alignment != 0 || inter % output_alignment != 0)
      return CheckResult::fail("kernel requires hidden and intermediate dimensions divisible by " + std::to_string(output_alignment));
    if (hidden % reduction_alignment != 0 || inter % reduction_alignment != 0)
      return CheckResult::fail("kernel requires reduction dimensions divisible by " + std::to_string(reduction_alignment));
    return base;
  };
  c.summary = "CPU unquantized fused MoE";
  return c;
}

std::map<std::string, ExpertsClass> build_table() {
  std::map<std::string, ExpertsClass> t;
  auto add = [&t](ExpertsClass c) {
    const std::string key = c.name;
    t.emplace(key, std::move(c));
  };

  // ---- FlashInfer TRT-LLM ----
  add(trtllm_mxfp4(true));
  add(trtllm_mxfp4(false));
  add(trtllm_nvfp4(true));
  add(trtllm_nvfp4(false));
  add(trtllm_fp8(true));
  add(trtllm_fp8(false));
  add(trtllm_bf16(true));
  add(trtllm_bf16(false));
  {
    ExpertsClass c;
    c.name = "TrtLlmBf16LoRAExperts";
    c.device = [](const KernelEnv& e) { return cuda_family(e, 100) && e.has_flashinfer(); };
    c.no_act_and_mul = false;
    c.activation = acts({Act::SILU});
    c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) { return !w && !a; };
    c.parallel = [](const MoeParallelConfig& p) { return (!p.use_all2all_kernels() || p.use_ag_rs_all2all_kernels()) && !p.enable_eplb; };
    c.routing = routings({R::DeepSeekV3, R::Llama4, R::Renormalize, R::RenormalizeNaive});
    c.router_logits = any_router_dtype;
    c.lora = true;
    c.summary = "FlashInfer TRT-LLM BF16 MoE with LoRA deltas (SM100 family)";
    add(c);
  }
  {
    ExpertsClass c;
    c.name = "TrtLlmMxint4ExpertsMonolithic";
    c.monolithic = true;
    c.device = [](const KernelEnv& e) { return cuda_family(e, 100) && e.flashinfer_mxint4_available(); };
    c.no_act_and_mul = false;
    c.activation = acts({Act::SILU, Act::SWIGLUOAI});
    c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) { return scheme_in(w, a, {{kInt4Static32, std::nullopt}}); };
    c.parallel = [](const MoeParallelConfig& p) { return (!p.use_all2all_kernels() || p.use_ag_rs_all2all_kernels()) && !p.enable_eplb; };
    c.routing = routings({R::Renormalize, R::RenormalizeNaive, R::DeepSeekV3, R::Llama4, R::Simulated});
    c.router_logits = [](FloatType t, R r) {
      // fp32 logits only where the routing kernel handles them internally.
      if (t == FloatType::float32) return r == R::DeepSeekV3 || r == R::Simulated;
      return true;
    };
    c.summary = "FlashInfer TRT-LLM MxInt4 MoE (SM100 family, VLLM_USE_FLASHINFER_MOE_INT4=1)";
    add(c);
  }

  // ---- FlashInfer CUTLASS / CuteDSL / b12x ----
  {
    ExpertsClass c;
    c.name = "FlashInferExperts";
    // SM110 is excluded (flashinfer-ai/flashinfer#3134).
    c.device = [](const KernelEnv& e) {
      return e.device.is_cuda() &&
             (e.device.is_device_capability(90) || e.device.is_device_capability_family(100) || e.device.is_device_capability_family(120)) &&
             e.has_flashinfer();
    };
    c.no_act_and_mul = true;
    c.activation = acts({Act::SILU, Act::GELU_TANH, Act::RELU2_NO_MUL, Act::SWIGLUOAI, Act::SWIGLUOAI_UNINTERLEAVE});
    c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv& e) {
      const Device& d = e.device;
      return (scheme_in(w, a, {{std::nullopt, std::nullopt}, {kFp8StaticTensorSym, kFp8StaticTensorSym}}) && d.has_device_capability(90)) ||
             (scheme_in(w, a, {{kMxfp4Static, std::nullopt}, {kFp8Static128BlockSym, kFp8Dynamic128Sym}}) && d.is_device_capability(90)) ||
             (scheme_in(w, a, {{kMxfp4Static, kMxfp8Dynamic}, {kNvfp4Static, kNvfp4Dynamic}}) && d.has_device_capability(100));
    };
    c.parallel = any_parallel;
    c.summary = "FlashInfer CUTLASS fused MoE (SM90, SM100 family, SM120 family)";
    add(c);
  }
  {
    ExpertsClass c;
    c.name = "FlashInferCuteDSLExperts";
    c.device = [](const KernelEnv& e) { return cuda_family(e, 100) && e.has_flashinfer(); };
    c.no_act_and_mul = true;
    c.activation = acts({Act::SILU, Act::SWIGLUOAI, Act::SWIGLUOAI_UNINTERLEAVE, Act::RELU2_NO_MUL});
    c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) { return scheme_in(w, a, {{kNvfp4Static, kNvfp4Dynamic}}); };
    c.parallel = any_parallel;
    c.summary = "FlashInfer CuteDSL NVFP4 MoE (SM100 family)";
    add(c);
  }
  {
    ExpertsClass c;
    c.name = "FlashInferCuteDSLBatchedExperts";
    c.format = ActivationFormat::BatchedExperts;
    c.device = [](const KernelEnv& e) { return cuda_family(e, 100) && e.has_flashinfer(); };
    c.no_act_and_mul = false;
    c.activation = acts({Act::SILU});
    c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) { return scheme_in(w, a, {{kNvfp4Static, kNvfp4Dynamic}}); };
    c.parallel = any_parallel;
    c.summary = "FlashInfer CuteDSL masked grouped GEMM NVFP4 MoE, batched format (SM100 family)";
    add(c);
  }
  {
    ExpertsClass c;
    c.name = "FlashInferB12xExperts";
    c.device = [](const KernelEnv& e) { return cuda_family(e, 120) && e.has_flashinfer(); };
    c.no_act_and_mul = true;
    c.activation = acts({Act::SILU, Act::GELU_TANH, Act::RELU2_NO_MUL});
    c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) {
      return scheme_in(w, a, {{kNvfp4Static, kNvfp4Dynamic}, {kNvfp4Static, std::nullopt}});
    };
    c.parallel = [](const MoeParallelConfig& p) { return !p.use_ep; };
    c.summary = "FlashInfer b12x NVFP4 MoE (SM120 family, explicit only)";
    add(c);
  }
  add(b12x_experts());

  // ---- vLLM CUTLASS ----
  add(cutlass_fp8(false));
  add(cutlass_fp8(true));
  {
    ExpertsClass c;
    c.name = "CutlassExpertsFp4";
    c.device = [](const KernelEnv& e) {
      return e.device.is_cuda() && (e.device.is_device_capability_family(100) || e.device.is_device_capability_family(110) ||
                                    e.device.is_device_capability_family(120));
    };
    c.no_act_and_mul = true;
    c.activation = apply_set;
    c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) { return scheme_in(w, a, {{kNvfp4Static, kNvfp4Dynamic}}); };
    c.parallel = [](const MoeParallelConfig& p) { return p.ep_size == 1; };
    c.batch_invariant = true;
    c.summary = "vLLM CUTLASS NVFP4 MoE (SM100/SM110/SM120 families)";
    add(c);
  }
  {
    ExpertsClass c;
    c.name = "CutlassExpertsMxfp4";
    c.device = [](const KernelEnv& e) { return e.mxfp4_experts_quant_supported(); };
    c.no_act_and_mul = true;
    c.activation = apply_set;
    c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) { return scheme_in(w, a, {{kMxfp4Static, kMxfp4Dynamic}}); };
    c.parallel = [](const MoeParallelConfig& p) { return p.ep_size == 1; };
    c.summary = "vLLM CUTLASS MXFP4 W4A4 MoE (10.0 <= SM < 12.0; compressed-tensors/AutoRound MXFP4)";
    add(c);
  }
  {
    ExpertsClass c;
    c.name = "CutlassExpertsW4A8Fp8";
    c.device = [](const KernelEnv& e) { return e.cutlass_group_gemm_supported(); };
    c.no_act_and_mul = false;
    c.activation = [](Act a, const KernelEnv&) { return is_gated(a) && apply_moe_activation_supported(a); };
    c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) { return scheme_in(w, a, {{kInt4Static, kFp8DynamicTokenSym}}); };
    c.parallel = any_parallel;
    c.before = [](const CheckInput& in) -> std::optional<std::string> {
      if (in.moe.in_dtype != FloatType::bfloat16) return "kernel does not support " + float_type_torch_name(in.moe.in_dtype) + " input/output dtype";
      return std::nullopt;
    };
    c.summary = "vLLM CUTLASS INT4 x FP8 MoE";
    add(c);
  }

  // ---- DeepGEMM ----
  add(deep_gemm_experts());
  {
    ExpertsClass c;
    c.name = "DeepGemmFP4Experts";
    c.device = [](const KernelEnv& e) {
      return e.deep_gemm_supported() && (e.device.is_device_capability_family(100) || e.device.is_device_capability_family(120));
    };
    c.no_act_and_mul = false;
    c.activation = acts({Act::SILU, Act::SWIGLUSTEP, Act::SITU});
    c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) { return scheme_in(w, a, {{kMxfp4Static, kFp8Dynamic128Sym}}); };
    c.parallel = no_fi_nvlink;
    c.summary = "DeepGEMM MXFP4 x FP8 MoE (SM100/SM120 families)";
    add(c);
  }
  {
    ExpertsClass c;
    c.name = "BatchedDeepGemmExperts";
    c.format = ActivationFormat::BatchedExperts;
    c.device = [](const KernelEnv& e) { return e.deep_gemm_supported(); };
    c.no_act_and_mul = false;
    c.activation = acts({Act::SILU});
    c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) { return scheme_in(w, a, {{kFp8Static128BlockSym, kFp8Dynamic128Sym}}); };
    c.parallel = any_parallel;
    c.summary = "DeepGEMM masked grouped FP8 GEMM, batched format";
    add(c);
  }

  // ---- Triton ----
  add(triton_experts());
  add(fallback("TritonOrDeepGemmExperts", deep_gemm_experts(), triton_experts(), "DeepGEMM with Triton fallback (FP8 block)"));
  add(fallback("TritonOrCutlassExperts", cutlass_fp8(false), triton_experts(), "vLLM CUTLASS FP8 with Triton fallback"));
  {
    ExpertsClass c;
    c.name = "BatchedTritonExperts";
    c.format = ActivationFormat::BatchedExperts;
    c.device = [](const KernelEnv& e) { return e.device.is_cuda_alike() || e.device.is_xpu(); };
    c.no_act_and_mul = true;
    c.activation = acts({Act::SILU, Act::GELU, Act::GELU_TANH, Act::SWIGLUOAI, Act::SILU_NO_MUL, Act::GELU_NO_MUL, Act::GELU_TANH_NO_MUL, Act::RELU2_NO_MUL});
    c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv& e) {
      if (!w && !a) return true;
      const Device& d = e.device;
      const bool fp8 = (d.is_rocm() && (d.cdna_version() > 2 || d.on_rdna4())) || (d.is_cuda() && d.has_device_capability(89));
      return fp8 && scheme_in(w, a,
                              {{kFp8Static128BlockSym, kFp8Dynamic128Sym},
                               {kFp8StaticChannelSym, kFp8DynamicTokenSym},
                               {kFp8StaticTensorSym, kFp8DynamicTokenSym},
                               {kFp8StaticTensorSym, kFp8StaticTensorSym},
                               {kFp8StaticTensorSym, kFp8DynamicTensorSym}});
    };
    c.parallel = any_parallel;
    c.summary = "Triton fused MoE, batched format";
    add(c);
  }
  {
    ExpertsClass c = triton_experts();
    c.name = "TritonWNA16Experts";
    c.quant_scheme = [](const OptKey& w, const OptKey&, const KernelEnv&) {
      return key_in(w, {kInt4Static, kInt8Static, kInt4Static32, kInt4StaticAsym, kInt4Static32Asym});
    };
    c.activation = acts({Act::SILU, Act::GELU, Act::GELU_TANH, Act::SWIGLUOAI, Act::SWIGLUOAI_UNINTERLEAVE, Act::SWIGLUSTEP,
                         Act::SILU_NO_MUL, Act::GELU_NO_MUL, Act::GELU_TANH_NO_MUL, Act::RELU2_NO_MUL});
    c.summary = "Triton INT4/INT8 weight-only MoE";
    add(c);
  }
  {
    ExpertsClass c = triton_experts();
    c.name = "OCP_MXQuantizationEmulationTritonExperts";
    // The oracle picks it by backend, not by scheme: any keys pass.
    c.quant_scheme = [](const OptKey&, const OptKey&, const KernelEnv&) { return true; };
    c.before = [](const CheckInput& in) -> std::optional<std::string> {
      if (!in.env.has_quark()) return "kernel requires amd-quark package";
      return std::nullopt;
    };
    c.summary = "OCP MX emulation on Triton (dequantize to BF16; needs amd-quark)";
    add(c);
  }
  {
    ExpertsClass c = triton_experts();
    c.name = "Nvfp4QuantizationEmulationTritonExperts";
    c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) { return scheme_in(w, a, {{kNvfp4Static, kNvfp4Dynamic}}); };
    c.lora = false;
    c.before = [](const CheckInput& in) -> std::optional<std::string> {
      if (in.moe.lora) return "kernel does not support LoRA";
      if (in.moe.has_bias) return "kernel does not support bias";
      return std::nullopt;
    };
    c.summary = "NVFP4 emulation on Triton";
    add(c);
  }
  {
    ExpertsClass c = triton_experts();
    c.name = "Int4EmulationTritonExperts";
    c.device = [](const KernelEnv& e) { return e.device.is_cuda_alike(); };
    c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) {
      return key_in(w, {kInt4Static, kInt4Static32, kInt4StaticAsym, kInt4Static32Asym}) && !a;
    };
    c.summary = "INT4 emulation on Triton";
    add(c);
  }
  add(mxfp8_triton("Mxfp8NativeTritonExperts", [](const KernelEnv& e) { return e.device.is_rocm() && e.device.supports_mx(); },
                   "MXFP8 Triton dot_scaled MoE (ROCm MX-capable)"));
  add(mxfp8_triton("Mxfp8EmulationTritonExperts", [](const KernelEnv&) { return true; }, "MXFP8 emulation on Triton"));
  {
    ExpertsClass c = mxfp8_triton("AiterMxfp8Experts", [](const KernelEnv& e) { return e.device.is_rocm() && e.device.supports_mx(); },
                                  "AITER FlyDSL MXFP8 MoE (gfx950, needs flydsl)");
    c.parallel = any_parallel;
    c.after = [](CheckResult base, const CheckInput& in) {
      base = triton_expert_count_check(base, in);
      if (!base.ok) return base;
      const KernelEnv& e = in.env;
      if (!(e.device.is_rocm() && e.device.supports_mx() && e.packages.aiter && e.packages.flydsl))
        return CheckResult::fail("kernel requires the aiter flydsl package, which is not installed");
      if (in.moe.activation != Act::SWIGLUOAI_UNINTERLEAVE)
        return CheckResult::fail("kernel hardcodes SwiGLU-OAI activation and requires activation=swigluoai_uninterleave; got activation=" +
                                 activation_value(in.moe.activation));
      const auto& al = in.moe.swiglu_alpha;
      const auto& be = in.moe.swiglu_beta;
      if (!al || !isclose(*al, kAiterSwigluAlpha) || !be || !isclose(*be, kAiterSwigluBeta))
        return CheckResult::fail("kernel hardcodes SwiGLU-OAI with alpha=1.702 and beta=1.0; got swiglu_alpha=" + py_float(al) +
                                 " and swiglu_beta=" + py_float(be));
      return base;
    };
    add(c);
  }

  // ---- OpenAI triton_kernels (gpt-oss) ----
  add(oai_triton("OAITritonMxfp4ExpertsMonolithic", true, acts({Act::SWIGLUOAI}), false));
  add(oai_triton("OAITritonExperts", false, acts({Act::SWIGLUOAI}), false));
  add(oai_triton("UnfusedOAITritonExperts", false,
                 acts({Act::SILU, Act::GELU, Act::SWIGLUOAI, Act::SWIGLUSTEP, Act::SWIGLUOAI_UNINTERLEAVE}), true));

  // ---- Marlin ----
  add(marlin_base("MarlinExperts", ActivationFormat::Standard, true));
  add(marlin_base("BatchedMarlinExperts", ActivationFormat::BatchedExperts, false));

  // ---- Humming ----
  add(humming("BatchedHummingGroupedExperts", "grouped_masked", ActivationFormat::BatchedExperts));
  add(humming("HummingGroupedExperts", "grouped_contiguous", ActivationFormat::Standard));
  add(humming("HummingIndexedExperts", "indexed", ActivationFormat::Standard));

  // ---- ROCm AITER ----
  add(aiter_experts());
  add(aiter_mxfp4_monolithic(false));
  add(aiter_mxfp4_monolithic(true));

  // ---- XPU ----
  add(xpu("XPUExperts", [](const OptKey& w, const OptKey& a, const KernelEnv&) {
    return scheme_in(w, a, {{std::nullopt, std::nullopt}, {kFp8StaticTensorSym, std::nullopt}, {kFp8StaticTensorSym, kFp8DynamicTensorSym}});
  }));
  add(xpu("XPUExpertsFp8", [](const OptKey& w, const OptKey& a, const KernelEnv&) {
    return scheme_in(w, a, {{kFp8StaticTensorSym, std::nullopt}, {kFp8StaticTensorSym, kFp8DynamicTensorSym}});
  }));
  add(xpu("XPUExpertsMxFp8", [](const OptKey& w, const OptKey& a, const KernelEnv&) {
    return scheme_in(w, a, {{kMxfp8Static, std::nullopt}, {kMxfp8Static, kMxfp8Dynamic}});
  }));
  add(xpu("XPUExpertsBlockFp8", [](const OptKey& w, const OptKey& a, const KernelEnv&) {
    return scheme_in(w, a, {{kFp8Static128BlockSym, kFp8Dynamic128Sym}});
  }));
  add(xpu("XPUExpertsWNA16", [](const OptKey& w, const OptKey& a, const KernelEnv&) {
    return scheme_in(w, a, {{kInt4Static, std::nullopt}, {kInt4Static32, std::nullopt}});
  }));
  add(xpu("XPUExpertsMxFp4", [](const OptKey& w, const OptKey& a, const KernelEnv&) {
    return scheme_in(w, a, {{kMxfp4Static, std::nullopt}, {kMxfp4Static, kMxfp4Dynamic}});
  }));

  // ---- CPU ----
  {
    ExpertsClass c = cpu_monolithic("CPUExpertsFp8");
    c.activation = acts({Act::SILU});
    c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) { return scheme_in(w, a, {{kFp8Static128BlockSym, kFp8Dynamic128Sym}}); };
    c.summary = "CPU FP8 W8A16 MoE (x86 with AMX)";
    add(c);
  }
  {
    ExpertsClass c = cpu_monolithic("CPUExpertsMxfp4");
    c.activation = acts({Act::SILU, Act::SWIGLUOAI});
    c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) { return scheme_in(w, a, {{kMxfp4Static, std::nullopt}}); };
    c.summary = "CPU MXFP4 W4A16 MoE (x86 with AMX)";
    add(c);
  }
  {
    ExpertsClass c = cpu_monolithic("CPUExpertsInt4");
    c.activation = acts({Act::SILU});
    c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) { return scheme_in(w, a, {{kInt4Static, std::nullopt}}); };
    c.summary = "CPU INT4 W4A16 MoE (x86 with AMX)";
    add(c);
  }
  {
    ExpertsClass c = cpu_monolithic("CPUExpertsInt8");
    c.activation = acts({Act::SILU});
    c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) { return scheme_in(w, a, {{kInt8StaticChannelSym, kInt8DynamicTokenSym}}); };
    c.after = [](CheckResult base, const CheckInput& in) {
      if (!base.ok) return base;
      if (in.moe.hidden_dim % 32 != 0) return CheckResult::fail("kernel requires hidden dim divisible by 32");
      if (in.moe.intermediate_size_per_partition % 32 != 0) return CheckResult::fail("kernel requires intermediate dim divisible by 32");
      return base;
    };
    c.summary = "CPU INT8 W8A8 MoE (x86 with AMX)";
    add(c);
  }
  {
    ExpertsClass c = cpu_monolithic("ArmCPUExpertsInt8");
    // Arm builds register the cpu_fused_moe_int8 op.
    c.device = [](const KernelEnv& e) { return e.device.is_cpu() && e.device.cpu_arch == CpuArch::arm; };
    c.activation = acts({Act::SILU, Act::SWIGLUOAI, Act::GELU, Act::GELU_TANH});
    c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) { return scheme_in(w, a, {{kInt8StaticChannelSym, kInt8DynamicTokenSym}}); };
    c.parallel = [](const MoeParallelConfig& p) { return !p.use_ep; };
    c.after = [](CheckResult base, const CheckInput& in) {
      if (!base.ok) return base;
      // float32, float16 and bfloat16 activations are all accepted: FloatType has no other value.
      if (in.moe.hidden_dim % 32 != 0) return CheckResult::fail("kernel requires hidden dim divisible by 32");
      if (in.moe.intermediate_size_per_partition % 32 != 0) return CheckResult::fail("kernel requires intermediate dim divisible by 32");
      return base;
    };
    c.summary = "Arm CPU INT8 W8A8 MoE";
    add(c);
  }
  {
    // cpu_int4_moe.py's CPUExpertsInt4 (Arm W4A8 with dynamic int8 activations); vLLM names it
    // like the x86 INT4 class, so the table keys it apart.
    ExpertsClass c = cpu_monolithic("CPUExpertsInt4[cpu_int4_moe]");
    c.device = [](const KernelEnv& e) { return e.device.is_cpu(); };
    c.activation = acts({Act::SILU, Act::SWIGLUOAI, Act::SWIGLUSTEP});
    c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) {
      return scheme_in(w, a,
                       {{kInt4W4A8StaticChannelSym, std::nullopt}, {kInt4W4A8StaticGroup128Sym, std::nullopt},
                        {kInt4W4A8StaticGroup64Sym, std::nullopt}, {kInt4W4A8StaticGroup32Sym, std::nullopt},
                        {kInt4W4A8StaticGroupSym, std::nullopt}});
    };
    c.parallel = [](const MoeParallelConfig& p) { return p.ep_size == 1; };
    c.before = [](const CheckInput& in) -> std::optional<std::string> {
      if (!in.env.device.is_cpu() || in.env.device.cpu_arch != CpuArch::arm) return "kernel only supports Arm CPU";
      return std::nullopt;
    };
    c.summary = "Arm CPU INT4 x dynamic INT8 MoE (torch _dyn_quant ops)";
    add(c);
  }
  add(cpu_unquantized("X86CPUUnquantizedExperts", cpu_x86_amx, 32, 32, true));
  add(cpu_unquantized("ArmCPUUnquantizedExperts",
                      [](const KernelEnv& e) { return e.device.is_cpu() && e.device.cpu_arch == CpuArch::arm; }, 32, 4, true));
  add(cpu_unquantized("PowerCPUUnquantizedExperts",
                      [](const KernelEnv& e) { return e.device.is_cpu() && e.device.cpu_arch == CpuArch::powerpc; }, 16, 2, true));
  add(cpu_unquantized("CPUUnquantizedExperts", [](const KernelEnv& e) { return e.device.is_cpu(); }, 32, 1, false));

  // ---- HPC ----
  {
    ExpertsClass c;
    c.name = "HPCExperts";
    c.device = [](const KernelEnv& e) { return e.device.is_cuda() && e.device.is_device_capability(90) && e.packages.hpc; };
    c.no_act_and_mul = false;
    c.activation = acts({Act::SILU});
    c.quant_scheme = [](const OptKey& w, const OptKey& a, const KernelEnv&) {
      return scheme_in(w, a, {{kFp8StaticTensorSym, kFp8StaticTensorSym}, {kFp8Static128BlockSym, kFp8Dynamic128Sym}});
    };
    c.shape = [](int hidden) { return hidden % 128 == 0; };
    c.parallel = any_parallel;
    c.summary = "HPC fused FP8 MoE (SM90, needs the hpc package)";
    add(c);
  }
  return t;
}

const std::map<std::string, ExpertsClass>& table() {
  static const std::map<std::string, ExpertsClass> t = build_table();
  return t;
}

}  // namespace

const ExpertsClass& experts_class(const std::string& id) {
  auto it = table().find(id);
  if (it == table().end()) throw_internal("experts table has no class '" + id + "'");
  return it->second;
}

const std::vector<std::string>& experts_class_ids() {
  static const std::vector<std::string> ids = [] {
    std::vector<std::string> v;
    for (const auto& [k, c] : table()) v.push_back(k);
    return v;
  }();
  return ids;
}

std::string experts_class_display_name(const std::string& id) {
  const auto bracket = id.find('[');
  return bracket == std::string::npos ? id : id.substr(0, bracket);
}

CheckResult is_supported_config(const std::string& id, const CheckInput& in) {
  const ExpertsClass& c = experts_class(id);
  if (c.before) {
    if (auto why = c.before(in)) return CheckResult::fail(*why);
  }
  const MoeConfig& m = in.moe;
  const bool fnuz = in.env.device.fp8_is_fnuz();
  auto reject = [](const std::string& what) { return CheckResult::fail("kernel does not support " + what); };
  CheckResult r = CheckResult::pass();
  if (!c.device(in.env)) {
    r = reject("current device " + in.env.device.device_name());
  } else if (!(m.is_act_and_mul() || c.no_act_and_mul)) {
    r = reject("no act_and_mul MLP layer");
  } else if (!c.activation(m.activation, in.env)) {
    r = reject(activation_repr(m.activation) + " activation");
  } else if (!c.quant_scheme(in.weight_key, in.activation_key, in.env)) {
    r = reject("quantization scheme " + quant_key_text(in.weight_key, fnuz) + "x" + quant_key_text(in.activation_key, fnuz));
  } else if (!c.parallel(m.parallel)) {
    r = reject("parallel config " + m.parallel.repr());
  } else if (c.routing && !c.routing(m.routing, in.weight_key, in.activation_key)) {
    // Python prints an IntEnum member as its integer value.
    r = reject("routing method " + std::to_string(static_cast<int>(m.routing)));
  } else if (c.router_logits && !c.router_logits(m.router_logits_dtype, m.routing)) {
    r = reject("router logits dtype " + float_type_torch_name(m.router_logits_dtype));
  } else if (c.shape && !c.shape(m.hidden_dim)) {
    r = reject(std::to_string(m.hidden_dim) + " hidden dim is not supported");
  } else if (in.format != c.format) {
    r = reject(activation_format_value_text(in.format) + " activation format");
  } else if (in.env.batch_invariant() && !c.batch_invariant) {
    r = reject("batch invariance");
  } else if (m.lora && !c.lora) {
    r = reject("LoRA");
  }
  if (c.after) r = c.after(std::move(r), in);
  return r;
}

}  // namespace moepack::oracle
