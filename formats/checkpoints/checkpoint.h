// A quantized (or plain) Mixture-of-Experts checkpoint, described the way vLLM e9d1398d9 would
// see it: which quantization method and MoE method each expert layer gets, the QuantKey names the
// fused-MoE oracle is called with, the model facts the oracle needs, and — read lazily, one expert
// at a time — the expert tensors as vLLM's FusedMoE loader holds them before
// `process_weights_after_loading` ("canonical params", docs/ARCHITECTURE.md).
//
// Opening reads headers and JSON only: every header is validated, every expert tensor of every
// MoE layer is checked for presence, dtype and shape against config.json, but no tensor data is
// touched. A real-size checkpoint whose data region is a sparse hole opens in milliseconds.
//
// One file per checkpoint family (gpt_oss.cpp, compressed_tensors.cpp, modelopt.cpp, quark.cpp,
// gptq.cpp, awq.cpp, fp8_block.cpp, deepseek_v4.cpp, unquantized.cpp) turns the family's
// quantization config into per-layer `LayerQuant` + `ExpertRecipe`; detect.cpp picks the family
// and reads the model facts; one file per storage shape (per_expert_storage.cpp,
// gpt_oss_fused_storage.cpp, fused_3d_storage.cpp, picked by the layer's naming in
// expert_storage.h) validates and reads the experts; checkpoint.cpp finds the layers and ties
// the three together.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/safetensors/file.h"
#include "lib/core/tensor.h"

