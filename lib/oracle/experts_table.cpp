#include "lib/oracle/experts_table.h"

#include <algorithm>
#include <map>

#include "lib/core/error.h"
#include "lib/oracle/experts_rows.h"

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
// The table: every vendor's rows (experts_*.cpp), then the fallback classes composed from them
// ---------------------------------------------------------------------------------------------
namespace {

// FallbackExperts: each static predicate is the AND of both children's; the rest stays at the
// base defaults (experts_rows.h).
ExpertsClass fallback(const experts::FallbackRow& row, const ExpertsClass& primary, const ExpertsClass& secondary) {
  ExpertsClass c;
  c.name = row.name;
  c.format = primary.format;
  c.device = [d1 = primary.device, d2 = secondary.device](const KernelEnv& e) { return d1(e) && d2(e); };
  c.no_act_and_mul = primary.no_act_and_mul && secondary.no_act_and_mul;
  c.activation = [a1 = primary.activation, a2 = secondary.activation](MoEActivation a, const KernelEnv& e) { return a1(a, e) && a2(a, e); };
  c.quant_scheme = [q1 = primary.quant_scheme, q2 = secondary.quant_scheme](const OptKey& w, const OptKey& a, const KernelEnv& e) {
    return q1(w, a, e) && q2(w, a, e);
  };
  c.parallel = [p1 = primary.parallel, p2 = secondary.parallel](const MoeParallelConfig& p) { return p1(p) && p2(p); };
  c.summary = row.summary;
  return c;
}

std::map<std::string, ExpertsClass> build_table() {
  std::map<std::string, ExpertsClass> t;
  for (auto vendor : {experts::flashinfer_experts(), experts::b12x_experts(), experts::cutlass_experts(), experts::deep_gemm_experts(),
                      experts::triton_experts(), experts::triton_kernels_experts(), experts::marlin_experts(), experts::humming_experts(),
                      experts::aiter_experts(), experts::xpu_experts(), experts::cpu_experts(), experts::hpc_experts()})
    for (const ExpertsClass& c : vendor) {
      // The rows are namespace-scope arrays, built during static initialization: reading them
      // from another static initializer could find them still empty.
      if (!c.device) throw_internal("experts table read before its rows were initialized");
      const bool added = t.emplace(c.name, c).second;
      if (!added) throw_internal("experts table lists class '" + c.name + "' twice");
    }
  for (const experts::FallbackRow& f : experts::fallback_experts()) t.emplace(f.name, fallback(f, t.at(f.primary), t.at(f.secondary)));
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
