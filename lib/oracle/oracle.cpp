#include "lib/oracle/oracle.h"

#include <algorithm>

#include "lib/core/error.h"
#include "lib/oracle/family.h"
#include "lib/oracle/sizes_layouts.h"

namespace moepack::oracle {

namespace {

// ---- Pre-oracle gates: what vLLM checks about a quantization method before any MoE layer ----

struct MethodRequirements {
  const char* name;
  int min_capability;
  std::vector<const char*> act_dtypes;  // torch names, in vLLM's order
};

// get_min_capability / get_supported_act_dtypes of each QuantizationConfig (the config class a
// method name resolves to in quantization/__init__.py).
const std::vector<MethodRequirements>& method_requirements() {
  static const std::vector<MethodRequirements> rows = {
      {"gpt_oss_mxfp4", 80, {"torch.bfloat16"}},
      {"mxfp4", 80, {"torch.bfloat16"}},
      {"deepseek_v4_fp8", 75, {"torch.bfloat16", "torch.float16"}},
      {"fp8", 75, {"torch.bfloat16", "torch.float16"}},
      {"modelopt", 80, {"torch.bfloat16", "torch.float16"}},
      {"modelopt_fp4", 75, {"torch.bfloat16", "torch.float16", "torch.float8_e4m3fn"}},
      {"modelopt_mxfp8", 80, {"torch.bfloat16"}},
      {"mxfp8", 80, {"torch.bfloat16"}},
      {"quark", 70, {"torch.float16", "torch.bfloat16"}},
      {"compressed-tensors", 70, {"torch.float32", "torch.float16", "torch.bfloat16"}},
      {"auto_gptq", 60, {"torch.float16", "torch.bfloat16"}},
      {"gptq", 60, {"torch.float16", "torch.bfloat16"}},
      {"gptq_marlin", 60, {"torch.float16", "torch.bfloat16"}},
      {"auto_awq", 75, {"torch.float16", "torch.bfloat16"}},
      {"awq", 75, {"torch.float16", "torch.bfloat16"}},
      {"awq_marlin", 75, {"torch.float16", "torch.bfloat16"}},
      {"moe_wna16", 70, {"torch.bfloat16", "torch.float16"}},
      {"inc", 60, {"torch.float16", "torch.bfloat16"}},
      {"experts_int8", 80, {"torch.bfloat16", "torch.float16"}},
      {"online", 75, {"torch.bfloat16", "torch.float16"}},  // OnlineQuantizationConfig
  };
  return rows;
}

// Platforms with a restricted method list (platform.supported_quantization); CUDA and CPU accept all.
const std::vector<std::string>& rocm_methods() {
  static const std::vector<std::string> v = {
      "awq", "auto_awq", "awq_marlin", "gptq", "auto_gptq", "fp8", "deepseek_v4_fp8", "compressed-tensors", "fbgemm_fp8", "inc",
      "quark", "mxfp4", "mxfp8", "torchao", "modelopt", "modelopt_fp4", "modelopt_mxfp8", "modelopt_mixed", "fp8_per_tensor",
      "fp8_per_block", "fp8_per_channel", "online", "gpt_oss_mxfp4"};
  return v;
}
const std::vector<std::string>& xpu_methods() {
  static const std::vector<std::string> v = {"awq",  "gptq",   "auto_awq", "auto_gptq", "inc", "fp8", "deepseek_v4_fp8", "mxfp4",
                                             "mxfp8", "fp8_per_tensor", "fp8_per_block", "online", "gpt_oss_mxfp4", "modelopt",
                                             "compressed-tensors"};
  return v;
}

bool contains(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

std::string torch_dtype_list(const std::vector<const char*>& dtypes) {
  std::string s = "[";
  for (size_t i = 0; i < dtypes.size(); ++i) s += (i ? ", " : "") + std::string(dtypes[i]);
  return s + "]";
}

// The checkpoint's method after `--quantization`: vLLM accepts the method itself, the
// aliases that resolve to the same config, and moe_wna16 for compatible GPTQ/AWQ checkpoints;
// anything else is a mismatch.
// `--quantization NAME` on a checkpoint without a quantization_config quantizes the 16-bit
// experts while loading (config/quantization.py _ONLINE_SHORTHANDS -> OnlineQuantizationConfig;
// plain `fp8` -> Fp8Config, not serialized -> Fp8PerTensorOnlineMoEMethod). Each name gives the
// MoE method and the keys that method passes to its selector.
struct OnlineMethod {
  const char* name;
  Family family;
  const char* quant_method;  // the QuantizationConfig get_name()
  const char* method_class;
  const char* weight_key;
  const char* activation_key;
  bool allows_vllm_cutlass = false;  // the method passes allow_vllm_cutlass=True (per-channel scales)
};
const std::vector<OnlineMethod>& online_methods() {
  static const std::vector<OnlineMethod> rows = {
      {"fp8", Family::fp8, "fp8", "Fp8PerTensorOnlineMoEMethod", "kFp8StaticTensorSym", "kFp8DynamicTensorSym"},
      {"fp8_per_tensor", Family::fp8, "online", "Fp8PerTensorOnlineMoEMethod", "kFp8StaticTensorSym", "kFp8DynamicTensorSym"},
      {"fp8_per_block", Family::fp8, "online", "Fp8PerBlockOnlineMoEMethod", "kFp8Static128BlockSym", "kFp8Dynamic128Sym"},
      {"fp8_per_channel", Family::fp8, "online", "Fp8PtpcOnlineMoEMethod", "kFp8StaticChannelSym", "kFp8DynamicTokenSym", true},
      {"mxfp8", Family::mxfp8, "online", "Mxfp8OnlineMoEMethod", "kMxfp8Static", "kMxfp8Dynamic"},
      {"mxfp4", Family::mxfp4, "online", "Mxfp4OnlineMoEMethod", "kMxfp4Static", "kMxfp4Dynamic"},
      {"int8_per_channel_weight_only", Family::int8, "online", "Int8OnlineMoEMethod", "kInt8StaticChannelSym", "kInt8DynamicTokenSym"},
      {"nvfp4_per_token", Family::nvfp4, "online", "Nvfp4OnlineMoEMethod", "kNvfp4Static", "kNvfp4Dynamic"},
      // ExpertsInt8Config has no config file to find, so vLLM builds its default: online int8.
      {"experts_int8", Family::int8, "experts_int8", "Int8OnlineMoEMethod", "kInt8StaticChannelSym", "kInt8DynamicTokenSym"},
  };
  return rows;
}

// QUANTIZATION_METHODS at the reference (quantization/__init__.py), in order.
const std::vector<std::string>& quantization_method_names() {
  static const std::vector<std::string> v = {
      "awq", "auto_awq", "fp8", "fbgemm_fp8", "fp_quant", "modelopt", "modelopt_fp4", "modelopt_mxfp8", "modelopt_mixed", "auto_gptq",
      "gptq", "gptq_marlin", "awq_marlin", "humming", "compressed-tensors", "experts_int8", "quark", "moe_wna16", "torchao", "inc",
      "mxfp4", "gpt_oss_mxfp4", "deepseek_v4_fp8", "online", "fp8_per_tensor", "fp8_per_block", "fp8_per_channel",
      "int8_per_channel_weight_only", "nvfp4_per_token", "mxfp8"};
  return v;
}

MoeLayerQuery apply_quantization_override(const MoeLayerQuery& query, const Deployment& dep) {
  MoeLayerQuery q = query;
  if (!dep.quantization || *dep.quantization == q.quant_method) return q;
  const std::string& user = *dep.quantization;
  if (q.quant_method.empty() && q.family == Family::unquantized) {
    for (const OnlineMethod& m : online_methods()) {
      if (user != m.name) continue;
      q.family = m.family;
      q.quant_method = m.quant_method;
      q.method_class = m.method_class;
      q.weight_key = m.weight_key;
      q.activation_key = m.activation_key;
      q.weight_key_value.reset();
      q.online_name = user;
      if (m.allows_vllm_cutlass) q.allow_vllm_cutlass = true;
      return q;
    }
    // No quantization_config to check against: vLLM validates the name, then looks for the
    // method's own config file (ModelConfig._verify_quantization, weight_utils.get_quant_config).
    if (!contains(quantization_method_names(), user))
      throw OracleRaise("ValueError", "Unknown quantization method: " + user + ". Must be one of " + py_list(quantization_method_names()) + ".");
    throw OracleRaise("ValueError", "Cannot find the config file for " + user);
  }
  auto same_config = [](const std::string& a, const std::string& b) {
    static const std::vector<std::vector<std::string>> groups = {
        {"gptq", "auto_gptq", "gptq_marlin"}, {"awq", "auto_awq", "awq_marlin"}, {"mxfp4", "gpt_oss_mxfp4"}};
    for (const auto& g : groups)
      if (contains(g, a) && contains(g, b)) return true;
    return false;
  };
  if (user == "moe_wna16" && q.family == Family::wna16) {
    const bool gptq = q.quant_method == "gptq" || q.quant_method == "auto_gptq" || q.quant_method == "gptq_marlin";
    const bool awq = q.quant_method == "awq" || q.quant_method == "auto_awq" || q.quant_method == "awq_marlin";
    const auto cap = dep.device.capability();
    const int cap_int = cap ? cap->to_int() : -1;
    const bool compatible = (gptq && !q.desc_act && (q.weight_bits == 4 || q.weight_bits == 8)) || (awq && q.weight_bits == 4 && cap_int >= 75);
    if (compatible) {
      q.quant_method = "moe_wna16";
      q.linear_quant_method = gptq ? "gptq" : "awq";
      q.method_class = "MoeWNA16Method";
      q.weight_key.clear();
      q.weight_key_value.reset();
      q.may_have_zp.reset();
      q.may_have_bias.reset();
      q.allow_tile_padding.reset();
      return q;
    }
  }
  if (same_config(user, q.quant_method)) return q;
  throw OracleRaise("ValueError", "Quantization method specified in the model config (" + q.quant_method +
                                      ") does not match the quantization method specified in the `quantization` argument (" + user + ").");
}

void check_method_gates(const MoeLayerQuery& q, const Deployment& dep) {
  if (q.quant_method.empty()) return;
  const Device& d = dep.device;
  // Online quantization is checked under the name the user gave, against OnlineQuantizationConfig
  // (or Fp8Config for plain `fp8`).
  const std::string& name = q.online_name.empty() ? q.quant_method : q.online_name;
  if ((d.is_rocm() && !contains(rocm_methods(), name)) || (d.is_xpu() && !contains(xpu_methods(), name)))
    throw OracleRaise("ValueError", name + " quantization is currently not supported in " + d.device_name() + ".");
  for (const auto& m : method_requirements()) {
    if (q.quant_method != m.name) continue;
    if (auto cap = d.capability(); cap && cap->to_int() < m.min_capability)
      throw OracleRaise("ValueError", "The quantization method " + name + " is not supported for the current GPU. Minimum capability: " +
                                          std::to_string(m.min_capability) + ". Current capability: " + std::to_string(cap->to_int()) + ".");
    const std::string dtype = float_type_torch_name(dep.model_dtype);
    const bool dtype_ok = std::any_of(m.act_dtypes.begin(), m.act_dtypes.end(), [&](const char* t) { return dtype == t; });
    if (!dtype_ok)
      throw OracleRaise("ValueError", dtype + " is not supported for quantization method " + name + ". Supported dtypes: " +
                                          torch_dtype_list(m.act_dtypes));
  }
}

// Fills what the layer description may leave implicit: the method class (the oracle resolves it
// from the family and quantization method; a class given by hand is kept), then what the
// family's methods compute for themselves and the keys an online method builds.
MoeLayerQuery normalize(MoeLayerQuery q) {
  const FamilyDescriptor& family = family_descriptor(q.family);
  if (q.method_class.empty()) q.method_class = resolve_method_class(family, q.quant_method, q.model_type);
  if (q.method_class.empty())
    throw OracleRaise("ValueError", "vLLM has no " + family.name + " MoE method for quantization method '" + q.quant_method + "'");
  if (family.complete_query) family.complete_query(q);
  const MethodRow& method = method_row(family, q.method_class);
  if (!method.own_weight_key.empty() && q.weight_key.empty() && q.activation_key.empty()) {
    q.weight_key = method.own_weight_key;
    q.activation_key = method.own_activation_key;
  }
  return q;
}

void validate_query(const MoeLayerQuery& q) {
  auto bad = [](const std::string& what) { throw_bad_input("", "", "MoE layer query: " + what); };
  if (q.hidden_size <= 0) bad("hidden size must be positive");
  if (q.moe_intermediate_size <= 0) bad("moe intermediate size must be positive");
  if (q.num_experts <= 0) bad("number of experts must be positive");
  if (q.top_k <= 0 || q.top_k > q.num_experts) bad("top-k must be in 1..num_experts");
  if (!parse_activation(q.activation)) bad("unknown activation '" + q.activation + "'");
  if (!q.weight_key.empty() && !quant_key_by_name(q.weight_key)) bad("unknown weight key '" + q.weight_key + "'");
  if (!q.activation_key.empty() && !quant_key_by_name(q.activation_key)) bad("unknown activation key '" + q.activation_key + "'");
}

// The keys a family reports when it refuses (what the layer asked for).
std::optional<std::string> requested_key_name(const std::string& name, const std::optional<QuantKey>& value) {
  if (value) return quant_key_display(value);
  if (name.empty()) return std::nullopt;
  return name;
}

}  // namespace

std::string family_name(Family f) { return family_descriptor(f).name; }

std::optional<Family> parse_family(const std::string& name) {
  for (const FamilyDescriptor* d : family_descriptors())
    if (name == d->name) return d->family;
  return std::nullopt;
}

std::optional<Family> family_from_keys(const std::string& w, const std::string& a) {
  auto starts = [&w](const char* prefix) { return w.rfind(prefix, 0) == 0; };
  if (w.empty()) return Family::unquantized;
  if (starts("kMxfp4") || starts("kMxfp6")) return Family::mxfp4;
  if (starts("kNvfp4")) return Family::nvfp4;
  if (starts("kMxfp8")) return Family::mxfp8;
  if (starts("kFp8")) return Family::fp8;
  if (starts("kInt4W4A8")) return Family::w4a8_int8;
  // Integer weights: the activation key separates W8A8 and the FP8-activation W4A8 method from
  // the weight-only (WNA16) ones, which may also carry an unnamed QuantKey(...).
  if (starts("kInt8Static") && a.rfind("kInt8Dynamic", 0) == 0) return Family::int8;
  if (starts("kInt4") && a.rfind("kFp8Dynamic", 0) == 0) return Family::w4a8;
  if (starts("kInt") || starts("kUint") || starts("QuantKey(")) return Family::wna16;
  return std::nullopt;
}



std::string oracle_reference() { return "vllm e9d1398d9 (2026-08-22)"; }

namespace {

// ---- The steps of decide(), in vLLM's order ----

// What the Decision says before anything is selected (and keeps when vLLM refuses): the layer,
// its per-rank sizes and the keys it asked for.
Decision start_decision(const MoeLayerQuery& q, const MoeParallelConfig& parallel) {
  Decision d;
  d.prefix = q.prefix;
  d.family = q.family;
  d.quant_method = q.quant_method;
  d.num_experts = q.num_experts;
  d.weight_key = requested_key_name(q.weight_key, q.weight_key_value);
  d.activation_key = requested_key_name(q.activation_key, std::nullopt);
  d.tp_size = parallel.tp_size;
  d.ep_size = parallel.ep_size;
  d.num_local_experts = q.num_experts / std::max(1, parallel.ep_size);
  d.hidden_size = q.hidden_size;
  d.intermediate_size = q.moe_intermediate_size / std::max(1, parallel.tp_size);
  return d;
}

// Engine-argument validation comes first: an unknown --moe-backend, EPLB without what it needs
// (ParallelConfig, config/parallel.py) or an unknown --quantization-config activation never
// reaches a model.
void check_engine_arguments(const Deployment& dep) {
  if (!contains(moe_backend_literals(), dep.moe_backend)) {
    std::string allowed;
    const auto& lits = moe_backend_literals();
    for (size_t i = 0; i < lits.size(); ++i) allowed += (i == 0 ? "" : (i + 1 == lits.size() ? " or " : ", ")) + ("'" + lits[i] + "'");
    throw OracleRaise("ValueError", "1 validation error for KernelConfig\nmoe_backend\n  Input should be " + allowed +
                                        " [type=literal_error, input_value='" + dep.moe_backend + "', input_type=str]");
  }
  if (dep.parallel.enable_eplb) {
    if (!dep.device.is_cuda_alike())
      throw OracleRaise("ValueError", "Expert parallelism load balancing is only supported on CUDA devices or ROCm devices now.");
    if (!dep.parallel.enable_expert_parallel) throw OracleRaise("ValueError", "enable_expert_parallel must be True to use EPLB.");
    if (dep.parallel.tp * dep.parallel.dp <= 1)
      throw OracleRaise("ValueError", "EPLB requires tensor, prefill-context, or data parallelism, but got TP=" + std::to_string(dep.parallel.tp) +
                                          ", PCP=1, DP=" + std::to_string(dep.parallel.dp) + ".");
  }
  if (dep.moe_activation && !quant_key_by_user_name(*dep.moe_activation))
    throw OracleRaise("ValueError", "unknown quantization name '" + *dep.moe_activation + "'; expected one of " + py_list(user_quant_key_names()));
}

// The MoE method the layer gets: --quantization applied, the method's gates passed, its class
// resolved and completed, and the config's switch to another method on this deployment taken.
MoeLayerQuery resolve_method(const MoeLayerQuery& raw_query, const Deployment& dep, std::vector<std::string>& notes) {
  MoeLayerQuery q = apply_quantization_override(raw_query, dep);
  check_method_gates(q, dep);
  q = normalize(q);
  for (const MethodSwitch& sw : family_descriptor(q.family).method_switches) {
    if (!sw.applies(q, dep)) continue;
    notes.push_back(sw.note);
    q.family = sw.family;
    q.method_class = sw.method_class;
    if (sw.clears_weight_key) {
      q.weight_key.clear();
      q.weight_key_value.reset();
    }
    break;
  }
  return q;
}

// What FusedMoE checks about the layer itself before building its config.
void check_layer(const MoeLayerQuery& q, const Deployment& dep, const MoeParallelConfig& parallel, MoEActivation activation) {
  if (parallel.tp_size > 0 && q.moe_intermediate_size % parallel.tp_size != 0)
    throw OracleRaise("AssertionError", "intermediate_size (" + std::to_string(q.moe_intermediate_size) +
                                            ") must be divisible by the MoE tensor-parallel size (" + std::to_string(parallel.tp_size) + ")");
  if (!is_gated(activation) && !(dep.device.is_cuda_alike() || dep.device.is_xpu()))
    throw OracleRaise("NotImplementedError", "is_act_and_mul=False is supported only for CUDA, XPU and ROCm for now");
}

// vLLM's FusedMoEConfig for the layer on this deployment.
MoeConfig make_moe_config(const MoeLayerQuery& q, const Deployment& dep, const MoeParallelConfig& parallel, MoEActivation activation,
                          int num_local_experts) {
  MoeConfig moe;
  moe.num_experts = q.num_experts;
  moe.experts_per_token = q.top_k;
  moe.hidden_dim = q.hidden_size;
  moe.intermediate_size = q.moe_intermediate_size;
  moe.intermediate_size_per_partition = q.moe_intermediate_size / parallel.tp_size;
  moe.num_local_experts = num_local_experts;
  moe.activation = activation;
  moe.routing = q.routing;
  moe.parallel = parallel;
  moe.in_dtype = dep.model_dtype;
  moe.router_logits_dtype = q.router_logits_dtype.value_or(dep.model_dtype);
  moe.moe_backend = dep.moe_backend;
  moe.has_bias = q.has_bias;
  moe.lora = dep.lora;
  moe.swiglu_limit = q.swiglu_limit;
  moe.swiglu_alpha = q.swiglu_alpha;
  moe.swiglu_beta = q.swiglu_beta;
  moe.situ_beta = q.situ_beta;
  moe.situ_linear_beta = q.situ_linear_beta;
  return moe;
}

void record_selection(Decision& d, const Selection& s) {
  d.backend = s.backend;
  if (!s.experts_class.empty()) d.experts_class = experts_class_display_name(s.experts_class);
  d.weight_key = s.weight_key ? std::optional<std::string>(quant_key_display(s.weight_key)) : std::nullopt;
  d.activation_key = s.activation_key ? std::optional<std::string>(quant_key_display(s.activation_key)) : std::nullopt;
}

// Everything after the method settles: its own refusals, the backend, the padded sizes and
// the tensor layouts.
void decide_method(Decision& d, const MoeLayerQuery& q, const Deployment& dep, const MoeParallelConfig& parallel,
                   std::vector<Candidate>& candidates, std::vector<std::string>& notes) {
  const FamilyDescriptor& family = family_descriptor(q.family);
  const MethodRow& method = method_row(family, q.method_class);
  if (method.check_deployment) method.check_deployment(q, dep);
  if (!q.online_name.empty())
    notes.push_back("online quantization (--quantization " + q.online_name + "): vLLM quantizes the 16-bit experts while loading, with " +
                    q.method_class);
  const MoEActivation activation = *parse_activation(q.activation);
  check_layer(q, dep, parallel, activation);

  SelectionContext ctx{q, dep, make_moe_config(q, dep, parallel, activation, d.num_local_experts),
                       KernelEnv{dep.device, dep.packages, dep.env}, candidates, notes};
  const Selection s = method.select(ctx);
  record_selection(d, s);
  if (method.check_selection) method.check_selection(s);
  if (method.check_weights) method.check_weights(ctx, s);

  // Allocation round-up, then the padding the weight conversion adds (sizes_layouts.h).
  std::tie(d.padded_hidden_size, d.padded_intermediate_size) = padded_sizes(family, method, s, ctx);
  if (method.check_sizes) method.check_sizes(d.hidden_size, d.intermediate_size, d.padded_hidden_size, d.padded_intermediate_size);
  d.tensor_layouts = tensor_layouts(family, s, ctx);
}

}  // namespace

Decision decide(const MoeLayerQuery& raw_query, const Deployment& dep) {
  validate_query(raw_query);
  const MoeParallelConfig parallel = make_moe_parallel_config(dep.parallel);
  Decision d = start_decision(raw_query, parallel);
  std::vector<Candidate> candidates;
  std::vector<std::string> notes;
  try {
    check_engine_arguments(dep);
    const MoeLayerQuery q = resolve_method(raw_query, dep, notes);
    d.family = q.family;
    d.quant_method = q.quant_method;
    d.method_class = q.method_class;
    decide_method(d, q, dep, parallel, candidates, notes);
  } catch (const OracleRaise& e) {
    d.error = DecisionError{e.type(), e.message()};
    d.backend.reset();
    d.experts_class.reset();
    d.padded_hidden_size = d.hidden_size;
    d.padded_intermediate_size = d.intermediate_size;
  }
  d.candidates = std::move(candidates);
  d.notes = std::move(notes);
  return d;
}

std::vector<BackendListing> backend_catalog() {
  std::vector<BackendListing> out;
  for (const FamilyDescriptor* family : family_descriptors()) {
    std::vector<BackendListing> part = backend_listing(*family);
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

std::vector<ExpertsClassListing> experts_class_catalog() {
  std::vector<ExpertsClassListing> out;
  for (const auto& id : experts_class_ids()) {
    const ExpertsClass& c = experts_class(id);
    out.push_back({experts_class_display_name(id), c.summary, c.monolithic, c.format == ActivationFormat::BatchedExperts});
  }
  return out;
}

}  // namespace moepack::oracle
