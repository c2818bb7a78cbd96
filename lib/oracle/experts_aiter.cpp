// ROCm AITER experts (vllm/model_executor/layers/fused_moe/experts/ @ e9d1398d9): the CK fused
// MoE (rocm_aiter_moe.py), the MXFP4 W4A16/W4A8 kernels (aiter_mxfp4_w4a8_moe.py) and the
// FlyDSL MXFP8 kernel (aiter_mxfp8_moe.py).
#include <algorithm>
#include <cmath>

#include "lib/oracle/experts_rows.h"

namespace moepack::oracle::experts {

namespace {

bool aiter_ck_quant_scheme(const OptKey& w, const OptKey& a, const KernelEnv& e) {
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
}

// A rejection while AITER MoE is off says how to turn it on.
CheckResult suggest_enabling_aiter(CheckResult base, const CheckInput& in) {
  if (!base.ok && !in.env.aiter_fused_moe_enabled())
    base.reason += ". AITER MoE is not enabled — set VLLM_ROCM_USE_AITER=1 and VLLM_ROCM_USE_AITER_MOE=1 to enable it";
  return base;
}

bool aiter_mxfp4_device(const KernelEnv& e) { return e.aiter_enabled() && (e.device.on_gfx950() || e.device.on_gfx1250()); }

constexpr double kAiterSwigluAlpha = 1.702;
constexpr double kAiterSwigluBeta = 1.0;

// Python's repr of an optional float.
std::string py_float(std::optional<double> v) {
  if (!v) return "None";
  std::string s = std::to_string(*v);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s += '0';
  return s;
}

bool isclose(double a, double b) { return std::fabs(a - b) <= std::max(1e-9 * std::max(std::fabs(a), std::fabs(b)), 0.0); }

// After TritonExperts' checks: the FlyDSL package, and the one activation the kernel hardcodes.
CheckResult flydsl_mxfp8_checks(CheckResult base, const CheckInput& in) {
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
}

const ExpertsClass kAiterExperts[] = {
    {
        .name = "AiterExperts",
        .device = [](const KernelEnv& e) { return e.aiter_fused_moe_enabled(); },
        .activation = acts({Act::SILU, Act::GELU, Act::SITU, Act::SWIGLUOAI, Act::SWIGLUOAI_UNINTERLEAVE}),
        .quant_scheme = aiter_ck_quant_scheme,
        .parallel = no_fi_nvlink,
        .after = suggest_enabling_aiter,
        .summary = "ROCm AITER CK fused MoE",
    },
    {
        .name = "AiterW4A16ExpertsMonolithic",
        .monolithic = true,
        .device = aiter_mxfp4_device,
        .activation = acts({Act::SWIGLUOAI, Act::SILU}),
        .quant_scheme = schemes({{kMxfp4Static, std::nullopt}}),
        .parallel = no_a2a_no_eplb_no_dp,
        .routing = routings({R::Renormalize, R::RenormalizeNaive, R::DeepseekV4}),
        .router_logits = any_router_dtype,
        .summary = "AITER MXFP4 W4A16 MoE (gfx950/gfx1250)",
    },
    {
        .name = "AiterW4A8ExpertsMonolithic",
        .monolithic = true,
        .device = aiter_mxfp4_device,
        .activation = acts({Act::SWIGLUOAI}),
        .quant_scheme = schemes({{kMxfp4Static, kFp8StaticTensorSym}}),
        .parallel = no_a2a_no_eplb_no_dp,
        .routing = routings({R::Renormalize, R::RenormalizeNaive}),
        .router_logits = any_router_dtype,
        .summary = "AITER triton MXFP4 W4A8 MoE (gfx950/gfx1250)",
    },
    // Mxfp8TritonExpertsBase underneath: TritonExperts' checks restricted to (MXFP8, MXFP8).
    {
        .name = "AiterMxfp8Experts",
        .device = [](const KernelEnv& e) { return e.device.is_rocm() && e.device.supports_mx(); },
        .no_act_and_mul = true,
        .activation = [](Act a, const KernelEnv&) { return a == Act::SWIGLUOAI_UNINTERLEAVE || apply_moe_activation_supported(a); },
        .quant_scheme = schemes({{kMxfp8Static, kMxfp8Dynamic}}),
        .parallel = any_parallel,
        .batch_invariant = true,
        .lora = true,
        .after = flydsl_mxfp8_checks,
        .summary = "AITER FlyDSL MXFP8 MoE (gfx950, needs flydsl)",
    },
};

}  // namespace

std::span<const ExpertsClass> aiter_experts() { return kAiterExperts; }

}  // namespace moepack::oracle::experts
