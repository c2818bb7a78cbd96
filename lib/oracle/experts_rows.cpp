#include "lib/oracle/experts_rows.h"

#include <algorithm>
#include <vector>

namespace moepack::oracle::experts {

bool scheme_in(const OptKey& w, const OptKey& a, std::initializer_list<KeyPair> allowed) {
  for (const auto& p : allowed)
    if (p.first == w && p.second == a) return true;
  return false;
}

bool key_in(const OptKey& w, std::initializer_list<QuantKey> allowed) {
  if (!w) return false;
  return std::find(allowed.begin(), allowed.end(), *w) != allowed.end();
}

QuantSchemeCheck schemes(std::initializer_list<KeyPair> allowed) {
  std::vector<KeyPair> v(allowed);
  return [v](const OptKey& w, const OptKey& a, const KernelEnv&) {
    return std::any_of(v.begin(), v.end(), [&](const KeyPair& p) { return p.first == w && p.second == a; });
  };
}

bool unquantized(const OptKey& w, const OptKey& a, const KernelEnv&) { return !w && !a; }

ActivationCheck acts(std::initializer_list<Act> allowed) {
  std::vector<Act> v(allowed);
  return [v](Act a, const KernelEnv&) { return std::find(v.begin(), v.end(), a) != v.end(); };
}

bool apply_set(Act a, const KernelEnv&) { return apply_moe_activation_supported(a); }
bool gated_apply_set(Act a, const KernelEnv&) { return is_gated(a) && apply_moe_activation_supported(a); }

RoutingCheck routings(std::initializer_list<R> allowed) {
  std::vector<R> v(allowed);
  return [v](R r, const OptKey&, const OptKey&) { return std::find(v.begin(), v.end(), r) != v.end(); };
}

bool any_router_dtype(FloatType, R) { return true; }
bool bf16_or_fp32_router(FloatType t, R) { return t == FloatType::bfloat16 || t == FloatType::float32; }

bool any_parallel(const MoeParallelConfig&) { return true; }
bool no_a2a_no_eplb_no_dp(const MoeParallelConfig& p) { return !p.use_all2all_kernels() && !p.enable_eplb && p.dp_size <= 1; }
bool no_fi_nvlink(const MoeParallelConfig& p) { return !(p.use_fi_nvl_two_sided_kernels() || p.use_fi_nvl_one_sided_kernels()); }
bool ag_rs_or_no_a2a_no_eplb(const MoeParallelConfig& p) { return (!p.use_all2all_kernels() || p.use_ag_rs_all2all_kernels()) && !p.enable_eplb; }
bool single_ep_rank(const MoeParallelConfig& p) { return p.ep_size == 1; }

bool cuda_family(const KernelEnv& e, int family) { return e.device.is_cuda() && e.device.is_device_capability_family(family); }
bool sm100_family_with_flashinfer(const KernelEnv& e) { return cuda_family(e, 100) && e.has_flashinfer(); }
bool cpu_x86_amx(const KernelEnv& e) { return e.device.is_cpu() && e.device.cpu_arch == CpuArch::x86 && e.device.amx_tiles; }
bool cpu_arm(const KernelEnv& e) { return e.device.is_cpu() && e.device.cpu_arch == CpuArch::arm; }
bool cuda_or_rocm_or_xpu(const KernelEnv& e) { return e.device.is_cuda_alike() || e.device.is_xpu(); }

CheckResult triton_expert_count_check(CheckResult base, const CheckInput& in) {
  if (!base.ok || !in.env.device.is_cuda_alike()) return base;
  const int padded = (in.moe.num_experts + 31) / 32 * 32;
  if (padded >= 1024) return CheckResult::fail("kernel's moe_align_block_size requires fewer than 1024 padded experts");
  return base;
}

CheckResult trtllm_expert_count_check(CheckResult base, const CheckInput& in) {
  if (!base.ok || in.moe.num_experts <= 2048) return base;
  return CheckResult::fail("FlashInfer TRTLLM routing supports at most 2048 experts, but got " + std::to_string(in.moe.num_experts));
}

}  // namespace moepack::oracle::experts
