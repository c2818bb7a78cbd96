// A deployment: the target device plus everything about the vLLM launch that the oracle reads
// besides the checkpoint — optional packages, exported environment variables, parallelism,
// LoRA, model dtype and the user's backend/activation/quantization overrides.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lib/oracle/device.h"
#include "lib/oracle/moe_types.h"
#include "lib/oracle/quant_key.h"

namespace moepack::oracle {

// Optional packages whose presence decides whether a kernel class can be used. Defaults are
// those of the reference build for the platform (default_packages).
struct Packages {
  bool flashinfer = false;       // flashinfer-python (pinned 0.6.17 in requirements/cuda.txt)
  bool flashinfer_situ = false;  // the installed FlashInfer exposes ActivationType.Situ
  bool triton_kernels = false;   // vendored as vllm.third_party.triton_kernels
  bool deep_gemm = false;        // vendored as vllm.third_party.deep_gemm (CUDA wheel)
  bool humming = false;          // humming-kernels (requirements/cuda.txt)
  bool amd_quark = false;        // amd-quark (requirements/rocm.txt)
  bool aiter = false;            // ROCm AITER (built into the ROCm image)
  bool flydsl = false;           // AITER FlyDSL MXFP8 MoE support (not in the reference images)
  bool b12x = false;             // the b12x library (optional extra `vllm[b12x]`)
  bool hpc = false;              // the hpc package used by HPCExperts (not a requirement)
};

// The reference build's package set for a device's platform.
Packages default_packages(const Device& device);

// Names accepted by --with / --without, in listing order.
const std::vector<std::string>& package_names();
// Sets one package by its --with/--without name; throws moepack::Error(usage) on an unknown name.
void set_package(Packages& packages, const std::string& name, bool present);
bool package_present(const Packages& packages, const std::string& name);

// Exported environment variables. vLLM distinguishes "not exported" from "exported with the
// default value" (envs.is_set), so only variables given with --env exist here.
class EnvVars {
 public:
  void set(const std::string& name, const std::string& value) { vars_[name] = value; }
  bool is_set(const std::string& name) const { return vars_.count(name) != 0; }
  std::optional<std::string> get(const std::string& name) const;
  // `bool(int(os.getenv(name, default)))`: a value that is not an integer is a usage error,
  // as it is a crash in vLLM.
  bool int_flag(const std::string& name, bool default_value) const;
  // `os.getenv(name, default).lower() in ("true", "1")`.
  bool true_flag(const std::string& name, bool default_value) const;
  const std::map<std::string, std::string>& all() const { return vars_; }

 private:
  std::map<std::string, std::string> vars_;
};

// Parallelism as the user launches it (vLLM engine arguments).
struct ParallelInput {
  int tp = 1;   // --tensor-parallel-size
  int dp = 1;   // --data-parallel-size
  int pcp = 1;  // prefill context parallel size
  bool enable_expert_parallel = false;
  bool sequence_parallel_moe = false;  // the model runs its MoE sequence-parallel (sp_size = tp)
  std::string all2all_backend = "allgather_reducescatter";
  bool enable_eplb = false;
};

// vLLM's FusedMoEParallelConfig, derived from ParallelInput the way FusedMoEParallelConfig.make
// does: without EP the MoE weights are tensor-sharded over all dp*pcp*tp ranks; with EP every
// rank owns whole experts (tp_size 1, ep_size dp*pcp*tp).
struct MoeParallelConfig {
  int tp_size = 1;
  int pcp_size = 1;
  int dp_size = 1;
  int ep_size = 1;
  int sp_size = 1;
  bool use_ep = false;
  std::string all2all_backend = "allgather_reducescatter";
  bool enable_eplb = false;

  bool is_sequence_parallel() const { return sp_size > 1; }
  bool use_all2all_kernels() const { return use_ep && (dp_size > 1 || pcp_size > 1 || is_sequence_parallel()); }
  bool uses(const char* backend) const { return use_all2all_kernels() && all2all_backend == backend; }
  bool use_deepep_ht_kernels() const { return uses("deepep_high_throughput"); }
  bool use_deepep_ll_kernels() const { return uses("deepep_low_latency"); }
  bool use_deepep_v2_kernels() const { return uses("deepep_v2"); }
  bool use_nixl_ep_kernels() const { return uses("nixl_ep"); }
  bool use_ag_rs_all2all_kernels() const { return uses("allgather_reducescatter"); }
  bool use_fi_nvl_two_sided_kernels() const { return uses("flashinfer_all2allv") || uses("flashinfer_nvlink_two_sided"); }
  bool use_fi_nvl_one_sided_kernels() const { return uses("flashinfer_nvlink_one_sided"); }
  bool use_batched_activation_format() const { return use_deepep_ll_kernels() || use_nixl_ep_kernels(); }

  // The dataclass repr vLLM prints in "parallel config ..." rejection reasons (ranks are 0:
  // the oracle's answer is the same on every rank).
  std::string repr() const;
};
MoeParallelConfig make_moe_parallel_config(const ParallelInput& in);

// The `MoEBackend` literal of vllm/config/kernel.py: the only --moe-backend strings vLLM accepts.
const std::vector<std::string>& moe_backend_literals();
// vLLM's normalisation: lower-case and '-' -> '_'.
std::string normalize_moe_backend(const std::string& name);

struct Deployment {
  Device device;
  Packages packages;
  EnvVars env;
  ParallelInput parallel;
  std::string moe_backend = "auto";             // normalised --moe-backend
  std::optional<std::string> moe_activation;    // --quantization-config.moe.activation user name
  bool lora = false;
  std::optional<std::string> quantization;      // --quantization
  FloatType model_dtype = FloatType::bfloat16;  // --dtype
};

// A deployment on `device` with the reference defaults (packages of its platform, nothing else).
Deployment default_deployment(const Device& device);

// Whether vLLM runs the model without torch.compile (CompilationConfig.mode NONE), as
// VllmConfig.__post_init__ decides it (vllm/config/vllm.py @ e9d1398d9) from what a deployment
// here can say: TORCH_COMPILE_DISABLE=1, VLLM_USE_BREAKABLE_CUDAGRAPH=1, or that variable unset
// for an architecture in DEFAULT_BREAKABLE_CUDAGRAPH_ARCHITECTURES (`architecture` is
// config.json's architectures[0]; the CUDA list, ROCm drops the DeepSeek-V3.2 entries).
// --enforce-eager and -O0 do the same and are not modelled. With mode NONE the custom ops
// default to "all", so CustomOps such as QuantFP8 run their CUDA kernels (forward_cuda);
// otherwise Inductor compiles their forward_native.
bool compilation_mode_none(const Deployment& deployment, const std::string& architecture);

}  // namespace moepack::oracle
