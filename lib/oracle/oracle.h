// The oracle: which fused-MoE experts kernel vLLM (commit e9d1398d9) gives one MoE layer of a
// quantized checkpoint on a target deployment, and what that choice means for the weights.
//
// Input: a MoeLayerQuery (plain facts about the layer, as a checkpoint reader finds them) and a
// Deployment (device, packages, environment, parallelism, overrides).
// Output: a Decision — the backend enum member and experts class vLLM would pick, the per-rank
// sizes before and after the backend's round-up, every candidate tried in order with the reason
// it was rejected, the error vLLM would raise instead (type and message), and the layout name
// each tensor role will get.
//
// The selection itself is data: lib/oracle/experts_table.h and experts_*.cpp hold one capability
// row per vLLM experts class; each family file (family_*.cpp) is a FamilyDescriptor (family.h) —
// method rows, backend rows, priority lists, filters, padding and layout rows — walked over that
// table by one generic selection (select_backend).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lib/oracle/deployment.h"
#include "lib/oracle/moe_types.h"
#include "lib/oracle/quant_key.h"

namespace moepack::oracle {

// The oracle families (one vLLM oracle module each, plus MXFP8 which shares FP8's backends).
enum class Family { mxfp4, nvfp4, fp8, mxfp8, wna16, int8, w4a8, w4a8_int8, unquantized };
std::string family_name(Family f);  // "mxfp4", ..., "w4a8_int8", "unquantized"
std::optional<Family> parse_family(const std::string& name);
// The family a checkpoint layer belongs to, from the QuantKey constant names its reader reports
// (oracle.md 2.1-2.3), so no family name needs to cross the reader/oracle seam. Empty weight
// key: unquantized. OCP-MX FP6 weights belong to the MXFP4 method (emulation). nullopt: a key
// that names no family.
std::optional<Family> family_from_keys(const std::string& weight_key, const std::string& activation_key);

// Everything the oracle needs to know about one MoE layer. A checkpoint reader fills it; the
// `moepack plan --layer-json/--family ...` options fill it by hand.
struct MoeLayerQuery {
  std::string prefix;  // e.g. "model.layers.0.mlp.experts"; only reported back

  // ---- Quantization ----
  Family family = Family::unquantized;
  // vLLM's quantization method name after its checkpoint overrides are applied:
  // gpt_oss_mxfp4, mxfp4, deepseek_v4_fp8, quark, compressed-tensors, inc, modelopt,
  // modelopt_fp4, modelopt_mxfp8, mxfp8, fp8, auto_gptq, gptq, gptq_marlin, auto_awq, awq,
  // awq_marlin, moe_wna16, experts_int8, online; empty for an unquantized layer.
  std::string quant_method;
  // MoeWNA16Config.linear_quant_method ("gptq" or "awq") when --quantization moe_wna16 took over
  // a GPTQ / AutoAWQ checkpoint: the layout its weight loader converts from. Empty otherwise.
  std::string linear_quant_method;
  // vLLM's MoE method class (GptOssMxfp4MoEMethod, Mxfp4MoEMethod, QuarkOCP_MX_MoEMethod,
  // CompressedTensorsW4A4Mxfp4MoEMethod, ...). Leave it empty, as checkpoint readers do: the
  // oracle resolves the class vLLM uses for (family, quant_method, model_type) from the
  // family's method rows. Set by hand (`plan --method-class`, online methods) it is kept; a
  // class the family does not list gets the family's plain selection (MXFP4 refuses it).
  std::string method_class;
  // The checkpoint's weight and activation QuantKeys, as vLLM constant names ("kMxfp4Static").
  // Empty weight key: the family's usual key. Empty activation key: None (16-bit activations),
  // except for families whose activation key is fixed by vLLM (FP8 block, MXFP8, INT8, W4A8).
  std::string weight_key;
  std::string activation_key;
  // A weight key with no constant name (asymmetric int8, 2/3-bit, W4A8-int8 groups); wins over
  // `weight_key` when set.
  std::optional<QuantKey> weight_key_value;

  // ---- Integer weight-only facts (WNA16, W4A8) ----
  int weight_bits = 4;
  int group_size = -1;         // -1: channel-wise
  bool symmetric = true;
  bool has_zero_points = false;  // AWQ zero_point / GPTQ !sym / MoeWNA16 has_zp
  bool desc_act = false;         // GPTQ act-order
  std::string actorder;          // compressed-tensors actorder: "", "group", "weight", "dynamic"
  // The three flags vLLM's WNA16 callers pass (compressed_tensors_moe_wna16.py, auto_gptq.py,
  // auto_awq.py, moe_wna16.py). Unset: derived from the method and the facts above.
  std::optional<bool> may_have_zp;
  std::optional<bool> may_have_bias;
  std::optional<bool> allow_tile_padding;

  // ---- Quark OCP-MX ----
  std::string quark_ocp_mx_scheme;  // "w_mxfp4", "w_mxfp4_a_fp8", "w_mxfp4_a_mxfp4", "w_mxfp6_e3m2_a_mxfp6_e3m2", ...
  bool static_input_scales = false;

  // ---- FP8 ----
  // Only compressed-tensors W8A8 passes allow_vllm_cutlass=True. Unset: derived from the method.
  std::optional<bool> allow_vllm_cutlass;
  // Set when `--quantization` asked for online quantization of a 16-bit checkpoint: the name given.
  std::string online_name;

