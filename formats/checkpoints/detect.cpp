// Which family a checkpoint belongs to (by its quantization config's `quant_method`, the way
// vLLM's `get_quantization_config` + `override_quantization_method` route it), and the model
// facts of config.json the oracle needs (oracle.md 1.1, 2.4).
#include <cmath>

#include "formats/checkpoints/checkpoint.h"
#include "lib/core/error.h"

namespace moepack::ckpt::detail {

namespace {

uint64_t first_uint(const nlohmann::json& cfg, std::initializer_list<const char*> keys, const std::string& file) {
  for (const char* k : keys) {
    int64_t v = json_int(cfg, k, file, -1);
    if (v >= 0) return static_cast<uint64_t>(v);
  }
  return 0;
}

std::optional<double> json_number(const nlohmann::json& cfg, const char* key, const std::string& file) {
  const auto* v = find_key(cfg, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw_bad_input(file, "", std::string("`") + key + "` must be a number, got " + v->dump());
  return v->get<double>();
}

// vLLM MoEActivation values from HF `hidden_act` spellings.
std::string moe_activation(const std::string& model_type, const std::string& hidden_act) {
  if (model_type == "gpt_oss") return "swigluoai";  // clamped SwiGLU with interleaved gate/up
  std::string a = lower(hidden_act);
  if (a.empty() || a == "silu" || a == "swish") return "silu";
  if (a == "gelu") return "gelu";
  if (a == "gelu_pytorch_tanh" || a == "gelu_tanh") return "gelu_tanh";
  if (a == "relu2") return "relu2";
  return a;
}

// RoutingMethodType from the router description (`get_routing_method_type`, oracle.md 2.4).
std::string routing_method(const ModelFacts& f) {
  if (f.model_type == "llama4") return "Llama4";
  if (f.scoring_func == "sqrtsoftplus") return f.renormalize ? "DeepseekV4" : "Unspecified";
  if (f.scoring_func == "sigmoid") {
    if (f.has_e_score_correction_bias) {
      if (!f.renormalize) return "Unspecified";
      if (f.n_group > 0) return "DeepSeekV3";
      bool unit_scaling = !f.routed_scaling_factor || *f.routed_scaling_factor == 1.0;
      return unit_scaling ? "MiniMax2" : "Unspecified";
    }
    return f.renormalize ? "SigmoidRenorm" : "Sigmoid";
  }
  if (f.has_e_score_correction_bias) return "Unspecified";
  if (f.scoring_func == "softmax") return f.renormalize ? "RenormalizeNaive" : "Default";
  return "Unspecified";
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

ModelFacts read_model_facts(const nlohmann::json& config, const st::ShardSet& shards, const std::string& file) {
  ModelFacts f;
  f.model_type = json_string(config, "model_type", file);
  if (const auto* a = find_key(config, "architectures"); a && a->is_array() && !a->empty() && (*a)[0].is_string())
    f.architecture = (*a)[0].get<std::string>();
  // Multimodal wrappers keep the language model's numbers in `text_config`.
  const nlohmann::json* text = find_key(config, "text_config");
  const nlohmann::json& cfg = (text && text->is_object() && !find_key(config, "hidden_size")) ? *text : config;
  f.dtype = json_string(config, "torch_dtype", file, json_string(config, "dtype", file, json_string(cfg, "torch_dtype", file)));
  f.hidden_size = first_uint(cfg, {"hidden_size"}, file);
  f.moe_intermediate_size = first_uint(cfg, {"moe_intermediate_size", "intermediate_size"}, file);
  f.num_experts = first_uint(cfg, {"num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"}, file);
  f.num_shared_experts = first_uint(cfg, {"n_shared_experts", "num_shared_experts"}, file);
  f.top_k = first_uint(cfg, {"num_experts_per_tok", "experts_per_token", "moe_topk"}, file);
  f.num_hidden_layers = first_uint(cfg, {"num_hidden_layers"}, file);
  f.hidden_act = json_string(cfg, "hidden_act", file);
  f.activation = moe_activation(f.model_type, f.hidden_act);
  // Nemotron-H's experts are not gated: vLLM passes activation_without_mul(mlp_hidden_act)
  // (relu2 -> relu2_no_mul) and loads up_proj as w1 (ERRATA 12).
  if (const std::string mlp_act = json_string(cfg, "mlp_hidden_act", file); !mlp_act.empty() && f.model_type.rfind("nemotron_h", 0) == 0)
    f.activation = moe_activation("", mlp_act) + "_no_mul";
  f.moe_hidden_size = first_uint(cfg, {"moe_latent_size"}, file);
  // DeepSeek-V4 scores with sqrt(softplus); Nemotron-H's router is a sigmoid (fixed in the model).
  const char* default_scoring = f.model_type == "deepseek_v4" ? "sqrtsoftplus" : f.model_type.rfind("nemotron_h", 0) == 0 ? "sigmoid" : "softmax";
  f.scoring_func = lower(json_string(cfg, "scoring_func", file, default_scoring));
  bool renormalize_default = f.model_type == "mixtral" || f.model_type == "gpt_oss" || f.model_type == "deepseek_v4";
  f.renormalize = json_bool(cfg, "norm_topk_prob", file, renormalize_default);
  f.n_group = first_uint(cfg, {"n_group"}, file);
  f.topk_group = first_uint(cfg, {"topk_group"}, file);
  f.routed_scaling_factor = json_number(cfg, "routed_scaling_factor", file);
  f.swiglu_limit = json_number(cfg, "swiglu_limit", file);
  if (f.model_type == "deepseek_v4") f.num_hash_layers = first_uint(cfg, {"num_hash_layers"}, file);
  // The correction bias is a router tensor (DeepSeek-V4 names it `ffn.gate.bias`).
  for (const auto& sf : shards.files()) {
    for (const auto& t : sf->header().tensors) {
      if (ends_with(t.name, ".e_score_correction_bias") || (f.model_type == "deepseek_v4" && ends_with(t.name, ".ffn.gate.bias"))) {
        f.has_e_score_correction_bias = true;
        break;
      }
    }
    if (f.has_e_score_correction_bias) break;
  }
  f.routing_method = routing_method(f);
  f.has_bias = f.model_type == "gpt_oss";
  return f;
}

LayerQuant unquantized_layer_quant(const std::string& model_dtype) {
  LayerQuant q;
  q.scheme = model_dtype == "float16" ? "fp16" : model_dtype == "float32" ? "fp32" : "bf16";
  q.method = {"", "UnquantizedFusedMoEMethod", "unquantized", "", ""};
  q.weight_bits = model_dtype == "float32" ? 32 : 16;
  return q;
}

ExpertRecipe unquantized_recipe() {
  ExpertRecipe r;
  SourceTensorRule w{"weight", {DType::BF16, DType::F16, DType::F32}, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i}; }};
  w.param = "weight";
  SourceTensorRule b{"bias", {DType::BF16, DType::F16, DType::F32}, [](uint64_t o, uint64_t) { return std::vector<uint64_t>{o}; }, false};
  b.param = "bias";
  r.tensors = {w, b};
  return r;
}

namespace {

// The family whose quantization config this is.
std::unique_ptr<FamilyRules> quantization_family(const DetectInput& in) {
  if (in.quant_config.is_null()) return make_unquantized_rules(in);
  std::string method = lower(json_string(in.quant_config, "quant_method", in.quant_source));
  std::string model_type = json_string(in.config, "model_type", in.config_file());
  // Legacy side files name no method: quantize_config.json is AutoGPTQ's, hf_quant_config.json ModelOpt's.
  if (method.empty()) {
    if (ends_with(in.quant_source, "quantize_config.json")) method = "gptq";
    else if (ends_with(in.quant_source, "hf_quant_config.json") || find_key(in.quant_config, "quantization")) method = "modelopt";
    else if (ends_with(in.quant_source, "quant_config.json") && find_key(in.quant_config, "w_bit")) method = "awq";
  }
  if (method == "mxfp4" || method == "gpt_oss_mxfp4") {
    if (model_type == "gpt_oss") return make_gpt_oss_rules(in);
    throw_bad_input(in.quant_source, "", "quant_method `" + method + "` is only supported for gpt-oss (model_type `gpt_oss`), not `" + model_type + "`");
  }
  if (method == "compressed-tensors") return make_compressed_tensors_rules(in);
  if (method.rfind("modelopt", 0) == 0 || method == "mxfp8") return make_modelopt_rules(in);
  if (method == "quark") return make_quark_rules(in);
  if (method == "gptq" || method == "gptq_marlin" || method == "auto_gptq") return make_gptq_rules(in);
  if (method == "awq" || method == "awq_marlin" || method == "auto_awq") return make_awq_rules(in);
  if (method == "deepseek_v4_fp8") return make_deepseek_v4_rules(in);
  if (method == "fp8") {
    // ERRATA 10: DeepSeek-V4 declares plain fp8 plus a top-level expert_dtype.
    if (model_type == "deepseek_v4" || find_key(in.config, "expert_dtype")) return make_deepseek_v4_rules(in);
    return make_fp8_rules(in);
  }
  if (method.empty()) throw_bad_input(in.quant_source, "", "the quantization config has no `quant_method`");
  throw_bad_input(in.quant_source, "", "unknown quant_method `" + method +
                                           "` (known: mxfp4, compressed-tensors, modelopt*, quark, gptq, awq, fp8, deepseek_v4_fp8)");
}

}  // namespace

std::unique_ptr<FamilyRules> detect_family(const DetectInput& in) {
  std::unique_ptr<FamilyRules> family = quantization_family(in);
  if (json_string(in.config, "model_type", in.config_file()) == "gpt_oss")
    return with_gpt_oss_loaders(std::move(family), lower(json_string(in.quant_config, "quant_method", in.quant_source)));
  return family;
}

}  // namespace moepack::ckpt::detail
