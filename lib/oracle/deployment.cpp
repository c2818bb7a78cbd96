#include "lib/oracle/deployment.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "lib/core/error.h"

namespace moepack::oracle {

Packages default_packages(const Device& device) {
  Packages p;
  if (device.is_cuda()) {
    // requirements/cuda.txt pins flashinfer-python and humming-kernels; triton_kernels and
    // DeepGEMM ship vendored inside the CUDA wheel.
    p.flashinfer = true;
    p.triton_kernels = true;
    p.deep_gemm = true;
    p.humming = true;
  } else if (device.is_rocm()) {
    // requirements/rocm.txt pins amd-quark; docker/Dockerfile.rocm builds AITER and the ROCm
    // triton_kernels. FlyDSL is not part of the image.
    p.amd_quark = true;
    p.aiter = true;
    p.triton_kernels = true;
  }
  return p;
}

namespace {
struct PackageField {
  const char* name;
  bool Packages::*field;
};
const PackageField kPackageFields[] = {
    {"amd-quark", &Packages::amd_quark},       {"flashinfer", &Packages::flashinfer},
    {"triton_kernels", &Packages::triton_kernels}, {"deep_gemm", &Packages::deep_gemm},
    {"humming", &Packages::humming},           {"aiter", &Packages::aiter},
    {"flydsl", &Packages::flydsl},             {"b12x", &Packages::b12x},
    {"hpc", &Packages::hpc},                   {"flashinfer-situ", &Packages::flashinfer_situ},
};

std::string canonical_package_name(std::string name) {
  // Accept the spellings people type for the same package (amd_quark, triton-kernels, deep-gemm).
  std::replace(name.begin(), name.end(), '_', '-');
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return name;
}
}  // namespace

const std::vector<std::string>& package_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& f : kPackageFields) v.emplace_back(f.name);
    return v;
  }();
  return names;
}

void set_package(Packages& packages, const std::string& name, bool present) {
  for (const auto& f : kPackageFields) {
    if (canonical_package_name(f.name) == canonical_package_name(name)) {
      packages.*(f.field) = present;
      return;
    }
  }
  std::string known;
  for (const auto& n : package_names()) known += (known.empty() ? "" : ", ") + n;
  throw Error(ErrorKind::usage, "unknown package '" + name + "' for --with/--without; expected one of: " + known);
}

bool package_present(const Packages& packages, const std::string& name) {
  for (const auto& f : kPackageFields)
    if (canonical_package_name(f.name) == canonical_package_name(name)) return packages.*(f.field);
  return false;
}

std::optional<std::string> EnvVars::get(const std::string& name) const {
  auto it = vars_.find(name);
  if (it == vars_.end()) return std::nullopt;
  return it->second;
}

bool EnvVars::int_flag(const std::string& name, bool default_value) const {
  auto v = get(name);
  if (!v) return default_value;
  // Python's int() accepts surrounding whitespace and a sign, nothing else.
  std::string s = *v;
  s.erase(0, s.find_first_not_of(" \t\n"));
  s.erase(s.find_last_not_of(" \t\n") + 1);
  size_t pos = 0;
  long long value = 0;
  try {
    value = std::stoll(s, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (s.empty() || pos != s.size())
    throw Error(ErrorKind::usage, "--env " + name + "=" + *v + ": vLLM reads this variable with int(), which rejects '" + *v + "'");
  return value != 0;
}

bool EnvVars::true_flag(const std::string& name, bool default_value) const {
  auto v = get(name);
  if (!v) return default_value;
  std::string s = *v;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s == "true" || s == "1";
}

std::string MoeParallelConfig::repr() const {
  auto b = [](bool v) { return v ? "True" : "False"; };
  return "FusedMoEParallelConfig(tp_size=" + std::to_string(tp_size) + ", pcp_size=" + std::to_string(pcp_size) +
         ", dp_size=" + std::to_string(dp_size) + ", ep_size=" + std::to_string(ep_size) +
         ", tp_rank=0, pcp_rank=0, dp_rank=0, ep_rank=0, sp_size=" + std::to_string(sp_size) + ", use_ep=" + b(use_ep) +
         ", all2all_backend='" + all2all_backend + "', enable_eplb=" + b(enable_eplb) + ")";
}

MoeParallelConfig make_moe_parallel_config(const ParallelInput& in) {
  MoeParallelConfig c;
  const int world = in.dp * in.pcp * in.tp;
  c.use_ep = world > 1 && in.enable_expert_parallel;
  c.dp_size = in.dp;
  c.pcp_size = in.pcp;
  c.sp_size = in.sequence_parallel_moe ? in.tp : 1;
  c.all2all_backend = in.all2all_backend;
  c.enable_eplb = in.enable_eplb;
  if (c.use_ep) {
    c.tp_size = 1;
    c.ep_size = world;
  } else {
    c.tp_size = world;
    c.ep_size = 1;
  }
  return c;
}

const std::vector<std::string>& moe_backend_literals() {
  static const std::vector<std::string> names = {
      "auto",   "triton", "batched_triton", "deep_gemm", "deep_gemm_mega_moe", "cutlass", "flashinfer_trtllm",
      "flashinfer_cutlass", "flashinfer_cutedsl", "flashinfer_b12x", "b12x", "marlin", "humming",
      "triton_unfused", "aiter", "flydsl", "hpc", "emulation"};
  return names;
}

std::string normalize_moe_backend(const std::string& name) {
  std::string s = name;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

Deployment default_deployment(const Device& device) {
  Deployment d;
  d.device = device;
  d.packages = default_packages(device);
  return d;
}

bool compilation_mode_none(const Deployment& deployment, const std::string& architecture) {
  if (deployment.env.get("TORCH_COMPILE_DISABLE") == "1") return true;
  if (auto breakable = deployment.env.get("VLLM_USE_BREAKABLE_CUDAGRAPH")) return *breakable == "1";
  // DEFAULT_BREAKABLE_CUDAGRAPH_ARCHITECTURES (vllm/config/vllm.py @ e9d1398d9): vLLM exports
  // VLLM_USE_BREAKABLE_CUDAGRAPH=1 for these when the variable is unset.
  static const char* const kBreakableByDefault[] = {
      "DeepseekV32MTPModel",           "DeepseekV32ForCausalLM",         "DeepseekV4ForCausalLM",
      "DeepSeekV4MTPModel",            "GlmMoeDsaForCausalLM",           "InklingForCausalLM",
      "InklingForConditionalGeneration", "KimiK3ForConditionalGeneration", "KimiK3MTPModel",
      "KimiLinearForCausalLM",         "MiniMaxM3SparseForCausalLM",     "MiniMaxM3SparseForConditionalGeneration",
  };
  const bool rocm = deployment.device.is_rocm();
  for (const char* a : kBreakableByDefault)
    if (architecture == a) return !(rocm && (architecture == "DeepseekV32ForCausalLM" || architecture == "DeepseekV32MTPModel"));
  return false;
}

}  // namespace moepack::oracle