  // ---- Model ----
  std::string model_type;         // config.json model_type ("gpt_oss", "deepseek_v4", ...)
  std::string architecture;       // config.json architectures[0] (vLLM defaults some to eager CustomOps)
  int hidden_size = 0;            // model hidden size
  int moe_intermediate_size = 0;  // per-expert intermediate size, full (before tensor parallelism)
  int num_experts = 0;            // global experts (including redundant ones)
  int top_k = 0;
  std::string activation = "silu";  // MoEActivation value string (silu, swigluoai, relu2_no_mul, ...)
  RoutingMethodType routing = RoutingMethodType::RenormalizeNaive;
  std::optional<FloatType> router_logits_dtype;  // unset: the model dtype
  bool has_bias = false;                          // expert biases (gpt-oss)
  std::optional<double> swiglu_limit;             // SwiGLU clamp (gpt-oss 7.0)
  std::optional<double> swiglu_alpha;
  std::optional<double> swiglu_beta;
  std::optional<double> situ_beta;
  std::optional<double> situ_linear_beta;
};

// One candidate the selector tried, in order. `experts_class` is empty when the backend was
// rejected before any class was checked (WNA16 incompatibility, forced-then-failed paths).
struct Candidate {
  std::string backend;
  std::string experts_class;
  bool ok = false;
  std::string reason;  // vLLM's rejection reason ("kernel does not support current device cuda")
};

// The exception vLLM would raise instead of selecting a backend.
struct DecisionError {
  std::string type;  // "ValueError" or "NotImplementedError"
  std::string message;
};

struct Decision {
  std::string prefix;
  Family family = Family::unquantized;
  std::string quant_method;
  std::string method_class;
  // Keys the selected class was checked with (constant names; nullopt = None). On error, the
  // keys the layer requested.
  std::optional<std::string> weight_key;
  std::optional<std::string> activation_key;
  // vLLM backend enum member name (e.g. "FLASHINFER_TRTLLM_MXFP4_BF16"); nullopt when refused.
  std::optional<std::string> backend;
  // vLLM experts class name (e.g. "TrtLlmMxfp4ExpertsMonolithic"); nullopt when refused.
  std::optional<std::string> experts_class;
  // Per rank, before and after the method's maybe_roundup_sizes (backend round-up plus the
  // all2all hidden round-up). Methods without a round-up keep the sizes.
  int hidden_size = 0;
  int intermediate_size = 0;
  int padded_hidden_size = 0;
  int padded_intermediate_size = 0;
  int num_experts = 0;        // global
  int num_local_experts = 0;  // per rank (experts / ep_size)
  int tp_size = 1;            // MoE tensor-parallel size (flattened over dp and pcp)
  int ep_size = 1;
  std::vector<Candidate> candidates;
  std::optional<DecisionError> error;
  // Layout name per tensor role ("w13_weight" -> "marlin.gptq_repack(bits=4)"), empty on error.
  std::vector<std::pair<std::string, std::string>> tensor_layouts;
  // Facts worth telling the user (e.g. "compressed-tensors MXFP4 bypasses the oracle").
  std::vector<std::string> notes;

  bool ok() const { return !error.has_value(); }
};

// The oracle. Never throws for a refusal: refusals are Decision::error. Throws moepack::Error
// (bad_input) only when the query itself is malformed (unknown key name, zero sizes, ...).
Decision decide(const MoeLayerQuery& query, const Deployment& deployment);

// MoeWNA16Method.create_weights (moe_wna16.py @ e9d1398d9) halves the checkpoint's group size until
// it divides both the rank's intermediate size and the hidden size, and its weight loader repeats
// every scale and zero-point group that many times (group_size_div_factor). The factor, or
// nothing where create_weights raises (the group size would fall below 32; a channel-wise
// checkpoint's negative dimension).
std::optional<int> moe_wna16_group_size_div_factor(int hidden, int intermediate_per_partition, int group_size);


// A backend as `moepack targets` lists it: its family, vLLM enum member, experts classes in try
// order, the --moe-backend names that reach it, and whether auto selection can pick it.
struct BackendListing {
  std::string family;
  std::string backend;
  std::vector<std::string> classes;
  std::vector<std::string> moe_backend_names;
  bool auto_selectable = true;
};
std::vector<BackendListing> backend_catalog();

// An experts class as `moepack targets` lists it.
struct ExpertsClassListing {
  std::string name;
  std::string summary;
  bool monolithic = false;
  bool batched_format = false;
};
std::vector<ExpertsClassListing> experts_class_catalog();

// The layout names a backend gives each tensor role, for `moepack targets` (one row per
// family, backend and distinguishing condition such as the device generation).
struct LayoutListing {
  std::string family;
  std::string backend;
  std::string condition;
  std::vector<std::pair<std::string, std::string>> roles;
};
std::vector<LayoutListing> layout_catalog();

// The layouts the catalog lists for `role` of `backend` in `family`, over every condition (the
// rows whose backend pattern matches); empty when no row lists the role. A reader of someone
// else's manifest checks a tensor's layout against them.
std::vector<std::string> listed_layouts(const std::string& family, const std::string& backend, const std::string& role);

// The reference this oracle follows, as reported by `plan --json`.
std::string oracle_reference();

}  // namespace moepack::oracle
