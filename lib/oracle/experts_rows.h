// Building blocks of the experts capability rows (internal to the experts table): the checks
// many rows share, and one function per vendor file (experts_<vendor>.cpp) returning its rows.
// experts_table.cpp gathers the vendors' rows into the table; a new experts class is a row in
// its vendor's file.
#pragma once

#include <initializer_list>
#include <span>
#include <utility>

#include "lib/oracle/experts_table.h"

namespace moepack::oracle::experts {

using namespace keys;
using Act = MoEActivation;
using R = RoutingMethodType;
using KeyPair = std::pair<OptKey, OptKey>;

// ---- Quantization schemes ----
bool scheme_in(const OptKey& w, const OptKey& a, std::initializer_list<KeyPair> allowed);
bool key_in(const OptKey& w, std::initializer_list<QuantKey> allowed);
// Exactly these (weight, activation) pairs.
QuantSchemeCheck schemes(std::initializer_list<KeyPair> allowed);
// No quantization at all (16-bit weights and activations).
bool unquantized(const OptKey& w, const OptKey& a, const KernelEnv&);

// ---- Activations and routing ----
ActivationCheck acts(std::initializer_list<Act> allowed);
// The activations apply_moe_activation implements (the base class default).
bool apply_set(Act a, const KernelEnv&);
// Gated activations apply_moe_activation implements (the CUTLASS grouped GEMMs).
bool gated_apply_set(Act a, const KernelEnv&);
RoutingCheck routings(std::initializer_list<R> allowed);
bool any_router_dtype(FloatType, R);
bool bf16_or_fp32_router(FloatType t, R);

// ---- Parallel configurations ----
bool any_parallel(const MoeParallelConfig&);
// Monolithic kernels that route themselves only run without all2all, EPLB and DP.
bool no_a2a_no_eplb_no_dp(const MoeParallelConfig& p);
bool no_fi_nvlink(const MoeParallelConfig& p);
// Without all2all kernels, or with the allgather/reduce-scatter ones, and without EPLB.
bool ag_rs_or_no_a2a_no_eplb(const MoeParallelConfig& p);
bool single_ep_rank(const MoeParallelConfig& p);

// ---- Devices ----
bool cuda_family(const KernelEnv& e, int family);
bool sm100_family_with_flashinfer(const KernelEnv& e);
bool cpu_x86_amx(const KernelEnv& e);
bool cpu_arm(const KernelEnv& e);
bool cuda_or_rocm_or_xpu(const KernelEnv& e);

// ---- Checks after the generic ones ----
// TritonExperts' own is_supported_config: on CUDA/ROCm the moe_align_block_size kernel needs
// fewer than 1024 experts once padded to 32.
CheckResult triton_expert_count_check(CheckResult base, const CheckInput& in);
// The FlashInfer TRT-LLM routing kernels take at most 2048 experts.
CheckResult trtllm_expert_count_check(CheckResult base, const CheckInput& in);

// ---- The vendors' rows ----
// Each vendor file holds its rows as one namespace-scope array of designated initializers.
// They are dynamically initialized (their checks are std::function), so nothing may read the
// table from a static initializer; experts_table.cpp builds it on first use.
std::span<const ExpertsClass> flashinfer_experts();      // experts_flashinfer.cpp
std::span<const ExpertsClass> b12x_experts();            // experts_b12x.cpp
std::span<const ExpertsClass> cutlass_experts();         // experts_cutlass.cpp (vLLM's own CUTLASS kernels)
std::span<const ExpertsClass> deep_gemm_experts();       // experts_deep_gemm.cpp
std::span<const ExpertsClass> triton_experts();          // experts_triton.cpp (vLLM's fused_moe Triton kernels)
std::span<const ExpertsClass> triton_kernels_experts();  // experts_triton_kernels.cpp (OpenAI triton_kernels)
std::span<const ExpertsClass> marlin_experts();          // experts_marlin.cpp
std::span<const ExpertsClass> humming_experts();         // experts_humming.cpp
std::span<const ExpertsClass> aiter_experts();           // experts_aiter.cpp
std::span<const ExpertsClass> xpu_experts();             // experts_xpu.cpp
std::span<const ExpertsClass> cpu_experts();             // experts_cpu.cpp
std::span<const ExpertsClass> hpc_experts();             // experts_hpc.cpp

// FallbackExperts (fallback.py): a class that runs `primary` and falls back to `secondary`.
// Its static predicates are the AND of both children's, so the table composes it from their
// rows once both are in; routing, shape, batch invariance and LoRA stay at the base defaults,
// and neither child's own after-checks run.
struct FallbackRow {
  std::string name;
  std::string primary;
  std::string secondary;
  std::string summary;
};
std::span<const FallbackRow> fallback_experts();  // experts_triton.cpp

}  // namespace moepack::oracle::experts
