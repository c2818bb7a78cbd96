// What an engine's loader needs beyond the packed bytes, as vLLM e9d1398d9 holds a MoE layer
// after process_weights_after_loading (docs/ARTIFACT.md, "Loading into vLLM: where each tensor
// lives"):
//
//   1. where each packed tensor lives in vLLM's module tree (vllm_param_path / vllm_param_place);
//   2. the tensors a backend makes at load time that are not loaded from the checkpoint, and
//      that a runner needs (load_time_tensors);
//   3. the flags vLLM sets on parameters to select a kernel path (param_flags).
//
// Everything here is a fact read from the upstream sources named beside each rule; the unit
// tests (tests/convert/loader_facts_test.cpp) pin every one. Nothing reads tensor data.
//
// The module tree at the reference. The model class names its MoE block's experts module (for
// example `self.experts = FusedMoEFactory(..., prefix=f"{prefix}.experts")`); FusedMoEFactory
// (fused_moe/layer.py) returns a MoERunner, which keeps the RoutedExperts module as its
// attribute `routed_experts` (fused_moe/runner/moe_runner.py, MoERunner.__init__). The quant
// method's create_weights registers every expert parameter on that RoutedExperts
// (fused_moe/routed_experts.py, RoutedExperts.__init__: `quant_method.create_weights(layer=self)`).
// So named_parameters() shows `model.layers.7.mlp.experts.routed_experts.w13_weight`, and
// vLLM's own `maybe_remap_moe_expert_param_name` (model_loader/weight_utils.py) inserts the
// `routed_experts.` that a checkpoint name such as `model.layers.7.mlp.experts.w13_weight`
// lacks. With LoRA the MoERunner is wrapped by FusedMoEWithLoRA (lora/layers/fused_moe.py),
// whose `base_layer` it becomes: `...experts.base_layer.routed_experts.w13_weight`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace moepack::convert {

// How vLLM holds a tensor once the layer is loaded.
enum class Holder {
  parameter,         // an nn.Parameter (named_parameters() and state_dict() list `path`)
  module_attribute,  // a plain attribute of the RoutedExperts module, not a Parameter
  kernel_attribute,  // an attribute of an object under the module: the quant method, its quant
                     // config or the experts kernel (reachable by `path` with getattr)
};
// "parameter", "module_attribute", "kernel_attribute".
std::string holder_name(Holder h);

// Where one tensor lives: `path` is dotted from the model's root (what named_parameters() of the
// whole model prints for a parameter).
struct ParamPlace {
  std::string path;
  Holder holder = Holder::parameter;
  std::string upstream;  // the source the rule was read from (vllm @ e9d1398d9)
};

// The path of the module vLLM builds for the experts under a checkpoint's expert prefix (the
// MoERunner, e.g. "model.layers.7.mlp.experts"), for a model class by its config.json
// `architectures[0]`. nullopt: an architecture this table does not know (the caller omits the
// fact rather than guess).
std::optional<std::string> vllm_moe_module_path(const std::string& architecture, const std::string& checkpoint_expert_prefix);

// Every architecture the table knows, in table order.
std::vector<std::string> known_architectures();

// The facts of one converted layer that decide where its tensors live and what vLLM makes at
// load time. All strings as the manifest and the oracle spell them.
struct LoaderQuery {
  std::string architecture;             // config.json architectures[0]
  std::string checkpoint_expert_prefix;  // the layer's `prefix`
  std::string family;                   // "mxfp4", "nvfp4", "fp8", "mxfp8", "wna16", "int8", "w4a8", "unquantized"
  std::string backend;                  // vLLM backend enum member ("TRITON", "FLASHINFER_TRTLLM", ...)
  std::string experts_class;            // "TrtLlmFp8ExpertsMonolithic", ...
  std::string method_class;             // vLLM MoE method class ("GptOssMxfp4MoEMethod", ...); may be empty
  std::string device;                   // target device ("sm90", "gfx950", "gfx1250", "cpu-amx", ...)
  bool lora = false;                    // LoRA enabled: the runner is FusedMoEWithLoRA.base_layer
  int64_t num_local_experts = 0;        // experts on this rank
  int64_t hidden_size = 0;              // padded, as the kernel sees it
  int64_t intermediate_size = 0;        // padded, per rank
  std::string activation = "silu";      // MoEActivation value
  bool gated = true;                    // w13 holds gate and up
  // The model's SwiGLU clamp, alpha, beta as the manifest records them (null: not set). Only
  // what the model class passes to FusedMoEFactory reaches vLLM's layer: gpt-oss passes none, so
  // its recorded clamp of 7.0 is ignored here (GptOssMxfp4MoEMethod uses its own constants).
  std::optional<double> swiglu_limit;
  std::optional<double> swiglu_alpha;
  std::optional<double> swiglu_beta;
  std::optional<double> situ_beta;        // Kimi SiTU's beta and linear beta
  std::optional<double> situ_linear_beta;
  bool per_tensor = false;  // FP8 with per-tensor weight and static input scales
};

