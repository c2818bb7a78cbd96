#include "apps/moepack/deployment_flags.h"

#include <algorithm>

#include "lib/core/error.h"
#include "lib/oracle/device.h"

namespace moepack::cli {

void add_deployment_flags(CLI::App& app, DeploymentOptions& o, bool with_tp_rank) {
  app.add_option("--target", o.target,
                 "Target device: sm70 sm75 sm80 sm86 sm89 sm90 sm100 sm103 sm110 sm120 sm121, gfx942 gfx950 gfx1250, "
                 "cpu-amx, cpu-avx512, cpu-arm, xpu, or host; plan also takes a comma list or `all`, convert a comma list (one artifact each)")
      ->required();
  app.add_option("--tp", o.tp, "Tensor-parallel size")->capture_default_str();
  if (with_tp_rank) app.add_option("--tp-rank", o.tp_rank, "Only this tensor-parallel rank (default: all ranks)");
  app.add_option("--dp", o.dp, "Data-parallel size")->capture_default_str();
  app.add_flag("--ep", o.ep, "Enable expert parallelism (--enable-expert-parallel)");
  app.add_flag("--enable-eplb", o.eplb, "Expert-parallel load balancing (vLLM --enable-eplb; needs --ep and TP or DP > 1)");
  app.add_option("--all2all", o.all2all,
                 "All2all backend: allgather_reducescatter, deepep_high_throughput, deepep_low_latency, deepep_v2, nixl_ep, "
                 "flashinfer_nvlink_one_sided, flashinfer_nvlink_two_sided, ...")
      ->capture_default_str();
  app.add_option("--moe-backend", o.moe_backend, "vLLM --moe-backend (auto, triton, marlin, flashinfer_trtllm, ...)")->capture_default_str();
  app.add_option("--activation", o.activation, "vLLM --quantization-config.moe.activation (mxfp8, mxfp4, fp8_per_tensor_static, ...)");
  app.add_flag("--lora", o.lora, "LoRA enabled");
  app.add_option("--quantization", o.quantization, "vLLM --quantization (e.g. moe_wna16 for a GPTQ/AWQ checkpoint)");
  app.add_option("--dtype", o.dtype, "Model dtype: bf16 or fp16")->capture_default_str();
  app.add_option("--env", o.env, "An exported vLLM environment variable, NAME=VALUE (repeatable)");
  app.add_option("--with", o.with_packages, "An optional package present at run time (repeatable)");
  app.add_option("--without", o.without_packages, "An optional package absent at run time (repeatable)");
}

bool names_several_targets(const std::string& target) { return target == "all" || target.find(',') != std::string::npos; }

// --target all: every device this build knows but `host` (this machine, which a fleet table
// should not depend on); else the comma list, in the order given.
std::vector<std::string> target_names(const std::string& target) {
  std::vector<std::string> names;
  if (target == "all") {
    for (const auto& name : oracle::known_target_names())
      if (name != "host") names.push_back(name);
    return names;
  }
  size_t begin = 0;
  while (begin <= target.size()) {
    const size_t end = std::min(target.find(',', begin), target.size());
    const std::string name = target.substr(begin, end - begin);
    if (name.empty()) throw Error(ErrorKind::usage, "--target `" + target + "` has an empty name in its list");
    if (std::find(names.begin(), names.end(), name) != names.end()) throw Error(ErrorKind::usage, "--target names `" + name + "` twice");
    names.push_back(name);
    begin = end + 1;
  }
  return names;
}

oracle::Deployment build_deployment(const DeploymentOptions& o) {
  oracle::Deployment d = oracle::default_deployment(oracle::parse_target(o.target));
  auto usage = [](const std::string& what) { throw Error(ErrorKind::usage, what); };
  if (o.tp < 1) usage("--tp must be at least 1");
  if (o.dp < 1) usage("--dp must be at least 1");
  if (o.tp_rank < -1 || o.tp_rank >= o.tp) usage("--tp-rank must be in 0.." + std::to_string(o.tp - 1));
  d.parallel.tp = o.tp;
  d.parallel.dp = o.dp;
  d.parallel.enable_expert_parallel = o.ep;
  d.parallel.enable_eplb = o.eplb;
  d.parallel.all2all_backend = o.all2all;
  d.moe_backend = oracle::normalize_moe_backend(o.moe_backend);
  if (!o.activation.empty()) {
    if (!oracle::quant_key_by_user_name(o.activation)) {
      std::string known;
      for (const auto& n : oracle::user_quant_key_names()) known += (known.empty() ? "" : ", ") + n;
      usage("unknown --activation '" + o.activation + "'; expected one of: " + known);
    }
    d.moe_activation = o.activation;
  }
  d.lora = o.lora;
  if (!o.quantization.empty()) d.quantization = o.quantization;
  auto dtype = oracle::parse_float_type(o.dtype);
  if (!dtype || *dtype == oracle::FloatType::float32) usage("--dtype must be bf16 or fp16, got '" + o.dtype + "'");
  d.model_dtype = *dtype;
  for (const auto& kv : o.env) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) usage("--env expects NAME=VALUE, got '" + kv + "'");
    d.env.set(kv.substr(0, eq), kv.substr(eq + 1));
  }
  for (const auto& p : o.with_packages) oracle::set_package(d.packages, p, true);
  for (const auto& p : o.without_packages) oracle::set_package(d.packages, p, false);
  return d;
}

}  // namespace moepack::cli
