// The experts capability table: one row per vLLM experts class, with the checks vLLM's
// FusedMoEExperts.is_supported_config runs (vllm/model_executor/layers/fused_moe/modular_kernel.py
// @ e9d1398d9) in the same order, so the first failing check yields the same reason text:
//
//   1 device  2 act-and-mul  3 activation  4 quant scheme (W, A)  5 parallel config
//   6 routing method  7 router-logits dtype  8 hidden-dim shape  9 activation format
//   10 batch invariance (VLLM_BATCH_INVARIANT=1)  11 LoRA
//
// Classes that override is_supported_config in vLLM carry a `before` hook (checks that run
// first and return their own text) and/or an `after` hook (sees the generic result and may
// reject or reword it). The rows live one file per kernel vendor (experts_flashinfer.cpp,
// experts_triton.cpp, ..., built from experts_rows.h); experts_table.cpp gathers them and runs
// the checks. Internal to lib/oracle.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lib/oracle/deployment.h"
#include "lib/oracle/device.h"
#include "lib/oracle/moe_types.h"
#include "lib/oracle/quant_key.h"

namespace moepack::oracle {

// What vLLM's runtime environment answers for availability questions: device plus packages plus
// the environment variables that gate kernels (not the ones that reorder priorities).
struct KernelEnv {
  const Device& device;
  const Packages& packages;
  const EnvVars& env;

  bool has_flashinfer() const { return packages.flashinfer; }
  bool flashinfer_has_situ() const { return packages.flashinfer && packages.flashinfer_situ; }
  bool triton_kernels() const { return packages.triton_kernels; }
  bool has_quark() const { return packages.amd_quark; }
  bool has_humming() const { return packages.humming; }
  // rocm_aiter_ops.is_enabled(): AITER importable on CDNA3+ and VLLM_ROCM_USE_AITER true.
  bool aiter_enabled() const;
  // rocm_aiter_ops.is_fused_moe_enabled(): is_enabled() and VLLM_ROCM_USE_AITER_MOE (default true).
  bool aiter_fused_moe_enabled() const;
  // rocm_aiter_ops.is_rdna_aiter_enabled(): AITER on RDNA4 with VLLM_ROCM_USE_AITER.
  bool aiter_rdna_enabled() const;
  // vllm.utils.deep_gemm.is_deep_gemm_supported(): VLLM_USE_DEEP_GEMM, the package, and
  // SM90 / family(100) / family(120).
  bool deep_gemm_supported() const;
  // ops.cutlass_group_gemm_supported(cap): CUDA 9.0 <= cap < 12.0 (the reference wheel builds
  // the SM90 and SM100 grouped GEMMs with CUDA 13).
  bool cutlass_group_gemm_supported() const;
  // ops.mxfp4_experts_quant_supported(cap): CUDA 10.0 <= cap < 12.0.
  bool mxfp4_experts_quant_supported() const;
  // is_flashinfer_mxint4_moe_available(): VLLM_USE_FLASHINFER_MOE_INT4=1, FlashInfer, family(100).
  bool flashinfer_mxint4_available() const;
  bool batch_invariant() const { return env.int_flag("VLLM_BATCH_INVARIANT", false); }
  // get_humming_moe_gemm_type(): "indexed" unless VLLM_HUMMING_MOE_GEMM_TYPE picks grouped.
  std::string humming_gemm_type() const;
};

// vLLM's FusedMoEConfig: the layer as every kernel check sees it.
struct MoeConfig {
  int num_experts = 0;  // global
  int experts_per_token = 0;
  int hidden_dim = 0;
  int intermediate_size = 0;                // full, before TP
  int intermediate_size_per_partition = 0;  // unpadded per rank
  int num_local_experts = 0;
  MoEActivation activation = MoEActivation::SILU;
  RoutingMethodType routing = RoutingMethodType::RenormalizeNaive;
  MoeParallelConfig parallel;
  FloatType in_dtype = FloatType::bfloat16;
  FloatType router_logits_dtype = FloatType::bfloat16;
  std::string moe_backend = "auto";
  bool has_bias = false;
  bool lora = false;
  std::optional<double> swiglu_limit, swiglu_alpha, swiglu_beta, situ_beta, situ_linear_beta;

  bool is_act_and_mul() const { return is_gated(activation); }
  ActivationFormat activation_format() const {
    return parallel.use_batched_activation_format() ? ActivationFormat::BatchedExperts : ActivationFormat::Standard;
  }
};

struct CheckResult {
  bool ok = true;
  std::string reason;  // empty when ok
  static CheckResult pass() { return {true, {}}; }
  static CheckResult fail(std::string why) { return {false, std::move(why)}; }
};

struct CheckInput {
  const MoeConfig& moe;
  const OptKey& weight_key;
  const OptKey& activation_key;
  ActivationFormat format;
  const KernelEnv& env;
};

// The checks of one row, as vLLM's static predicates (_supports_current_device, ...).
using DeviceCheck = std::function<bool(const KernelEnv&)>;
using ActivationCheck = std::function<bool(MoEActivation, const KernelEnv&)>;
using QuantSchemeCheck = std::function<bool(const OptKey& weight, const OptKey& activation, const KernelEnv&)>;
using ParallelCheck = std::function<bool(const MoeParallelConfig&)>;
using RoutingCheck = std::function<bool(RoutingMethodType, const OptKey& weight, const OptKey& activation)>;
using RouterLogitsCheck = std::function<bool(FloatType, RoutingMethodType)>;
using ShapeCheck = std::function<bool(int hidden_dim)>;
using BeforeChecks = std::function<std::optional<std::string>(const CheckInput&)>;
using AfterChecks = std::function<CheckResult(CheckResult, const CheckInput&)>;

// One row of the table (experts_*.cpp write them as designated initializers, one file per
// kernel vendor). device, activation, quant_scheme and parallel are always given.
struct ExpertsClass {
  std::string name;  // vLLM class name
  ActivationFormat format = ActivationFormat::Standard;
  bool monolithic = false;
  DeviceCheck device = {};
  bool no_act_and_mul = false;
  ActivationCheck activation = {};
  QuantSchemeCheck quant_scheme = {};
  ParallelCheck parallel = {};
  RoutingCheck routing = {};             // empty: any
  RouterLogitsCheck router_logits = {};  // empty: any
  ShapeCheck shape = {};                 // empty: any
  bool batch_invariant = false;
  bool lora = false;
  // Checks a class runs before the generic ones; a returned string is the full reason.
  BeforeChecks before = {};
  // Sees the generic result and may turn a pass into a rejection or reword a rejection.
  AfterChecks after = {};
  // One line for `moepack targets`.
  std::string summary = {};
};

// Every experts class the families can select, by vLLM class name. Two vLLM classes share the
// name "CPUExpertsInt4" (x86 W4A16 in cpu_moe.py, Arm W4A8 in cpu_int4_moe.py); the second is
// registered as "CPUExpertsInt4[cpu_int4_moe]" and reported under its vLLM name.
const ExpertsClass& experts_class(const std::string& id);
const std::vector<std::string>& experts_class_ids();
// The class name vLLM reports for a table id.
std::string experts_class_display_name(const std::string& id);

// FusedMoEExperts.is_supported_config for one class, with its overrides.
CheckResult is_supported_config(const std::string& id, const CheckInput& in);

}  // namespace moepack::oracle