// Where `role` (a packed tensor's role, the vLLM parameter name: "w13_weight", "g1_scale_c",
// "fc2_input_scale", ...) lives for this layer. Most roles are Parameters of the RoutedExperts;
// the exceptions are backend rules (TRITON MXFP4 holds its weights as triton_kernels tensors and
// its scales in the quant method's precision configs; FlashInfer b12x keeps fc2_input_scale on
// the experts kernel). nullopt: the architecture is unknown.
std::optional<ParamPlace> vllm_param_place(const LoaderQuery& q, const std::string& role);

// The common case, as a plain string: the live path of `role` for a layer whose backend keeps
// it as a Parameter (every backend but the exceptions above). "" when the architecture is
// unknown.
std::string vllm_param_path(const std::string& architecture, const std::string& checkpoint_expert_prefix, const std::string& role);

// A tensor vLLM makes while loading the layer that is not read from the checkpoint.
struct RunFact {
  std::string name;            // as vLLM names it (the attribute or parameter name)
  std::string dtype;           // safetensors dtype name ("F32", "I64")
  std::vector<int64_t> shape;  // for this layer; empty with `shape_text` saying why
  std::string shape_text;      // the shape as vLLM writes it ("[num_local_experts]")
  std::string value;           // how its values are made, in vLLM's terms ("ones", "full(7.0)", ...)
  Holder holder = Holder::kernel_attribute;
  std::string path;            // dotted path below the RoutedExperts module ("quant_method.moe_kernel.fused_experts._fc2_input_scale")
  // The packed role moepack writes with the same values ("" when the artifact does not carry
  // it and a runner must make it as `value` says).
  std::string written_as;
  // Set when the tensor is a view of a packed role's storage (no bytes of its own): the role.
  std::string view_of;
  std::string upstream;
};

// The load-time tensors of a layer (family, backend, experts class and model facts of `q`), in a
// fixed order. Empty for backends that make none (Triton, Marlin, DeepGEMM, CPU, XPU, ...).
std::vector<RunFact> load_time_tensors(const LoaderQuery& q);

// A flag vLLM sets on a parameter that selects a kernel path.
struct ParamFlag {
  std::string role;       // the parameter ("w13_weight")
  std::string attribute;  // the Python attribute ("is_shuffled")
  std::string value;      // as Python prints it ("True")
  std::string read_by;    // who reads it
  std::string upstream;
};

// The flags of a layer's parameters, in role order. Empty for backends that set none.
std::vector<ParamFlag> param_flags(const LoaderQuery& q);

// The manifest form of the facts (the keys the docs suggest; the manifest writer places them):
//   per tensor  "vllm_param": {"path": ..., "holder": "parameter"}   (place_json)
//               "flags": {"is_shuffled": true}                         (flags_json; {} when none)
//   per layer   "load_time_tensors": [run_fact_json(...), ...]
nlohmann::ordered_json place_json(const ParamPlace& place);
nlohmann::ordered_json flags_json(const std::vector<ParamFlag>& flags, const std::string& role);
// {"name", "dtype", "shape" (or null), "shape_text", "value", "holder", "path", "written_as" (or
// null), "view_of" (or null), "upstream"}.
nlohmann::ordered_json run_fact_json(const RunFact& fact);

}  // namespace moepack::convert