namespace moepack::ckpt {

// Who produced the checkpoint (decides tensor names and config shape).
enum class Family { gpt_oss, compressed_tensors, modelopt, quark, gptq, awq, fp8, deepseek_v4, unquantized };
std::string_view family_name(Family f);  // "gpt-oss", "compressed-tensors", "modelopt", ...

// One vLLM dispatch: quantization method, fused-MoE method class, oracle family and the
// (weight, activation) QuantKey constant names of oracle.md 2.1 ("" = none / unquantized).
struct MethodChoice {
  std::string quant_method;    // QuantizationConfig.get_name(): "gpt_oss_mxfp4", "compressed-tensors", "modelopt_fp4", ...; "" unquantized
  // "GptOssMxfp4MoEMethod", "CompressedTensorsW4A4Nvfp4MoEMethod", "UnquantizedFusedMoEMethod", ...
  // For display only (`inspect`): the oracle resolves the class from quant_method itself, and
  // tests/convert/method_class_seam_test.cpp checks that the two agree on every sample.
  std::string moe_method;
  std::string oracle_family;   // mxfp4 nvfp4 fp8 mxfp8 wna16 int8 w4a8 w4a8_int8 unquantized; "mxfp6" for OCP-MX fp6 weights (emulation only)
  std::string weight_key;      // "kMxfp4Static", ...; "" none
  std::string activation_key;  // "kNvfp4Dynamic", ...; "" = 16-bit activations (or the backend's default where vLLM leaves it open)
};

// How one MoE layer is quantized, with the flags the family selectors take.
struct LayerQuant {
  std::string scheme;  // short human name: "mxfp4", "nvfp4 (W4A4)", "int4 g128 sym", "fp8 block 128x128", "bf16", ...
  MethodChoice method;
  // vLLM picks a different method when the device is exactly SM90 (compressed-tensors W4A8:
  // `_is_fp8_w4a8_sm90` is tested before the int8-activation path).
  std::optional<MethodChoice> on_sm90;
  int weight_bits = 0;         // 4, 8, 16 (unquantized: the float width)
  int64_t group_size = 0;      // elements per scale along K; -1 channel-wise; 0 per-tensor / not grouped
  bool symmetric = true;
  bool act_order = false;      // GPTQ desc_act, compressed-tensors actorder group|dynamic (allow_tile_padding = !act_order)
  std::string actorder;        // compressed-tensors raw value ("group", "weight", "dynamic", "static", "")
  bool may_have_zp = false;
  bool may_have_bias = false;
  bool allow_tile_padding = false;
  std::string checkpoint_format;            // GPTQ "gptq" | "gptq_v2"; AWQ "gemm"; compressed-tensors format; else ""
  std::vector<int64_t> weight_block_size;   // FP8 block [n, k]; empty otherwise
  std::string input_scales;                 // "static", "dynamic" or "" (no activation quantization)
  // NVFP4 global scales: "multiplier" (ModelOpt weight_scale_2/input_scale) or "divisor"
  // (compressed-tensors *_global_scale = 1/multiplier). Values are kept raw either way.
  std::string global_scale_convention;
  // Quark OCP-MX: vLLM's OCP_MX_Scheme value as the config spells it ("w_mxfp4", "w_mxfp4_a_fp8",
  // "w_mxfp4_a_mxfp6_e2m3", "w_mxfp6_e3m2_a_mxfp6_e3m2", ...); empty for other families.
  std::string quark_ocp_mx_scheme;
  // Non-empty when vLLM at the reference commit raises for this layer (the reason, vLLM's words
  // paraphrased), with the Python exception it raises. The layer is still described;
  // plan/convert must refuse it.
  std::string unsupported;
  std::string unsupported_error = "ValueError";
  bool quantized() const { return !method.weight_key.empty(); }
};

// How per-expert tensors are named on disk.
enum class ExpertNaming {
  hf,              // <prefix>.E.{gate_proj,up_proj,down_proj}.<param>  (Qwen/DeepSeek-V3 HF, every quantizer)
  mixtral,         // <prefix>.E.{w1,w3,w2}.<param>  (block_sparse_moe)
  deepseek_native, // <prefix>.E.{w1,w3,w2}.<param>  (ffn.experts, DeepSeek-V4 / V3 inference format)
  hf_no_gate,      // <prefix>.E.{up_proj,down_proj}.<param>  (non-gated experts: Nemotron-H; up plays w1)
  per_expert_gate_up,  // <prefix>.E.{gate_up_proj,down_proj}.<param>  (amd-quark gpt-oss: gate/up fused, interleaved)
  gpt_oss_fused,   // <prefix>.{gate_up_proj,down_proj}_{blocks,scales,bias}, experts stacked in dim 0
  // <prefix>.{gate_up_proj [E, H, 2I], down_proj [E, I, H]} input-major 3-D tensors, with optional
  // `_bias` ([E, 2I], [E, H]) and per-tensor `_weight_scale` / `_input_scale` scalars broadcast to
  // every expert (gpt-oss BF16, Llama-4 BF16 and ModelOpt FP8).
  fused_3d,
};
std::string_view naming_name(ExpertNaming n);

// Order of the 2I rows (or columns, for transposed params) of every w13 parameter.
enum class W13Order { gate_then_up, interleaved };  // interleaved: row 2j = gate j, row 2j+1 = up j (gpt-oss)
std::string_view w13_order_name(W13Order o);

// How gate and up (w1, w3) tensors of one expert become the w13 parameter.
enum class Assemble {
  rows,     // concatenate along dim 0: [gate; up] (1-D tensors too)
  cols,     // concatenate along dim 1 (GPTQ/AWQ "is_transposed" params)
  pair,     // two scalars -> [2] (per-tensor scales vLLM keeps per shard)
  same,     // one value for both: gate and up must be equal (g_idx, weight_shape, CT input scale)
  // One slot for both, written by each projection as vLLM's loader meets it: the value loaded
  // last survives (static FP8 input scales of Quark, ModelOpt FP8, DeepSeek FP8). The loader
  // reads shards in natural-sort order of their file names and each shard's tensors in sorted
  // name order, so that is the tensor that comes later in (file, name) order.
  last_loaded,
};

// One on-disk tensor per projection per expert, and the vLLM parameter it becomes.
using ShapeFn = std::function<std::vector<uint64_t>(uint64_t out, uint64_t in)>;
struct SourceTensorRule {
  SourceTensorRule(std::string suffix_, std::vector<DType> dtypes_, ShapeFn shape_, bool required_ = true)
      : suffix(std::move(suffix_)), dtypes(std::move(dtypes_)), shape(std::move(shape_)), required(required_), param(suffix) {}
  std::string suffix;                // after "<prefix>.<E>.<proj>."
  std::vector<DType> dtypes;         // accepted on disk
  // Expected shape from the projection's logical (out, in) sizes; null = a scalar, [] or [1].
  ShapeFn shape;
  bool required = true;
  std::string param;                 // vLLM name without "w13_"/"w2_" (defaults to the suffix)
  Assemble w13 = Assemble::rows;
  bool transpose = false;            // 2-D transpose before assembly (compressed-tensors WNA16)
  std::optional<DType> canonical_dtype;  // relabel (same bytes): DeepSeek-V4 I8 -> U8, E8M0 -> U8
};

struct ExpertRecipe {
  std::vector<SourceTensorRule> tensors;  // per-expert storage; empty for the fused ones
  W13Order w13_order = W13Order::gate_then_up;
  // gpt-oss' own loaders (gpt_oss.py _load_weights_mxfp4 / _quark / _other @ e9d1398d9) keep
  // w2_bias on tensor-parallel rank 0 only and zero it elsewhere, so the all-reduce adds it once;
  // FusedMoE's generic weight_loader copies it to every rank.
  bool w2_bias_first_rank_only = false;
  // Non-empty when the model's loader cannot read experts stored this way and raises while
  // loading them: the exception and the reason (the reader makes it the layer's `unsupported`).
  std::string loader_error, loader_failure;
};

// The per-expert shape of one canonical param (for display: what one expert weighs).
struct ParamSummary {
  std::string name;  // vLLM param name, "w13_weight"
  DType dtype = DType::U8;
  std::vector<uint64_t> shape;  // one expert, no expert dim
};

struct MoeLayer {
  std::string prefix;           // "model.layers.7.mlp.experts"
  int64_t layer_index = -1;     // the number after "layers." (-1 when the prefix has none)
  ExpertNaming naming = ExpertNaming::hf;
  uint64_t num_experts = 0;
  uint64_t hidden_size = 0;
  uint64_t intermediate_size = 0;
  bool has_bias = false;
  // Gated experts hold gate and up in w13 ([2I, ...]); non-gated ones (Nemotron-H's relu2) only
  // the up projection ([I, ...]), which plays FusedMoE's w1.
  bool gated = true;
  LayerQuant quant;
  ExpertRecipe recipe;
  std::vector<ParamSummary> params;   // canonical params of one expert, in a stable order
  std::vector<std::string> tensors;   // every source tensor of the layer, sorted (the rest is pass-through)
  uint64_t source_bytes = 0;          // payload bytes of those tensors
};

// What the oracle needs from config.json (FusedMoEConfig inputs, oracle.md 1.1 and 2.4).
struct ModelFacts {
  std::string model_type;
  std::string architecture;            // architectures[0]
  std::string dtype;                   // torch_dtype / dtype: "bfloat16", "float16", ...
  uint64_t hidden_size = 0;
  // The experts' input width: `moe_latent_size` when the model routes through a latent
  // projection (Nemotron latent MoE), else hidden_size.
  uint64_t moe_hidden_size = 0;
  uint64_t moe_intermediate_size = 0;  // per expert
  uint64_t num_experts = 0;            // routed experts
  uint64_t num_shared_experts = 0;
  uint64_t top_k = 0;
  uint64_t num_hidden_layers = 0;
  std::string hidden_act;              // as written
  std::string activation;              // vLLM MoEActivation value: "silu", "swigluoai", "gelu_tanh", ...
  std::string scoring_func;            // "softmax", "sigmoid", "sqrtsoftplus"
  bool renormalize = false;
  bool has_e_score_correction_bias = false;
  uint64_t n_group = 0;
  uint64_t topk_group = 0;
  std::optional<double> routed_scaling_factor;
  std::string routing_method;          // RoutingMethodType member: "RenormalizeNaive", "DeepSeekV3", ...
  bool has_bias = false;
  std::optional<double> swiglu_limit;
  // DeepSeek-V4: its first num_hash_layers layers route by token id through `<block>.gate.tid2eid`.
  uint64_t num_hash_layers = 0;
};

class Checkpoint {
 public:
  std::string path;
  std::unique_ptr<st::ShardSet> shards;
  std::string config_path;          // "" when there is no config.json
  nlohmann::json config;            // null when absent
  std::string quant_config_source;  // where the quantization config came from ("config.json", "hf_quant_config.json", ...)
  Family family = Family::unquantized;
  std::string scheme;               // checkpoint-level summary, e.g. "nvfp4-pack-quantized (W4A4)"
  // A stable identifier of the scheme for scripts: "<family>-<scheme>", e.g. "gpt-oss-mxfp4",
  // "compressed-tensors-nvfp4", "quark-w_mxfp4_a_fp8", "modelopt-fp8-tensor", "unquantized-bf16".
  std::string scheme_id;
  // false when there was no config.json: tensors are described, family and scheme are unknown.
  bool has_config = true;
  ModelFacts facts;
  std::vector<MoeLayer> layers;     // sorted by (layer_index, prefix)
  std::vector<std::string> notes;   // non-fatal observations for the user
  uint64_t tensor_count() const { return shards->tensor_count(); }
  uint64_t total_bytes = 0;         // payload bytes of every tensor
  const MoeLayer* find_layer(const std::string& prefix) const;
};

// Opens CKPT (a directory or one .safetensors file). Without a config.json (a lone file), the
// tensors are still described and MoE layers found by name, but nothing that needs the config
// (family, shapes against it, canonical params) is known: `has_config` is false and `layers`
// lists what the names say with `quant.scheme` "unknown". Throws Error(bad_input) naming the file,
// tensor and rule for anything malformed or inconsistent; a checkpoint without MoE layers (even
// without tensors) is valid and has `layers` empty.
Checkpoint open_checkpoint(const std::string& path);

// Canonical params of one expert (see the header comment). Keys are vLLM parameter names
// ("w13_weight", "w2_weight_scale", ...); shapes drop the expert dim; bytes are copied from the
// mapped files, so memory is one expert's tensors. Values are raw: no dtype casts, no padding,
// no tensor-parallel slicing; scale dtypes are the checkpoint's (vLLM may cast F16 scales to the
// model dtype on load — the packer does that).
struct ExpertParams {
  W13Order w13_order = W13Order::gate_then_up;
  std::map<std::string, OwnedTensor> tensors;
};
// `only_param` (a vLLM param name such as "w13_weight_scale") reads just that param: a
// converter packing one tensor at a time then touches only the bytes it needs.
ExpertParams read_expert_params(const Checkpoint& ckpt, const MoeLayer& layer, uint64_t expert, std::string_view only_param = {});

// `inspect --check-values`: scans tensor data for values no kernel should ever see — NaN/Inf in
// float tensors (F64/F32/F16/BF16, F8 E5M2 NaN/Inf, F8 E4M3 NaN 0x7F/0xFF), and E8M0 NaN (0xFF)
// in MX scale tensors (F8_E8M0 tensors, and the U8 scale tensors of MX-quantized expert layers).
struct ValueFinding {
  std::string tensor;
  std::string file;
  uint64_t element = 0;   // flat (row-major) element index
  std::string what;       // "NaN", "+Inf", "-Inf", "E8M0 NaN (0xFF)"
};
struct ValueScan {
  uint64_t tensors_scanned = 0;
  uint64_t bytes_scanned = 0;
  uint64_t bad_values = 0;                    // total over every tensor
  std::map<std::string, uint64_t> per_tensor; // tensor -> count of bad values
  std::vector<ValueFinding> listed;           // the first `max_listed` findings, in file order
};
ValueScan scan_values(const Checkpoint& ckpt, size_t max_listed = 32);

// ---- used by the family files and detect.cpp (not by callers) -----------------------------

namespace detail {

// What a family contributes: checkpoint-level scheme text and, per MoE layer, the vLLM dispatch
// and the on-disk recipe.
class FamilyRules {
 public:
  virtual ~FamilyRules() = default;
  virtual Family family() const = 0;
  virtual std::string scheme() const = 0;
  // `layer_prefix` is the HF tensor prefix of the experts ("model.layers.3.mlp.experts").
  virtual LayerQuant layer_quant(const std::string& layer_prefix) const = 0;
  virtual ExpertRecipe recipe(const LayerQuant& q, ExpertNaming naming) const = 0;
};

struct DetectInput {
  const nlohmann::json& config;           // config.json object (or null)
  const nlohmann::json& quant_config;     // the quantization block (or null)
  const std::string& quant_source;        // file it came from, for messages
  const st::ShardSet& shards;
  // The path of config.json, for messages (they name the file, docs/CLI.md; a bare "config.json"
  // would not say which checkpoint).
  std::string config_file() const { return shards.root() + "/config.json"; }
};

std::unique_ptr<FamilyRules> make_gpt_oss_rules(const DetectInput& in);
std::unique_ptr<FamilyRules> make_compressed_tensors_rules(const DetectInput& in);
std::unique_ptr<FamilyRules> make_modelopt_rules(const DetectInput& in);
std::unique_ptr<FamilyRules> make_quark_rules(const DetectInput& in);
std::unique_ptr<FamilyRules> make_gptq_rules(const DetectInput& in);
std::unique_ptr<FamilyRules> make_awq_rules(const DetectInput& in);
std::unique_ptr<FamilyRules> make_fp8_rules(const DetectInput& in);
std::unique_ptr<FamilyRules> make_deepseek_v4_rules(const DetectInput& in);
std::unique_ptr<FamilyRules> make_unquantized_rules(const DetectInput& in);
// Whatever the family, vLLM loads gpt-oss (model_type `gpt_oss`) with the model's own loaders,
// picked by the config's quant_method (lower case; "" without a quantization config): the
// family's rules with the recipe they leave (gpt_oss.cpp).
std::unique_ptr<FamilyRules> with_gpt_oss_loaders(std::unique_ptr<FamilyRules> family, std::string quant_method);

// Picks the family from the configs (detect.cpp).
std::unique_ptr<FamilyRules> detect_family(const DetectInput& in);
ModelFacts read_model_facts(const nlohmann::json& config, const st::ShardSet& shards, const std::string& config_path);

// The unquantized layer every family falls back to for ignored layers.
LayerQuant unquantized_layer_quant(const std::string& model_dtype);
ExpertRecipe unquantized_recipe();

// Shared recipes (one definition each, family_helpers.cpp; several families store the same tensors).
// FP4 packed weight + block scales: `weight_suffix` U8 [out, in/2], `scale_suffix` [out, in/group].
std::vector<SourceTensorRule> fp4_weight_rules(const std::string& weight_suffix, DType scale_dtype, uint64_t group);
// FP8 E4M3 weight [out, in].
SourceTensorRule fp8_weight_rule(const std::string& suffix = "weight");
// A per-tensor scale (shape [] or [1]) of float dtype.
SourceTensorRule scalar_rule(const std::string& suffix, Assemble w13, bool required = true);
// FP8 block scales [ceil(out/bn), ceil(in/bk)].
SourceTensorRule block_scale_rule(const std::string& suffix, uint64_t bn, uint64_t bk, std::vector<DType> dtypes);

// JSON helpers shared by the family files (family_helpers.cpp): typed reads that name the file and key on error.
const nlohmann::json* find_key(const nlohmann::json& obj, const std::string& key);
std::string json_string(const nlohmann::json& obj, const std::string& key, const std::string& file, const std::string& fallback = "");
int64_t json_int(const nlohmann::json& obj, const std::string& key, const std::string& file, int64_t fallback);
bool json_bool(const nlohmann::json& obj, const std::string& key, const std::string& file, bool fallback);
std::string lower(std::string s);
// Module-name matching as vLLM's quantization configs do it.
bool regex_prefix_match(const std::string& pattern, const std::string& text, const std::string& file);  // Python re.match
bool fnmatch_glob(const std::string& pattern, const std::string& text);                                 // fnmatch.fnmatch

}  // namespace detail
}  // namespace moepack::ckpt
